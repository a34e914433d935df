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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

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

// annotationWatch records, for every benchmark pod, when it was first seen with its port annotation.
type annotationWatch struct {
	mu    sync.Mutex
	added map[string]time.Time
	seen  map[string]time.Time
	stop  func()
}

func watchAnnotations(t testing.TB) *annotationWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &annotationWatch{added: map[string]time.Time{}, seen: map[string]time.Time{}, stop: cancel}
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
		if _, ok := w.seen[key]; !ok && p.Annotations[annotations.PodPort] != "" {
			w.seen[key] = now
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
	for _, k := range keys {
		at, _ := w.at(k, w.seen)
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

type stats struct{ p50, p95, p99, max float64 }

func summarize(ms []float64) stats {
	if len(ms) == 0 {
		return stats{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	q := func(f float64) float64 { return s[min(len(s)-1, int(f*float64(len(s))))] }
	return stats{p50: q(0.50), p95: q(0.95), p99: q(0.99), max: s[len(s)-1]}
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
	t.Cleanup(func() { _ = env.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// TestBenchmark measures its own floor (Neutron and Kubernetes alone) and then Raven, in one run.
func TestBenchmark(t *testing.T) {
	ctx := context.Background()
	res := map[string]any{}
	put := func(k string, v float64) { res[k] = float64(int64(v*100)) / 100 }
	res["machine"] = fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	res["when"] = time.Now().UTC().Format(time.RFC3339)
	w := watchAnnotations(t)
	defer w.stop()
	if env.raven != nil {
		env.raven.stop()
	}

	// ---- floor: Neutron and Kubernetes alone, Raven stopped.
	net, err := env.os.Networking.CreateNetwork(ctx, openstack.NetworkSpec{Name: "bench-floor-" + randSuffix()})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := env.os.Networking.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: net.ID, CIDR: "192.168.0.0/20", Name: "bench-floor"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ports, _ := env.os.Networking.ListPorts(ctx, openstack.Filter{NetworkID: net.ID})
		for _, p := range ports {
			_ = env.os.Networking.DeletePort(ctx, p.ID)
		}
		_ = env.os.Networking.DeleteNetwork(ctx, net.ID)
	}()
	deletePorts := func(ps []openstack.Port) {
		for _, p := range ps {
			_ = env.os.Networking.DeletePort(ctx, p.ID)
		}
	}
	var single []float64
	var made []openstack.Port
	for i := range 50 {
		start := time.Now()
		// The same request Raven makes for a pod: name, owner, device and four tags.
		p, err := env.os.Networking.CreatePort(ctx, floorSpec(net.ID, sub.ID, i))
		if err != nil {
			t.Fatal(err)
		}
		single = append(single, msSince(start, time.Now()))
		made = append(made, *p)
	}
	deletePorts(made)
	fs := summarize(single)
	put("floor.neutron_create_p50", fs.p50)
	put("floor.neutron_create_p99", fs.p99)
	bulk := func(n int) (time.Duration, []openstack.Port) {
		start := time.Now()
		var all []openstack.Port
		for n > 0 {
			k := min(n, 50)
			specs := make([]openstack.PortSpec, k)
			for i := range specs {
				specs[i] = floorSpec(net.ID, sub.ID, i)
			}
			ps, err := env.os.Networking.CreatePorts(ctx, specs)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ps...)
			n -= k
		}
		return time.Since(start), all
	}
	d, ps := bulk(50)
	deletePorts(ps)
	put("floor.neutron_bulk_ports_per_s", 50/d.Seconds())

	floorNS := benchNamespace(t, "bench-floor")
	var watchLat, patchLat []float64
	for i := range 30 {
		name := fmt.Sprintf("floor-%d", i)
		// hostNetwork: Raven leaves these alone, so they cost it nothing in the phases that follow.
		fp := benchPod(name)
		fp.Spec.HostNetwork = true
		start := time.Now()
		if _, err := env.kube.CoreV1().Pods(floorNS).Create(ctx, fp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.wait(t, []string{floorNS + "/" + name}, w.added, 10*time.Second)
		at, _ := w.at(floorNS+"/"+name, w.added)
		watchLat = append(watchLat, msSince(start, at))
	}
	for i := range 50 {
		start := time.Now()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench/floor":"%d"}}}`, i)
		if _, err := env.kube.CoreV1().Pods(floorNS).Patch(ctx, "floor-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		patchLat = append(patchLat, msSince(start, time.Now()))
	}
	// The same for a burst: as many pods as the warm-pool burst, created at once by 32 clients.
	burstFloor := map[string][]string{}
	for i := range *benchWarm {
		burstFloor[floorNS] = append(burstFloor[floorNS], fmt.Sprintf("floor-burst-%d", i))
	}
	floorStarts := createConcurrentlyWith(t, burstFloor, func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	var burstWatch []float64
	for k, start := range floorStarts {
		w.wait(t, []string{k}, w.added, 30*time.Second)
		at, _ := w.at(k, w.added)
		burstWatch = append(burstWatch, msSince(start, at))
	}
	put("floor.k8s_burst_watch_p99", summarize(burstWatch).p99)
	put("floor.k8s_watch_p50", summarize(watchLat).p50)
	put("floor.k8s_patch_p50", summarize(patchLat).p50)
	t.Logf("floor: neutron create p50 %.0f ms p99 %.0f ms, bulk %.1f ports/s, k8s watch p50 %.1f ms (p99 %.0f ms in a burst of %d), patch p50 %.1f ms",
		fs.p50, fs.p99, 50/d.Seconds(), summarize(watchLat).p50, summarize(burstWatch).p99, *benchWarm, summarize(patchLat).p50)

	// ---- pools off: one pod at a time.
	startRaven(t, ravenOpts{args: []string{"--port-pools=false"}})
	offNS := benchNamespace(t, "bench-off")
	namespaceSubnet(t, offNS)
	var offLat []float64
	for i := range *benchOff {
		name := fmt.Sprintf("off-%d", i)
		start := time.Now()
		if _, err := env.kube.CoreV1().Pods(offNS).Create(ctx, benchPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.wait(t, []string{offNS + "/" + name}, w.seen, 30*time.Second)
		at, _ := w.at(offNS+"/"+name, w.seen)
		offLat = append(offLat, msSince(start, at))
	}
	offStats := summarize(offLat)
	put("pools_off.p50", offStats.p50)
	put("pools_off.p99", offStats.p99)
	t.Logf("pools off: p50 %.0f ms (Neutron single create p50 %.0f ms)", offStats.p50, fs.p50)

	// ---- burst: N pods over M namespaces at once, default configuration (pools on).
	r := startRaven(t, ravenOpts{})
	burst := map[string][]string{}
	var keys []string
	for i := range *benchNS {
		ns := benchNamespace(t, fmt.Sprintf("bench-burst%d", i))
		namespaceSubnet(t, ns)
		for j := i; j < *benchPods; j += *benchNS {
			name := fmt.Sprintf("burst-%d", j)
			burst[ns] = append(burst[ns], name)
			keys = append(keys, ns+"/"+name)
		}
	}
	waitRefillsDone(t, r)
	calls0, _ := r.openstackCalls(t)
	cpu0, _, _ := procStat(t, r.cmd.Process.Pid)
	burstStart := time.Now()
	starts := createConcurrently(t, burst)
	w.wait(t, keys, w.seen, 10*time.Minute)
	burstLat, last := w.latencies(keys, starts)
	total := last.Sub(burstStart).Seconds()
	calls1, _ := r.openstackCalls(t)
	cpu1, _, hwm := procStat(t, r.cmd.Process.Pid)
	bs := summarize(burstLat)
	res["burst.pods"] = *benchPods
	put("burst.p50", bs.p50)
	put("burst.p95", bs.p95)
	put("burst.p99", bs.p99)
	put("burst.max", bs.max)
	put("burst.total_s", total)
	put("burst.pods_per_s", float64(*benchPods)/total)
	put("burst.neutron_calls_per_pod", (calls1-calls0)/float64(*benchPods))
	put("burst.raven_cpu_s", cpu1-cpu0)
	put("burst.raven_peak_rss_mib", hwm)
	for _, p := range burst {
		_ = p
	}
	// Neutron's own time for the same number of ports, in bulk, same run.
	bd, bps := bulk(*benchPods)
	deletePorts(bps)
	put("burst.neutron_bulk_total_s", bd.Seconds())
	t.Logf("burst of %d: p50 %.0f p95 %.0f p99 %.0f max %.0f ms, total %.1f s (Neutron bulk alone %.1f s), %.2f calls/pod",
		*benchPods, bs.p50, bs.p95, bs.p99, bs.max, total, bd.Seconds(), (calls1-calls0)/float64(*benchPods))

	// ---- warm pools: the pool holds enough ready ports for the whole burst.
	warmCfg := writeConfig(t, fmt.Sprintf("pools: {enabled: true, minFree: %d, batch: 50, max: %d}\n", *benchWarm, *benchWarm+50))
	r = startRaven(t, ravenOpts{config: warmCfg})
	warmNS := benchNamespace(t, "bench-warm")
	namespaceSubnet(t, warmNS)
	eventually(t, 3*time.Minute, "the warm pool to fill", func() (bool, error) {
		ports, err := env.os.Networking.ListPorts(ctx, openstack.Filter{Tags: ownership.Owner{Cluster: env.cluster, Kind: ownership.KindPool, Name: warmNS}.Tags()})
		return len(ports) >= *benchWarm, err
	})
	waitRefillsDone(t, r)
	warm := map[string][]string{}
	var warmKeys []string
	for i := range *benchWarm {
		name := fmt.Sprintf("warm-%d", i)
		warm[warmNS] = append(warm[warmNS], name)
		warmKeys = append(warmKeys, warmNS+"/"+name)
	}
	wstarts := createConcurrently(t, warm)
	w.wait(t, warmKeys, w.seen, 5*time.Minute)
	warmLat, _ := w.latencies(warmKeys, wstarts)
	ws := summarize(warmLat)
	put("pools_warm.p50", ws.p50)
	put("pools_warm.p99", ws.p99)
	put("pools_warm.max", ws.max)
	t.Logf("warm pools, burst of %d: p50 %.0f p99 %.0f max %.0f ms", *benchWarm, ws.p50, ws.p99, ws.max)

	// ---- churn: every pod of a namespace replaced at once, ports deleted (default) or recycled.
	for _, recycle := range []bool{false, true} {
		label := map[bool]string{false: "delete", true: "recycle"}[recycle]
		c := churn(t, w, *benchWarm, recycle)
		put("churn_"+label+".total_s", c.total)
		put("churn_"+label+".p99", c.p99)
		put("churn_"+label+".neutron_writes", c.writes)
		put("churn_"+label+".neutron_cpu_s", c.neutronCPU)
		t.Logf("churn of %d pods, ports %sd: new pods annotated in %.1f s (p99 %.0f ms), %v Neutron writes until the pools settled, Neutron CPU %.1f s",
			*benchWarm, label, c.total, c.p99, c.writes, c.neutronCPU)
	}

	// ---- cold start with many pods in sync.
	r = startRaven(t, ravenOpts{})
	existing, err := env.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := len(existing.Items)
	extra := map[string][]string{}
	var extraKeys []string
	for i := 0; have < *benchCold; i++ {
		ns := benchNamespace(t, fmt.Sprintf("bench-cold%d", i))
		namespaceSubnet(t, ns)
		for j := 0; j < 150 && have < *benchCold; j++ {
			name := fmt.Sprintf("cold-%d", j)
			extra[ns] = append(extra[ns], name)
			extraKeys = append(extraKeys, ns+"/"+name)
			have++
		}
	}
	createConcurrently(t, extra)
	w.wait(t, extraKeys, w.seen, 15*time.Minute)
	waitPoolsSettled(t)
	pods, err := env.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nss, err := env.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.stop()
	coldStart := time.Now()
	r = startRaven(t, ravenOpts{})
	eventually(t, time.Minute, "Raven to load its view and reconcile", func() (bool, error) {
		return r.metric(t, "raven_reconciling", nil) == 1, nil
	})
	ready := time.Since(coldStart).Seconds()
	// The window holds the start-up load, the first resync and one whole periodic resync.
	r.waitResyncs(t, 0, 2, 15*time.Minute)
	ccalls, cwrites := r.openstackCalls(t)
	_, rss, _ := procStat(t, r.cmd.Process.Pid)
	res["coldstart.pods"] = len(pods.Items)
	res["coldstart.namespaces"] = len(nss.Items)
	put("coldstart.ready_s", ready)
	put("coldstart.neutron_calls", ccalls)
	put("coldstart.neutron_writes", cwrites)
	put("rss_mib", rss)
	t.Logf("cold start with %d pods in %d namespaces: ready in %.2f s, %v calls, %v writes, RSS %.0f MiB",
		len(pods.Items), len(nss.Items), ready, ccalls, cwrites, rss)

	// ---- a Service with many ready endpoints.
	svcNS := benchNamespace(t, "bench-svc")
	namespaceSubnet(t, svcNS)
	createDeployment(t, svcNS, "many", int32(*benchEndpoints))
	eventually(t, 10*time.Minute, "all endpoints ready", func() (bool, error) {
		return len(readyPodIPs(t, svcNS, "many")) == *benchEndpoints, nil
	})
	isOctavia := func(l string) bool { return strings.Contains(l, `operation="octavia `) }
	isBatch := func(l string) bool { return strings.Contains(l, `operation="octavia member batch_update"`) }
	o0 := r.metric(t, "raven_openstack_request_duration_seconds_count", isOctavia)
	b0 := r.metric(t, "raven_openstack_request_duration_seconds_count", isBatch)
	svcStart := time.Now()
	svc := createService(t, svcNS, "many", nil)
	waitMembers(t, svcNS, "many", svc.UID, *benchEndpoints, 80)
	res["service.endpoints"] = *benchEndpoints
	put("service.members_s", time.Since(svcStart).Seconds())
	put("service.octavia_calls", r.metric(t, "raven_openstack_request_duration_seconds_count", isOctavia)-o0)
	put("service.batch_calls", r.metric(t, "raven_openstack_request_duration_seconds_count", isBatch)-b0)
	t.Logf("service with %d endpoints: members in %.1f s, %v batch calls", *benchEndpoints, time.Since(svcStart).Seconds(), res["service.batch_calls"])

	writeResults(t, res, map[string][]float64{"burst (pools on)": burstLat, "warm pools": warmLat, "pools off, one at a time": offLat})
}

func writeResults(t testing.TB, res map[string]any, series map[string][]float64) {
	t.Helper()
	dir := filepath.Join(env.repo, *benchOut)
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
	if err := plotCDF(filepath.Join(dir, "latency.png"), series); err != nil {
		t.Fatal(err)
	}
	t.Logf("results in %s:\n%s", dir, md.String())
}

// floorSpec is a port request shaped like Raven's (the tags name a cluster no Raven runs for).
type churnResult struct{ total, p99, writes, neutronCPU float64 }

// churn fills a namespace with n pods, then deletes them all and creates n others at once: the time until
// the new pods are annotated, and what it cost Neutron (Raven's writes and Neutron's CPU time) until the
// old ports are gone or back in the pool and the pool is refilled.
func churn(t *testing.T, w *annotationWatch, n int, recycle bool) churnResult {
	t.Helper()
	ctx := context.Background()
	label := map[bool]string{false: "delete", true: "recycle"}[recycle]
	r := startRaven(t, ravenOpts{config: writeConfig(t, fmt.Sprintf("pools: {enabled: true, minFree: 5, batch: 10, max: %d, recycle: %v}\n", n+50, recycle))})
	ns := benchNamespace(t, "bench-churn-"+label)
	namespaceSubnet(t, ns)
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
	w.wait(t, oldKeys, w.seen, 5*time.Minute)
	waitRefillsDone(t, r)
	_, writes0 := r.openstackCalls(t)
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
	w.wait(t, freshKeys, w.seen, 5*time.Minute)
	lat, last := w.latencies(freshKeys, starts)
	eventually(t, 5*time.Minute, "the old pods' ports released", func() (bool, error) {
		return len(clusterPortsIn(t, ns)) == n, nil
	})
	waitRefillsDone(t, r)
	_, writes1 := r.openstackCalls(t)
	res := churnResult{total: last.Sub(start).Seconds(), p99: summarize(lat).p99, writes: writes1 - writes0,
		neutronCPU: groupCPU(t, env.vars["STACK_DIR"]+"/pids/neutron-server.pid") - cpu0}
	r.stop()
	return res
}

// groupCPU is the CPU time, in seconds, of the process group whose leader's PID is in pidFile (Neutron's
// API process and its RPC workers).
func groupCPU(t testing.TB, pidFile string) float64 {
	t.Helper()
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pgid := strings.TrimSpace(string(raw))
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total float64
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b)[strings.LastIndex(string(b), ")")+2:])
		if len(f) > 12 && f[2] == pgid {
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			total += (ut + st) / 100
		}
	}
	return total
}

func floorSpec(network, subnet string, i int) openstack.PortSpec {
	o := ownership.Owner{Cluster: "bench-floor", Kind: ownership.KindPod, UID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Name: "bench/floor"}
	return openstack.PortSpec{NetworkID: network, SubnetID: subnet, Name: fmt.Sprintf("floor-%d", i), DeviceOwner: "raven:pod",
		DeviceID: o.UID, Description: "pod bench/floor", Tags: o.Tags()}
}

// waitRefillsDone waits until Raven has refilled every port pool (none for 3 s), so that pool upkeep does not
// mix into the next measurement.
func waitRefillsDone(t testing.TB, r *Raven) {
	t.Helper()
	quiet := 0
	eventually(t, 5*time.Minute, "every port pool refilled", func() (bool, error) {
		if r.metric(t, "raven_port_pool_refills_in_progress", nil) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		return quiet >= 30, nil
	})
}
