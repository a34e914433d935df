//go:build e2e && bench

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/raven-net/raven/internal/config"
	podctl "github.com/raven-net/raven/internal/controller/pod"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

var (
	benchPods      = flag.Int("bench.pods", 300, "pods in the burst")
	benchNS        = flag.Int("bench.namespaces", 3, "namespaces the burst is spread over")
	benchWarm      = flag.Int("bench.warm-pods", 100, "pods in the warm-pool burst")
	benchOff       = flag.Int("bench.off-pods", 20, "pods created one at a time with pools off")
	benchCold      = flag.Int("bench.coldstart-pods", 1000, "pods in sync when Raven is restarted")
	benchEndpoints = flag.Int("bench.endpoints", 100, "ready endpoints of the benchmark service")
	benchOut       = flag.String("bench.out", "bench/results", "where latest.json, latest.md and latency.png go")
)

const benchLabel = "raven-bench"

// annotationWatch records, for every benchmark pod, when it was first seen with its port annotation, and
// when it was first seen bound to a node and Ready (on a stack with the node side: its network set up by the CNI).
type annotationWatch struct {
	mu    sync.Mutex
	added map[string]time.Time
	bound map[string]time.Time
	seen  map[string]time.Time
	ready map[string]time.Time
	stop  func()
}

func watchAnnotations(t testing.TB) *annotationWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &annotationWatch{added: map[string]time.Time{}, bound: map[string]time.Time{}, seen: map[string]time.Time{}, ready: map[string]time.Time{}, stop: cancel}
	// An informer, not a bare watch: it re-establishes the watch when the apiserver closes it under load.
	factory := informers.NewSharedInformerFactoryWithOptions(env.kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = benchLabel }))
	record := func(obj any, added bool) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		key := p.Namespace + "/" + p.Name
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.added[key]; added && !ok {
			w.added[key] = now
		}
		if _, ok := w.bound[key]; !ok && p.Spec.NodeName != "" {
			w.bound[key] = now
		}
		if _, ok := w.seen[key]; !ok && p.Annotations[annotations.PodPort] != "" {
			w.seen[key] = now
		}
		if _, ok := w.ready[key]; !ok && podReady(p) {
			w.ready[key] = now
		}
	}
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { record(o, true) },
		UpdateFunc: func(_, o any) { record(o, false) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	return w
}

func (w *annotationWatch) at(key string, m map[string]time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := m[key]
	return v, ok
}

func (w *annotationWatch) wait(t testing.TB, keys []string, m map[string]time.Time, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d pods observed", len(keys)), func() (bool, error) {
		for _, k := range keys {
			if _, ok := w.at(k, m); !ok {
				return false, nil
			}
		}
		return true, nil
	})
}

// latencies returns, for each pod key, the milliseconds from its create to its annotation being seen, and
// when the last of them was seen.
func (w *annotationWatch) latencies(keys []string, starts map[string]time.Time) (ms []float64, last time.Time) {
	return w.latenciesOf(w.seen, keys, starts)
}

// latenciesOf is latencies for the moments in m (seen or ready).
func (w *annotationWatch) latenciesOf(m map[string]time.Time, keys []string, starts map[string]time.Time) (ms []float64, last time.Time) {
	for _, k := range keys {
		at, _ := w.at(k, m)
		ms = append(ms, msSince(starts[k], at))
		if at.After(last) {
			last = at
		}
	}
	return ms, last
}

func benchPod(name string) *corev1.Pod {
	p := podSpec(name)
	p.Labels[benchLabel] = "true"
	return p
}

type stats struct {
	p50, p95, p99, max float64
	n                  int // samples
}

func summarize(ms []float64) stats {
	if len(ms) == 0 {
		return stats{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	q := func(f float64) float64 { return s[min(len(s)-1, int(f*float64(len(s))))] }
	return stats{p50: q(0.50), p95: q(0.95), p99: q(0.99), max: s[len(s)-1], n: len(s)}
}

// putStats records a latency sample under prefix: p50, the maximum and the number of samples always; p95
// and p99 only with more than 100 samples (with 100 or fewer, the "p99" is the maximum, and is reported as
// such).
func putStats(put func(string, float64), prefix string, s stats) {
	put(prefix+"p50", s.p50)
	put(prefix+"max", s.max)
	put(prefix+"samples", float64(s.n))
	if s.n > 100 {
		put(prefix+"p95", s.p95)
		put(prefix+"p99", s.p99)
	}
}

func msSince(a, b time.Time) float64 { return float64(b.Sub(a).Microseconds()) / 1000 }

// createConcurrently creates the pods with 32 clients and returns each pod's create start time by key.
func createConcurrently(t testing.TB, pods map[string][]string) map[string]time.Time {
	t.Helper()
	return createConcurrentlyWith(t, pods, nil)
}

func createConcurrentlyWith(t testing.TB, pods map[string][]string, mutate func(*corev1.Pod)) map[string]time.Time {
	t.Helper()
	type job struct{ ns, name string }
	jobs := make(chan job)
	starts := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for j := range jobs {
				p := benchPod(j.name)
				if mutate != nil {
					mutate(p)
				}
				start := time.Now()
				if _, err := env.kube.CoreV1().Pods(j.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				starts[j.ns+"/"+j.name] = start
				mu.Unlock()
			}
		})
	}
	for ns, names := range pods {
		for _, n := range names {
			jobs <- job{ns, n}
		}
	}
	close(jobs)
	wg.Wait()
	return starts
}

func procStat(t testing.TB, pid int) (cpuSeconds float64, rssMiB, hwmMiB float64) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(raw)[strings.LastIndex(string(raw), ")")+2:])
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	cpuSeconds = (ut + st) / 100
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.ParseFloat(f[1], 64)
			if f[0] == "VmRSS:" {
				rssMiB = kb / 1024
			} else {
				hwmMiB = kb / 1024
			}
		}
	}
	return cpuSeconds, rssMiB, hwmMiB
}

func benchNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := name + "-" + randSuffix()
	if _, err := env.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A phase deletes its namespaces itself (endPhase); this is for a run that fails half way.
	t.Cleanup(func() { _ = env.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// benchRaven is how every Raven of the benchmark starts: with the shipped resync, port audit and orphan grace
// periods (config.Default(): 5 min, 30 min and 2 min), not the harness's short ones nor the local stack's
// configuration file's 30 s and 10 s, so that what is measured is what a default installation does.
func benchRaven(o ravenOpts) ravenOpts {
	d := config.Default()
	o.resync, o.orphanGrace, o.portAudit = d.ResyncPeriod.Duration, d.OrphanGracePeriod.Duration, d.PortAuditPeriod.Duration
	o.process = true
	return o
}

// budget derives every wait of the benchmark from floors measured at the start of the same run, so that a
// slower Neutron makes the run longer, not failed: a wait gives up only after slack times the floor's
// estimate of the work it waits for, and never before minWait.
type budget struct {
	create  time.Duration // one Neutron port create, alone: the slowest of the floor's 50
	bulk    time.Duration // one port of a 50-port Neutron bulk create
	del     time.Duration // one Neutron port delete, alone: the floor's median of 50
	network time.Duration // a Neutron network and its subnet created
}

const (
	slack   = 10
	minWait = time.Minute
)

func (b budget) within(estimate time.Duration) time.Duration { return max(minWait, slack*estimate) }

// ports is how long Raven may take to make n ports and delete d (or send d other single writes).
func (b budget) ports(n, d int) time.Duration {
	return b.within(b.create + time.Duration(n)*b.bulk + time.Duration(d)*b.del)
}

// namespace is how long Raven may take to give a namespace its network: a network, a subnet, the router
// interface and their tags, counted as three times the floor's network and subnet.
func (b budget) namespace() time.Duration { return b.within(3 * b.network) }

// teardown is how long the deletion of nss namespaces holding ports ports (pods' and pools') may take.
func (b budget) teardown(nss, ports int) time.Duration {
	return b.within(time.Duration(ports)*b.del + time.Duration(nss)*3*b.network)
}

// benchSubnet waits until Raven has given the namespace its subnet annotation.
func benchSubnet(t testing.TB, ns string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "namespace "+ns+" to get its subnet annotation", func() (bool, error) {
		n, err := env.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var sub annotations.Subnet
		ok, err := annotations.Decode(n.Annotations, annotations.NamespaceSubnet, &sub)
		return ok && err == nil, err
	})
}

// terminatingNamespaces is the number of namespaces being deleted.
func terminatingNamespaces(t testing.TB) (int, error) {
	t.Helper()
	nss, err := env.kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ns := range nss.Items {
		if ns.DeletionTimestamp != nil {
			n++
		}
	}
	return n, nil
}

// ravenPorts is the number of this cluster's pod and pool ports in Neutron.
func ravenPorts(t testing.TB) int {
	t.Helper()
	n := 0
	for _, kind := range []ownership.Kind{ownership.KindPod, ownership.KindPool} {
		ports, err := env.os.Networking.ListPorts(context.Background(), openstack.Filter{Tags: ownership.Selector(env.cluster, kind)})
		if err != nil {
			t.Fatal(err)
		}
		n += len(ports)
	}
	return n
}

// waitNamespacesGone waits until no namespace is Terminating (a Raven must be running: its finalizer holds
// each namespace until its network is gone).
func waitNamespacesGone(t testing.TB, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "no namespace left Terminating", func() (bool, error) {
		n, err := terminatingNamespaces(t)
		return n == 0 && err == nil, err
	})
}

// poolWork bounds the ports Raven may still make for its pools: the shipped pool maximum for every live
// namespace.
func poolWork(t testing.TB) int {
	t.Helper()
	nss, err := env.kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(nss.Items) * config.Default().Pools.Max
}

// endPhase deletes the phase's namespaces, waits until no namespace is left Terminating and Raven is idle
// again, so that their teardown (Raven deleting their ports, subnets and networks) does not slow the next
// phase. The running Raven does the teardown.
func endPhase(t *testing.T, b budget, nss ...string) {
	t.Helper()
	// A pool refill may still be under way: up to a batch (at most 50 ports) more per namespace.
	ports := ravenPorts(t) + 50*len(nss)
	start := time.Now()
	for _, ns := range nss {
		if err := env.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitNamespacesGone(t, b.teardown(len(nss), ports))
	waitSandboxesGone(t, 5*time.Minute, nss...)
	waitRavenQuiet(t, env.raven, b, poolWork(t), 0)
	t.Logf("teardown of %d namespaces took %.1f s", len(nss), time.Since(start).Seconds())
}

// neutronCalls returns the Neutron requests Raven made since it started, all of them and the writes.
func neutronCalls(t testing.TB, r *Raven) (calls, writes float64) {
	t.Helper()
	isNeutron := func(l string) bool { return strings.Contains(l, `operation="neutron `) }
	calls = r.metric(t, "raven_openstack_request_duration_seconds_count", isNeutron)
	writes = r.metric(t, "raven_openstack_request_duration_seconds_count", func(l string) bool {
		return isNeutron(l) && isWrite(l)
	})
	return calls, writes
}

// servedPods lists the pods Raven serves (podctl.NeedsPort: not hostNetwork, not finished), not being
// deleted, and the namespaces they are in.
func servedPods(t testing.TB) (pods int, namespaces map[string]bool) {
	t.Helper()
	list, err := env.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	namespaces = map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp == nil && podctl.NeedsPort(p) {
			pods++
			namespaces[p.Namespace] = true
		}
	}
	return pods, namespaces
}

// floorNetwork is the floor's own Neutron network and subnet, Raven stopped.
type floorNetwork struct {
	t               *testing.T
	network, subnet string
}

// newFloorNetwork makes a network named name-<random> with a subnet of cidr, for ports made by hand; it goes, with
// every port on it, when the test ends.
func newFloorNetwork(t *testing.T, name, cidr string) floorNetwork {
	t.Helper()
	ctx := context.Background()
	net, err := env.os.Networking.CreateNetwork(ctx, openstack.NetworkSpec{Name: name + "-" + randSuffix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ports, _ := env.os.Networking.ListPorts(ctx, openstack.Filter{NetworkID: net.ID})
		for _, p := range ports {
			_ = env.os.Networking.DeletePort(ctx, p.ID)
		}
		_ = env.os.Networking.DeleteNetwork(ctx, net.ID)
	})
	sub, err := env.os.Networking.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: net.ID, CIDR: cidr, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return floorNetwork{t: t, network: net.ID, subnet: sub.ID}
}

// deletePorts deletes the ports one at a time and returns each delete's time; a delete Neutron fails
// (a 500 "database is locked" under concurrent writes) is sent again, and its time includes the retries.
func (f floorNetwork) deletePorts(ps []openstack.Port) (ms []float64) {
	ctx := context.Background()
	for _, p := range ps {
		start := time.Now()
		err := env.os.Networking.DeletePort(ctx, p.ID)
		for try := 0; err != nil && !openstack.IsNotFound(err) && try < 3; try++ {
			time.Sleep(time.Second)
			err = env.os.Networking.DeletePort(ctx, p.ID)
		}
		if err != nil && !openstack.IsNotFound(err) {
			f.t.Fatal(err)
		}
		ms = append(ms, msSince(start, time.Now()))
	}
	return ms
}

// bulk creates n ports in bulk requests of at most 50 and returns the time it took and the ports.
func (f floorNetwork) bulk(n int) (time.Duration, []openstack.Port) {
	ctx := context.Background()
	start := time.Now()
	var all []openstack.Port
	for n > 0 {
		k := min(n, 50)
		specs := make([]openstack.PortSpec, k)
		for i := range specs {
			specs[i] = floorSpec(f.network, f.subnet, i)
		}
		ps, err := env.os.Networking.CreatePorts(ctx, specs)
		if err != nil {
			f.t.Fatal(err)
		}
		all = append(all, ps...)
		n -= k
	}
	return time.Since(start), all
}

// kubernetesFloor measures Kubernetes alone in namespace ns: create → watch of 30 hostNetwork pods, one at a
// time, and 50 annotation patches, in ms.
func kubernetesFloor(t *testing.T, w *annotationWatch, ns string) (watchLat, patchLat []float64) {
	ctx := context.Background()
	for i := range 30 {
		name := fmt.Sprintf("floor-%d", i)
		fp := benchPod(name)
		fp.Spec.HostNetwork = true
		start := time.Now()
		if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, fp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The first Kubernetes measure: nothing to derive its wait from.
		w.wait(t, []string{ns + "/" + name}, w.added, 30*time.Second)
		at, _ := w.at(ns+"/"+name, w.added)
		watchLat = append(watchLat, msSince(start, at))
	}
	for i := range 50 {
		start := time.Now()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench/floor":"%d"}}}`, i)
		if _, err := env.kube.CoreV1().Pods(ns).Patch(ctx, "floor-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		patchLat = append(patchLat, msSince(start, time.Now()))
	}
	return watchLat, patchLat
}

// podsOneByOne creates n pods named prefix-i in ns, each once the one before is annotated, and returns
// each one's create → annotation time in ms.
func podsOneByOne(t *testing.T, w *annotationWatch, ns, prefix string, n int, wait time.Duration) []float64 {
	ctx := context.Background()
	var lat []float64
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		start := time.Now()
		if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, benchPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.wait(t, []string{ns + "/" + name}, w.seen, wait)
		at, _ := w.at(ns+"/"+name, w.seen)
		lat = append(lat, msSince(start, at))
	}
	return lat
}

// kubernetesBurstFloor creates as many hostNetwork pods in ns as the warm-pool burst, at once by 32 clients,
// and returns each one's create → watch time in ms.
func kubernetesBurstFloor(t *testing.T, w *annotationWatch, ns string, wait time.Duration) []float64 {
	burstFloor := map[string][]string{}
	for i := range *benchWarm {
		burstFloor[ns] = append(burstFloor[ns], fmt.Sprintf("floor-burst-%d", i))
	}
	floorStarts := createConcurrentlyWith(t, burstFloor, func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	var burstWatch []float64
	for k, start := range floorStarts {
		w.wait(t, []string{k}, w.added, wait)
		at, _ := w.at(k, w.added)
		burstWatch = append(burstWatch, msSince(start, at))
	}
	return burstWatch
}

// burstNamespaces makes the burst's namespaces, each with its subnet, and spreads the burst's pods over
// them: the pod names by namespace, the keys (namespace/name) of all, and the namespaces.
func burstNamespaces(t *testing.T, b budget) (burst map[string][]string, keys, namespaces []string) {
	burst = map[string][]string{}
	for i := range *benchNS {
		ns := benchNamespace(t, fmt.Sprintf("bench-burst%d", i))
		namespaces = append(namespaces, ns)
		benchSubnet(t, ns, b.namespace())
		for j := i; j < *benchPods; j += *benchNS {
			name := fmt.Sprintf("burst-%d", j)
			burst[ns] = append(burst[ns], name)
			keys = append(keys, ns+"/"+name)
		}
	}
	return burst, keys, namespaces
}

// coldNamespaces makes namespaces of at most 150 pods each until, with the have pods already served, there
// are enough for the cold start: the pod names by namespace, their keys (namespace/name), and the namespaces.
func coldNamespaces(t *testing.T, b budget, have int) (extra map[string][]string, keys, namespaces []string) {
	extra = map[string][]string{}
	for i := 0; have < *benchCold; i++ {
		ns := benchNamespace(t, fmt.Sprintf("bench-cold%d", i))
		namespaces = append(namespaces, ns)
		benchSubnet(t, ns, b.namespace())
		for j := 0; j < 150 && have < *benchCold; j++ {
			name := fmt.Sprintf("cold-%d", j)
			extra[ns] = append(extra[ns], name)
			keys = append(keys, ns+"/"+name)
			have++
		}
	}
	return extra, keys, namespaces
}

// TestBenchmark measures its own floor (Neutron and Kubernetes alone) and then Raven, in one run. Every
// Raven it starts runs with the shipped resync period and orphan grace period (benchRaven); every wait is
// derived from the floor (budget); every phase leaves no namespace being torn down behind it (endPhase).
func TestBenchmark(t *testing.T) {
	ctx := context.Background()
	if env.vars["STACK_CNI"] == "1" {
		// The phases measure the control plane (create → annotation, Neutron and Octavia calls); with the node
		// side every pod would also be plugged into the userspace datapath, 1000 of them in the cold start.
		t.Fatal("the running local stack plugs pods (STACK_CNI=1); the benchmark measures the control plane: " +
			"stop the stack with 'make stack-down' and run 'make bench' again (it starts the stack with STACK_CNI=0)")
	}
	res := map[string]any{}
	put := func(k string, v float64) { res[k] = float64(int64(v*100)) / 100 }
	res["stack"] = "ML2/OVN Neutron and Octavia on MariaDB, no node side (STACK_CNI=0)"
	putRun(res)
	def := benchRaven(ravenOpts{})
	res["raven.resync_period"] = def.resync.String()
	res["raven.port_audit_period"] = def.portAudit.String()
	res["raven.orphan_grace_period"] = def.orphanGrace.String()
	w := watchAnnotations(t)
	defer w.stop()
	if env.raven != nil {
		env.raven.stop()
	}

	// ---- floor: Neutron alone, Raven stopped.
	netStart := time.Now()
	floor := newFloorNetwork(t, "bench-floor", "192.168.0.0/20")
	var b budget
	b.network = time.Since(netStart)
	deletePorts, bulk := floor.deletePorts, floor.bulk
	var single []float64
	var made []openstack.Port
	for i := range 50 {
		start := time.Now()
		// The same request Raven makes for a pod: name, owner, device and four tags.
		p, err := env.os.Networking.CreatePort(ctx, floorSpec(floor.network, floor.subnet, i))
		if err != nil {
			t.Fatal(err)
		}
		single = append(single, msSince(start, time.Now()))
		made = append(made, *p)
	}
	fs := summarize(single)
	putStats(put, "floor.neutron_create_", fs)
	ds := summarize(deletePorts(made))
	put("floor.neutron_delete_p50", ds.p50)
	d, ps := bulk(50)
	deletePorts(ps)
	put("floor.neutron_bulk_ports_per_s", 50/d.Seconds())
	put("floor.neutron_network_s", b.network.Seconds())
	b.create = time.Duration(fs.max * float64(time.Millisecond))
	b.bulk = d / 50
	b.del = time.Duration(ds.p50 * float64(time.Millisecond))
	t.Logf("floor: Neutron port create p50 %.0f ms, max %.0f ms (n = %d); delete p50 %.0f ms; bulk %.1f ports/s; network and subnet %.2f s",
		fs.p50, fs.max, fs.n, ds.p50, 50/d.Seconds(), b.network.Seconds())
	t.Logf("waits: a port %s, 100 ports %s, a namespace's network %s (%d × the floor, at least %s)",
		b.ports(1, 0), b.ports(100, 0), b.namespace(), slack, minWait)

	// ---- what earlier runs or tests left: namespaces still being torn down, pods without ports. A Raven
	// finishes it before anything else is measured, then stops.
	startRaven(t, def)
	left, err := terminatingNamespaces(t)
	if err != nil {
		t.Fatal(err)
	}
	leftPorts := ravenPorts(t)
	waitNamespacesGone(t, b.teardown(left, leftPorts))
	waitRavenQuiet(t, env.raven, b, poolWork(t), 0)
	t.Logf("before the run: %d namespaces Terminating, %d ports of Raven's in Neutron; cleared", left, leftPorts)
	env.raven.stop()

	// ---- floor: Kubernetes alone, Raven stopped. The floor's pods are hostNetwork: Raven would leave
	// them alone; their namespace is deleted before Raven starts again (it never sees it).
	floorNS := benchNamespace(t, "bench-floor")
	watchLat, patchLat := kubernetesFloor(t, w, floorNS)
	wls, pls := summarize(watchLat), summarize(patchLat)
	// The same for a burst: as many pods as the warm-pool burst, created at once by 32 clients.
	burstWatch := kubernetesBurstFloor(t, w, floorNS, b.within(time.Duration(*benchWarm)*time.Duration(wls.max*float64(time.Millisecond))))
	bws := summarize(burstWatch)
	putStats(put, "floor.k8s_burst_watch_", bws)
	put("floor.k8s_watch_p50", wls.p50)
	put("floor.k8s_patch_p50", pls.p50)
	t.Logf("floor: Kubernetes create → watch p50 %.1f ms (in a burst of %d: p50 %.0f ms, max %.0f ms), patch p50 %.1f ms",
		wls.p50, bws.n, bws.p50, bws.max, pls.p50)
	if err := env.kube.CoreV1().Namespaces().Delete(ctx, floorNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNamespacesGone(t, b.within(time.Duration(len(watchLat)+len(burstWatch))*2*time.Duration(pls.p50*float64(time.Millisecond))))

	// ---- pools off: one pod at a time.
	startRaven(t, benchRaven(ravenOpts{args: []string{"--port-pools=false"}}))
	offNS := benchNamespace(t, "bench-off")
	benchSubnet(t, offNS, b.namespace())
	offLat := podsOneByOne(t, w, offNS, "off", *benchOff, b.ports(1, 0))
	offStats := summarize(offLat)
	putStats(put, "pools_off.", offStats)
	t.Logf("pools off: p50 %.0f ms, max %.0f ms (n = %d; Neutron single create p50 %.0f ms)", offStats.p50, offStats.max, offStats.n, fs.p50)
	endPhase(t, b, offNS)

	// ---- burst: N pods over M namespaces at once, shipped configuration (pools on).
	r := startRaven(t, def)
	burst, keys, burstNSs := burstNamespaces(t, b)
	waitRavenQuiet(t, r, b, *benchNS*config.Default().Pools.Max, 0)
	calls0, _ := neutronCalls(t, r)
	cpu0, _, _ := procStat(t, r.cmd.Process.Pid)
	burstStart := time.Now()
	starts := createConcurrently(t, burst)
	w.wait(t, keys, w.seen, b.ports(*benchPods, 0))
	burstLat, last := w.latencies(keys, starts)
	total := last.Sub(burstStart).Seconds()
	calls1, _ := neutronCalls(t, r)
	cpu1, _, hwm := procStat(t, r.cmd.Process.Pid)
	bs := summarize(burstLat)
	res["burst.pods"] = *benchPods
	putStats(put, "burst.", bs)
	put("burst.total_s", total)
	put("burst.pods_per_s", float64(*benchPods)/total)
	put("burst.neutron_calls_per_pod", (calls1-calls0)/float64(*benchPods))
	put("burst.raven_cpu_s", cpu1-cpu0)
	put("burst.raven_peak_rss_mib", hwm)
	// Neutron's own time for the same number of ports, in bulk, same run, once Raven has finished its
	// background work (pool refills, the claimed ports' renames).
	waitRavenQuiet(t, r, b, *benchNS*config.Default().Pools.Max, 2*(*benchPods))
	bd, bps := bulk(*benchPods)
	deletePorts(bps)
	put("burst.neutron_bulk_total_s", bd.Seconds())
	t.Logf("burst of %d: p50 %.0f ms, max %.0f ms, total %.1f s (Neutron bulk alone %.1f s), %.2f Neutron calls/pod",
		*benchPods, bs.p50, bs.max, total, bd.Seconds(), (calls1-calls0)/float64(*benchPods))
	endPhase(t, b, burstNSs...)

	// ---- warm pools: the pool holds enough ready ports for the whole burst.
	warmCfg := writeConfig(t, fmt.Sprintf("pools: {enabled: true, minFree: %d, batch: 50, max: %d}\n", *benchWarm, *benchWarm+50))
	r = startRaven(t, benchRaven(ravenOpts{config: warmCfg}))
	warmNS := benchNamespace(t, "bench-warm")
	benchSubnet(t, warmNS, b.namespace())
	// Pools fill only where pods are being created (a namespace without pods holds no idle ports): one pod
	// first, then the pool fills to minFree.
	createConcurrently(t, map[string][]string{warmNS: {"warm-primer"}})
	w.wait(t, []string{warmNS + "/warm-primer"}, w.seen, b.ports(1, 0))
	eventually(t, b.ports(*benchWarm, 0), "the warm pool to fill", func() (bool, error) {
		ports, err := env.os.Networking.ListPorts(ctx, openstack.Filter{Tags: ownership.Owner{Cluster: env.cluster, Kind: ownership.KindPool, Name: warmNS}.Tags()})
		return len(ports) >= *benchWarm, err
	})
	waitRavenQuiet(t, r, b, *benchWarm+50, 0)
	warm := map[string][]string{}
	var warmKeys []string
	for i := range *benchWarm {
		name := fmt.Sprintf("warm-%d", i)
		warm[warmNS] = append(warm[warmNS], name)
		warmKeys = append(warmKeys, warmNS+"/"+name)
	}
	wstarts := createConcurrently(t, warm)
	// From the pool no port is made; the wait allows for making them all.
	w.wait(t, warmKeys, w.seen, b.ports(*benchWarm, 0))
	warmLat, _ := w.latencies(warmKeys, wstarts)
	ws := summarize(warmLat)
	putStats(put, "pools_warm.", ws)
	t.Logf("warm pools, burst of %d: p50 %.0f ms, max %.0f ms", *benchWarm, ws.p50, ws.max)
	endPhase(t, b, warmNS)

	// ---- churn: every pod of a namespace replaced at once, ports deleted (default) or recycled.
	for _, recycle := range []bool{false, true} {
		label := map[bool]string{false: "delete", true: "recycle"}[recycle]
		c := churn(t, w, b, *benchWarm, recycle)
		put("churn_"+label+".total_s", c.total)
		putStats(put, "churn_"+label+".", c.lat)
		put("churn_"+label+".neutron_writes", c.writes)
		put("churn_"+label+".neutron_cpu_s", c.neutronCPU)
		t.Logf("churn of %d pods, ports %sd: new pods annotated in %.1f s (max %.0f ms), %v Neutron writes until the pools settled, Neutron CPU %.1f s",
			*benchWarm, label, c.total, c.lat.max, c.writes, c.neutronCPU)
	}

	// ---- cold start: Raven restarted with many pods in sync. Only pods Raven serves count (none of the
	// floor's hostNetwork pods is left; servedPods leaves out any other).
	r = startRaven(t, def)
	have, _ := servedPods(t)
	extra, extraKeys, coldNSs := coldNamespaces(t, b, have)
	createConcurrently(t, extra)
	w.wait(t, extraKeys, w.seen, b.ports(len(extraKeys), 0))
	waitRavenQuiet(t, r, b, len(coldNSs)*config.Default().Pools.Max, 2*len(extraKeys))
	served, servedNS := servedPods(t)
	nss, err := env.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A floor for Raven's start-up load, which lists its ports, networks and subnets.
	listStart := time.Now()
	n := ravenPorts(t)
	if _, err := env.os.Networking.ListNetworks(ctx, openstack.Filter{}); err != nil {
		t.Fatal(err)
	}
	list := time.Since(listStart)
	load := b.within(10 * list)
	r.stop()
	coldStart := time.Now()
	r = startRaven(t, def)
	eventually(t, load, "Raven to load its view and reconcile", func() (bool, error) {
		return r.metric(t, "raven_reconciling", nil) == 1, nil
	})
	ready := time.Since(coldStart).Seconds()
	// The window runs from Raven's start until it has finished two resyncs: the start-up load and the first
	// sweep right after it, then one whole periodic resync (a second listing), a resync period later.
	r.waitResyncs(t, 0, 2, def.resync+2*load)
	window := time.Since(coldStart).Seconds()
	ccalls, cwrites := neutronCalls(t, r)
	ocalls := r.metric(t, "raven_openstack_request_duration_seconds_count", func(l string) bool { return strings.Contains(l, `operation="octavia `) })
	_, rss, _ := procStat(t, r.cmd.Process.Pid)
	res["coldstart.pods"] = served
	res["coldstart.pod_namespaces"] = len(servedNS)
	res["coldstart.namespaces"] = len(nss.Items)
	put("coldstart.ready_s", ready)
	put("coldstart.window_s", window)
	put("coldstart.neutron_calls", ccalls)
	put("coldstart.neutron_writes", cwrites)
	putWrites(t, r, res, "coldstart.write ")
	put("coldstart.octavia_calls", ocalls)
	put("rss_mib", rss)
	t.Logf("cold start with %d served pods (%d namespaces with pods, %d in all; %d ports listed in %.2f s): ready in %.2f s; from start to two finished resyncs (%.0f s): %v Neutron calls, %v Neutron writes, %v Octavia calls; RSS %.0f MiB",
		served, len(servedNS), len(nss.Items), n, list.Seconds(), ready, window, ccalls, cwrites, ocalls, rss)
	endPhase(t, b, coldNSs...)

	// ---- a Service with many ready endpoints. No pod runs on the hollow nodes of this stack, so the Service has
	// no selector and the benchmark publishes its EndpointSlice, as the owner of a selectorless Service does:
	// the addresses Raven gave the pods of a Deployment, each ready, with its pod as target.
	svcNS := benchNamespace(t, "bench-svc")
	benchSubnet(t, svcNS, b.namespace())
	createDeployment(t, svcNS, "many", int32(*benchEndpoints))
	var endpoints []discoveryv1.Endpoint
	eventually(t, b.ports(*benchEndpoints, 0), "every pod of the Deployment annotated", func() (bool, error) {
		endpoints = annotatedEndpoints(t, svcNS, "many")
		return len(endpoints) == *benchEndpoints, nil
	})
	isOctavia := func(l string) bool { return strings.Contains(l, `operation="octavia `) }
	isBatch := func(l string) bool { return strings.Contains(l, `operation="octavia member batch_update"`) }
	o0 := r.metric(t, "raven_openstack_request_duration_seconds_count", isOctavia)
	b0 := r.metric(t, "raven_openstack_request_duration_seconds_count", isBatch)
	svcStart := time.Now()
	svc := createService(t, svcNS, "many", func(s *corev1.Service) { s.Spec.Selector = nil })
	publishEndpoints(t, svc, endpoints)
	waitOctaviaMembers(t, svc.UID, *benchEndpoints)
	membersS := time.Since(svcStart).Seconds()
	waitMembersAt(t, svcNS+"/many", svc.UID, func() []string { return endpointAddresses(endpoints) }, *benchEndpoints, 80)
	res["service.endpoints"] = *benchEndpoints
	put("service.members_s", membersS)
	put("service.octavia_calls", r.metric(t, "raven_openstack_request_duration_seconds_count", isOctavia)-o0)
	put("service.batch_calls", r.metric(t, "raven_openstack_request_duration_seconds_count", isBatch)-b0)
	t.Logf("service with %d endpoints: members in %.1f s, %v batch calls", *benchEndpoints, membersS, res["service.batch_calls"])

	writeResults(t, res, map[string][]float64{"burst (pools on)": burstLat, "warm pools": warmLat, "pools off, one at a time": offLat})
	endPhase(t, b, svcNS)
}

// annotatedEndpoints is one ready endpoint for each pod of the Deployment name that has its port annotation:
// the port's address, the pod as target.
func annotatedEndpoints(t testing.TB, ns, name string) []discoveryv1.Endpoint {
	t.Helper()
	pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []discoveryv1.Endpoint
	for _, p := range pods.Items {
		var port annotations.Port
		if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &port); !ok || err != nil || len(port.FixedIPs) == 0 {
			continue
		}
		out = append(out, discoveryv1.Endpoint{
			Addresses:  []string{port.FixedIPs[0].IPAddress},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name, UID: p.UID},
		})
	}
	return out
}

// publishEndpoints writes the EndpointSlice of a selectorless Service with one unnamed TCP port.
func publishEndpoints(t testing.TB, svc *corev1.Service, endpoints []discoveryv1.Endpoint) {
	t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc.Name + "-bench", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints,
		Ports:       []discoveryv1.EndpointPort{{Name: new(""), Protocol: new(corev1.ProtocolTCP), Port: new(svc.Spec.Ports[0].TargetPort.IntVal)}},
	}
	if _, err := env.kube.DiscoveryV1().EndpointSlices(svc.Namespace).Create(context.Background(), es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// endpointAddresses is the endpoints' addresses, sorted.
func endpointAddresses(endpoints []discoveryv1.Endpoint) []string {
	var out []string
	for _, e := range endpoints {
		out = append(out, e.Addresses...)
	}
	slices.Sort(out)
	return out
}

// octaviaStall is how long the service phase waits for Octavia without seeing any progress (the load
// balancer's status, its pools or their members changing) before it gives up. Octavia is not part of the
// floor; this is the longest Raven itself waits before reporting LoadBalancerStuck (a load balancer in
// PENDING_CREATE, where an amphora may be booting).
const octaviaStall = 10 * time.Minute

// waitOctaviaMembers waits until the service's load balancer is ACTIVE with n members in its pools, for as
// long as Octavia keeps making progress.
func waitOctaviaMembers(t testing.TB, uid types.UID, n int) {
	t.Helper()
	ctx := context.Background()
	seen, since := "", time.Now()
	for {
		state, members := "no load balancer", 0
		if lb := serviceLB(t, uid); lb != nil {
			pools, err := env.os.LoadBalancing.ListPools(ctx, lb.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pools {
				ms, err := env.os.LoadBalancing.ListMembers(ctx, p.ID)
				if err != nil {
					t.Fatal(err)
				}
				members += len(ms)
			}
			state = fmt.Sprintf("%s, %d pools, %d members", lb.ProvisioningStatus, len(pools), members)
			if lb.ProvisioningStatus == "ACTIVE" && members == n {
				return
			}
		}
		if state != seen {
			seen, since = state, time.Now()
		}
		if time.Since(since) > octaviaStall {
			t.Fatalf("Octavia made no progress for %s towards %d members: %s", octaviaStall, n, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func writeResults(t testing.TB, res map[string]any, series map[string][]float64) {
	t.Helper()
	writeResultsTo(t, outDir(*benchOut), res, series)
}

// writeResultsTo writes latest.json and latest.md into dir, and latency.png when there are series to plot.
func writeResultsTo(t testing.TB, dir string, res map[string]any, series map[string][]float64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "latest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var md strings.Builder
	md.WriteString("| measure | value |\n|---|---|\n")
	for _, k := range keys {
		fmt.Fprintf(&md, "| `%s` | %v |\n", k, res[k])
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.md"), []byte(md.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(series) > 0 {
		if err := plotCDF(filepath.Join(dir, "latency.png"), series); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("results in %s:\n%s", dir, md.String())
}

type churnResult struct {
	total, writes, neutronCPU float64
	lat                       stats
}

// churn fills a namespace with n pods, then deletes them all and creates n others at once: the time until
// the new pods are annotated, and what it cost Neutron (Raven's Neutron writes and Neutron's CPU time) until
// the old ports are gone or back in the pool and Raven is idle again (pool refilled, claimed ports renamed).
func churn(t *testing.T, w *annotationWatch, b budget, n int, recycle bool) churnResult {
	t.Helper()
	ctx := context.Background()
	label := map[bool]string{false: "delete", true: "recycle"}[recycle]
	r := startRaven(t, benchRaven(ravenOpts{config: writeConfig(t, fmt.Sprintf("pools: {enabled: true, minFree: 5, batch: 10, max: %d, recycle: %v}\n", n+50, recycle))}))
	ns := benchNamespace(t, "bench-churn-"+label)
	benchSubnet(t, ns, b.namespace())
	gen := func(prefix string) (map[string][]string, []string) {
		pods, keys := map[string][]string{}, []string{}
		for i := range n {
			name := fmt.Sprintf("%s-%d", prefix, i)
			pods[ns] = append(pods[ns], name)
			keys = append(keys, ns+"/"+name)
		}
		return pods, keys
	}
	old, oldKeys := gen("old")
	createConcurrently(t, old)
	w.wait(t, oldKeys, w.seen, b.ports(n, 0))
	waitRavenQuiet(t, r, b, n+50, 2*n)
	_, writes0 := neutronCalls(t, r)
	cpu0 := groupCPU(t, env.vars["STACK_DIR"]+"/pids/neutron-server.pid")
	start := time.Now()
	var wg sync.WaitGroup
	for _, name := range old[ns] {
		wg.Go(func() {
			_ = env.kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		})
	}
	fresh, freshKeys := gen("new")
	starts := createConcurrently(t, fresh)
	wg.Wait()
	// The new pods may wait for n ports to be made while n old ones are deleted.
	w.wait(t, freshKeys, w.seen, b.ports(n, n))
	lat, last := w.latencies(freshKeys, starts)
	eventually(t, b.ports(0, n), "the old pods' ports released", func() (bool, error) {
		return len(clusterPortsIn(t, ns)) == n, nil
	})
	waitRavenQuiet(t, r, b, n+50, 2*n)
	_, writes1 := neutronCalls(t, r)
	res := churnResult{total: last.Sub(start).Seconds(), lat: summarize(lat), writes: writes1 - writes0,
		neutronCPU: groupCPU(t, env.vars["STACK_DIR"]+"/pids/neutron-server.pid") - cpu0}
	endPhase(t, b, ns)
	return res
}

// groupCPU is the CPU time, in seconds, of the process group whose leader's PID is in pidFile (Neutron's
// API process and its RPC workers).
func groupCPU(t testing.TB, pidFile string) float64 {
	t.Helper()
	cpu, _ := groupUsage(t, pidFile)
	return cpu
}

// floorSpec is a port request shaped like Raven's for a pod (the tags name a cluster no Raven runs for): bound
// to the node, as Raven binds a pod's port to the pod's node (ML2/OVN does the binding work in the create).
func floorSpec(network, subnet string, i int) openstack.PortSpec {
	o := ownership.Owner{Cluster: "bench-floor", Kind: ownership.KindPod, UID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Name: "bench/floor"}
	return openstack.PortSpec{NetworkID: network, SubnetID: subnet, Name: fmt.Sprintf("floor-%d", i), DeviceOwner: "raven:pod",
		DeviceID: o.UID, Description: "pod bench/floor", Tags: o.Tags(), HostID: env.vars["STACK_NODE_NAME"]}
}

// waitRavenQuiet waits until Raven is idle: no pool being refilled and no Neutron write for 3 s (refills,
// the claimed pool ports' renames and tags, deletes are done), so that its background work does not mix
// into the next measurement. Raven may still have to make ports ports (in bulk) and send writes single
// writes (a claimed pool port's rename and tags are two).
func waitRavenQuiet(t testing.TB, r *Raven, b budget, ports, writes int) {
	t.Helper()
	quiet, last := 0, -1.0
	eventually(t, b.ports(ports, writes), "Raven idle (no pool refill, no Neutron write for 3 s)", func() (bool, error) {
		_, writes := neutronCalls(t, r)
		if r.metric(t, "raven_port_pool_refills_in_progress", nil) == 0 && writes == last {
			quiet++
		} else {
			quiet = 0
		}
		last = writes
		return quiet >= 30, nil
	})
}

// putRun records in a benchmark's results where and when it ran: the machine, the OpenStack release, the time.
func putRun(res map[string]any) {
	res["machine"] = fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	res["openstack"] = openstackRelease()
	res["when"] = time.Now().UTC().Format(time.RFC3339)
}

// openstackRelease names the OpenStack release the stack runs and its ovn-octavia-provider, for the artifacts.
func openstackRelease() string {
	release := env.vars["STACK_OPENSTACK"]
	if release == "" {
		release = "unknown"
	}
	if p := env.vars["STACK_OVN_OCTAVIA_PROVIDER"]; p != "" {
		release += " (ovn-octavia-provider " + p + ")"
	}
	return release
}

// putWrites records each OpenStack write operation Raven made so far, under prefix: where the target is none, a
// run that makes some says which.
func putWrites(t testing.TB, r *Raven, res map[string]any, prefix string) {
	t.Helper()
	for op, n := range r.metricSeries(t, "raven_openstack_request_duration_seconds_count", isWrite) {
		res[prefix+op] = n
	}
}

// outDir is where a benchmark writes its results: dir as given when absolute, else in the repository.
func outDir(dir string) string {
	if filepath.IsAbs(dir) {
		return dir
	}
	return filepath.Join(env.repo, dir)
}
