//go:build bench

// Package scale is Raven's scale benchmark (make bench-scale): a real kube-apiserver and etcd, OpenStack
// simulated over HTTP (hack/openstack-sim) with the per-call latency and concurrency measured on the real
// ML2/OVN stack (make bench-calibrate), and Raven run from its binary, measured apart from both.
package scale

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

var (
	sizesFlag   = flag.String("scale.sizes", "1000,10000,50000", "pod counts, grown one after the other in one cluster")
	phasesFlag  = flag.String("scale.phases", "steady,coldstart,failover,churn", "the phases measured at each size once grown, in this order")
	modelFlag   = flag.String("scale.model", "bench/results/scale/model.json", "the simulator's latency model (make bench-calibrate), from the repository root")
	outFlag     = flag.String("scale.out", "bench/results/scale", "where the results go, from the repository root")
	churnSecs   = flag.Int("scale.churn-seconds", 60, "length of the churn phase")
	churnRate   = flag.Float64("scale.churn-rate", 0, "pods created (and as many deleted) per second in the churn phase (0: half of what the simulated Neutron can make)")
	resyncFlag  = flag.Duration("scale.resync", time.Minute, "Raven's resync period")
	auditFlag   = flag.Duration("scale.port-audit", config.Default().PortAuditPeriod.Duration, "Raven's portAuditPeriod (how often a resync lists every port)")
	budgetFlag  = flag.Int("scale.budget", 1000, "pools.budget: free pool ports cluster-wide")
	leaseFlag   = flag.Duration("scale.lease", 15*time.Second, "leader election lease duration (renew deadline 2/3 of it, retry 1/5)")
	replicaName = []string{"raven-a", "raven-b"}
)

// bench holds the running parts.
type bench struct {
	repo, dir, ravenBin string
	k                   *kube
	s                   *sim
	w                   *watch
	config              string
	ravens              map[string]*raven
	res                 map[string]any
}

func TestBenchmarkScale(t *testing.T) {
	ctx := t.Context()
	b := setupBench(t)
	var sizes []int
	for _, f := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("-scale.sizes: %v", err)
		}
		sizes = append(sizes, n)
	}
	var results []map[string]any
	prev := shape{}
	for _, n := range sizes {
		to := shapeOf(n)
		r := b.size(ctx, t, prev, to)
		results = append(results, r)
		b.res["sizes"] = results
		b.write(t)
		prev = to
	}
	b.res["curve"] = curve(results)
	b.write(t)
}

func setupBench(t *testing.T) *bench {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "bin", "scale")
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &bench{repo: repo, dir: dir, ravens: map[string]*raven{}, res: map[string]any{}}
	logf(t, "building raven and the OpenStack simulator")
	b.ravenBin = filepath.Join(dir, "raven")
	simBin := filepath.Join(dir, "openstack-sim")
	for bin, pkg := range map[string]string{b.ravenBin: "./cmd/raven", simBin: "./hack/openstack-sim"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir, cmd.Stderr = repo, os.Stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("go build %s: %v", pkg, err)
		}
	}
	logf(t, "starting etcd and kube-apiserver")
	b.k = startKube(t, repo, dir)
	model := filepath.Join(repo, *modelFlag)
	b.s = startSim(t, simBin, dir, model)
	raw, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	b.res["model"] = m
	b.res["when"] = time.Now().UTC().Format(time.RFC3339)
	b.res["machine"] = fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if rev, err := exec.Command("git", "-C", repo, "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		b.res["raven"] = strings.TrimSpace(string(rev))
	}
	b.config = b.ravenConfig(t)
	b.res["raven_config"] = b.config
	b.w = watchPods(t, b.k.client)
	b.start(t, replicaName[0])
	waitEvery(t.Context(), t, time.Minute, scrapeEvery, "the first replica to lead", func() (bool, error) {
		return b.ravens[replicaName[0]].metric(t, "raven_reconciling") == 1, nil
	})
	b.start(t, replicaName[1])
	return b
}

func logf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (b *bench) ravenConfig(t testing.TB) string {
	t.Helper()
	clouds := filepath.Join(b.dir, "clouds.yaml")
	cy := fmt.Sprintf(`clouds:
  sim:
    auth_type: none
    auth: {project_id: raven}
    network_endpoint_override: %s
    load_balancer_endpoint_override: %s
`, b.s.Neutron, b.s.Octavia)
	if err := os.WriteFile(clouds, []byte(cy), 0o600); err != nil {
		t.Fatal(err)
	}
	renew, retry := *leaseFlag*2/3, *leaseFlag/5
	return fmt.Sprintf(`clusterID: scale
kubeconfig: %s
openstack: {cloudsFile: %s, cloud: sim}
neutron:
  externalNetwork: public
  externalSubnetCIDR: 172.24.4.0/24
  podSubnetPoolCIDR: 10.128.0.0/9
  podSubnetPrefixLength: 24
  serviceSubnetCIDR: %s
  tagPortsOnCreate: "true"
namespaces: {exclude: [kube-node-lease, kube-system, kube-public, default]}
pools: {enabled: true, perNode: true, minFree: 5, batch: 10, max: 50, idleAfter: 10m, budget: %d}
octavia: {provider: ovn}
resyncPeriod: %s
portAuditPeriod: %s
orphanGracePeriod: 2m
leaderElection: {enabled: true, namespace: default, leaseDuration: %s, renewDeadline: %s, retryPeriod: %s}
`, b.k.kubeconfig, clouds, serviceCIDR, *budgetFlag, *resyncFlag, *auditFlag, *leaseFlag, renew, retry)
}

func (b *bench) start(t testing.TB, name string) *raven {
	t.Helper()
	r := startRaven(t, b.ravenBin, b.dir, name, b.config)
	b.ravens[name] = r
	return r
}

// leader is the replica that reconciles, and the other one.
func (b *bench) leader(t testing.TB) (leader, standby *raven) {
	t.Helper()
	for _, name := range replicaName {
		r := b.ravens[name]
		if r == nil || r.exited() {
			continue
		}
		if r.metric(t, "raven_reconciling") == 1 {
			leader = r
		} else {
			standby = r
		}
	}
	if leader == nil {
		t.Fatal("no replica reconciles")
	}
	return leader, standby
}

func (b *bench) write(t testing.TB) {
	t.Helper()
	out := filepath.Join(b.repo, *outFlag)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "latest.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "latest.md"), []byte(markdown(b.res)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// size grows the cluster from `from` to `to` and measures every phase at that size.
func (b *bench) size(ctx context.Context, t *testing.T, from, to shape) map[string]any {
	r := map[string]any{"pods": to.pods, "nodes": to.nodes, "namespaces": to.namespaces, "services": to.namespaces,
		"endpoints": to.pods, "node_namespace_pairs": to.nodes * to.namespaces}
	b.growPhase(ctx, t, from, to, r)
	phases := map[string]func(context.Context, *testing.T, shape, map[string]any){
		"steady": b.steadyPhase, "coldstart": b.coldStartPhase, "failover": b.failoverPhase, "churn": b.churnPhase,
	}
	for _, name := range strings.Split(*phasesFlag, ",") {
		phase, ok := phases[strings.TrimSpace(name)]
		if !ok {
			t.Fatalf("-scale.phases: no phase %q", name)
		}
		phase(ctx, t, to, r)
	}
	return r
}

// objects is every Kubernetes object Raven caches at a size: pods, nodes, namespaces, Services, EndpointSlices.
func (s shape) objects() int { return s.pods + s.nodes + 3*s.namespaces }

// growPhase creates the objects with the simulator's latency off (fast-forward), and waits until Raven has
// annotated every pod and made every load balancer member: that is set-up, and Raven's own cost of it.
func (b *bench) growPhase(ctx context.Context, t *testing.T, from, to shape, r map[string]any) {
	logf(t, "growing to %d pods, %d nodes, %d namespaces and Services", to.pods, to.nodes, to.namespaces)
	b.s.latency(t, false)
	defer b.s.latency(t, true)
	leader, _ := b.leader(t)
	before := leader.usage(t)
	start := time.Now()
	grow(ctx, t, b.k.client, from, to)
	created := time.Since(start)
	waitFor(ctx, t, to.within(30*time.Minute), fmt.Sprintf("%d pods annotated", to.pods), func() (bool, error) {
		return b.w.grown.Load() >= int64(to.pods), nil
	})
	annotated := time.Since(start)
	publishEndpoints(ctx, t, b.k.client, b.w, from, to)
	waitFor(ctx, t, to.within(30*time.Minute), fmt.Sprintf("%d load balancer members", to.pods), func() (bool, error) {
		st := b.s.stats(t)
		return st.object("members") >= float64(to.pods) && st.object("loadbalancers") >= float64(to.namespaces), nil
	})
	// The pools fill too: the steady state begins once Raven writes nothing more.
	b.s.quiet(ctx, t, 3*time.Second)
	after := leader.usage(t)
	added := float64(to.pods - from.pods)
	r["grow"] = map[string]any{
		"created_s": created.Seconds(), "annotated_s": annotated.Seconds(), "members_s": time.Since(start).Seconds(),
		"raven_cpu_s": after.CPUSeconds - before.CPUSeconds, "raven_cpu_ms_per_pod": 1000 * (after.CPUSeconds - before.CPUSeconds) / added,
	}
	logf(t, "grown: created in %.0f s, annotated in %.0f s, members in %.0f s; Raven CPU %.1f s", created.Seconds(), annotated.Seconds(),
		time.Since(start).Seconds(), after.CPUSeconds-before.CPUSeconds)
}

// steadyPhase counts the OpenStack calls of one whole resync period with nothing changing, and Raven's memory.
func (b *bench) steadyPhase(ctx context.Context, t *testing.T, to shape, r map[string]any) {
	leader, standby := b.leader(t)
	logf(t, "steady state: waiting for two resyncs")
	n0 := leader.metric(t, "raven_resyncs_total")
	waitEvery(ctx, t, 3**resyncFlag+10*time.Minute, scrapeEvery, "a resync", func() (bool, error) { return leader.metric(t, "raven_resyncs_total") > n0, nil })
	// The window holds one whole resync, between two listings of every port (portAuditPeriod): a window that held
	// such a listing is recorded apart, and the next resync is measured.
	var (
		period time.Duration
		st     simStats
		whole  map[string]any
	)
	for n := n0 + 1; ; n++ {
		all := leader.metric(t, "raven_port_listings_total")
		b.s.reset(t)
		start := time.Now()
		waitEvery(ctx, t, 2**resyncFlag+10*time.Minute, scrapeEvery, "the next resync", func() (bool, error) {
			return leader.metric(t, "raven_resyncs_total") > n, nil
		})
		period, st = time.Since(start), b.s.stats(t)
		if leader.metric(t, "raven_port_listings_total") == all || whole != nil || *auditFlag <= *resyncFlag {
			break // (every resync lists every port when portAuditPeriod is not longer than the resync period)
		}
		whole = map[string]any{"calls": st.Totals.Calls, "list_calls": st.Totals.ListCalls, "list_pages": st.Totals.ListPages, "writes": st.Totals.Writes}
		logf(t, "steady: that resync listed every port (%d calls, %d pages; portAuditPeriod %v); measuring the next one", st.Totals.Calls, st.Totals.ListPages, *auditFlag)
	}
	u := leader.usage(t)
	heap := leader.metric(t, "go_memstats_heap_inuse_bytes") / (1 << 20)
	profile := filepath.Join(b.dir, fmt.Sprintf("heap-%d.pprof", to.pods))
	leader.saveHeapProfile(t, profile)
	su := standby.usage(t)
	standbyHeap := standby.metric(t, "go_memstats_heap_inuse_bytes") / (1 << 20)
	steady := map[string]any{
		"period_s": period.Seconds(), "calls": st.Totals.Calls, "writes": st.Totals.Writes, "list_calls": st.Totals.ListCalls,
		"list_pages": st.Totals.ListPages, "by_op": opCalls(st),
		"calls_per_namespace": float64(st.Totals.Calls) / float64(to.namespaces),
		"leader_rss_mib":      u.RSSMiB, "leader_heap_inuse_mib": heap, "standby_rss_mib": su.RSSMiB,
		"standby_heap_inuse_mib": standbyHeap,
		"leader_heap_profile":    profile,
		"rss_kib_per_pod":        u.RSSMiB * 1024 / float64(to.pods),
		"rss_kib_per_object":     u.RSSMiB * 1024 / float64(to.objects()),
		"free_pool_ports":        b.s.stats(t).object("free_pool_ports"),
		"neutron_ports":          st.object("ports"),
		"budget":                 *budgetFlag,
		"budget_starved":         leader.metric(t, "raven_port_pool_budget_starved_total"),
		"port_audit_period_s":    auditFlag.Seconds(),
	}
	if whole != nil {
		steady["whole_listing_resync"] = whole
	}
	r["steady"] = steady
	logf(t, "steady: %d calls in one resync (%d list calls, %d pages, %d writes); leader RSS %.0f MiB (%.1f KiB per pod), standby %.0f MiB; %v free pool ports",
		st.Totals.Calls, st.Totals.ListCalls, st.Totals.ListPages, st.Totals.Writes, u.RSSMiB, u.RSSMiB*1024/float64(to.pods), su.RSSMiB, steady["free_pool_ports"])
}

func opCalls(st simStats) map[string]int64 {
	out := map[string]int64{}
	for op, s := range st.Ops {
		if s.Calls > 0 {
			out[op] = s.Calls
		}
	}
	return out
}

// reconciled says a replica that just started has loaded its view of OpenStack and reconciled every pod,
// namespace and Service once, with nothing left in its queues.
// It reads them from one scrape.
func reconciled(t testing.TB, r *raven, to shape) bool {
	m := r.scrape(t)
	if m.sum("raven_reconciling") != 1 {
		return false
	}
	for ctrl, n := range map[string]int{"pod": to.pods, "namespace": to.namespaces, "service": to.namespaces} {
		if m.sum("controller_runtime_reconcile_total", `controller="`+ctrl+`"`) < float64(n) {
			return false
		}
	}
	return m.sum("workqueue_depth") == 0
}

// coldStartPhase stops both replicas and starts one: its time to reconciled, its calls (0 writes).
func (b *bench) coldStartPhase(ctx context.Context, t *testing.T, to shape, r map[string]any) {
	logf(t, "cold start")
	for _, name := range replicaName {
		b.ravens[name].stop(syscall.SIGTERM, 20*time.Second)
	}
	b.s.quiet(ctx, t, 3*time.Second) // what the stopped replicas asked is served
	floor, floorPorts, floorCalls := b.listFloor(ctx, t)
	b.s.reset(t)
	one := b.start(t, replicaName[0])
	// A CPU profile of the start, for as long as the floor and a quarter: where Raven's time above it goes.
	cpu := filepath.Join(b.dir, fmt.Sprintf("cpu-coldstart-%d.pprof", to.pods))
	profiled := one.profileCPU(cpu, floor+floor/4)
	d := waitEvery(ctx, t, to.within(10*time.Minute), scrapeEvery, "the restarted replica to reconcile everything", func() (bool, error) {
		return reconciled(t, one, to), nil
	})
	total := time.Since(one.started)
	loaded := one.metric(t, "raven_reconciling")
	st := b.s.stats(t)
	u := one.usage(t)
	r["coldstart"] = map[string]any{
		"reconciled_s": total.Seconds(), "since_healthy_s": d.Seconds(), "calls": st.Totals.Calls, "writes": st.Totals.Writes,
		"list_calls": st.Totals.ListCalls, "list_pages": st.Totals.ListPages, "by_op": opCalls(st),
		"raven_cpu_s": u.CPUSeconds, "rss_mib": u.RSSMiB, "reconciling": loaded,
		"floor_list_s": floor.Seconds(), "floor_list_calls": floorCalls, "floor_ports_s": floorPorts.Seconds(),
	}
	if err := <-profiled; err != nil {
		t.Error(err)
	} else {
		r["coldstart"].(map[string]any)["cpu_profile"] = cpu
	}
	logf(t, "cold start: reconciled in %.1f s with %d calls (%d list calls, %d pages), %d writes; the floor (the same lists by hand) %.1f s, "+
		"the port listing alone %.1f s", total.Seconds(), st.Totals.Calls, st.Totals.ListCalls, st.Totals.ListPages, st.Totals.Writes,
		floor.Seconds(), floorPorts.Seconds())
	if st.Totals.Writes != 0 {
		t.Errorf("a cold start with everything in sync wrote %d times to OpenStack: %v", st.Totals.Writes, opCalls(st))
	}
	b.start(t, replicaName[1])
}

// failoverPhase kills the leader (no lease release) and times a new pod's annotation: the standby must take
// the lease, load its view and write.
func (b *bench) failoverPhase(ctx context.Context, t *testing.T, to shape, r map[string]any) {
	leader, standby := b.leader(t)
	if standby == nil {
		t.Fatal("no standby replica")
	}
	// A standby in service is ready (its caches synced) and has watched the leader renew its lease: a candidate
	// counts a lease as expired one lease duration after it first saw the lease's record unchanged, so one that
	// just started would wait longer. The cold start phase has just started this one.
	watched := *leaseFlag + *leaseFlag/5
	waitEvery(ctx, t, 5*time.Minute, scrapeEvery, "the standby to be ready and to have watched the lease", func() (bool, error) {
		return time.Since(standby.started) > watched && standby.ready(), nil
	})
	logf(t, "failover: killing %s", leader.name)
	killed := time.Now()
	leader.stop(syscall.SIGKILL, 10*time.Second)
	ns := namespaceName(0)
	name := fmt.Sprintf("failover-%d", to.pods)
	if _, err := b.k.client.CoreV1().Pods(ns).Create(ctx, benchPod(ns, name, nodeName(0)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, to.within(10*time.Minute), "the failover pod's annotation", func() (bool, error) {
		_, ok := b.w.at(ns + "/" + name)
		return ok, nil
	})
	at, _ := b.w.at(ns + "/" + name)
	r["failover"] = map[string]any{"to_first_write_s": at.Sub(killed).Seconds(), "lease_s": leaseFlag.Seconds()}
	logf(t, "failover: the standby wrote %.1f s after the leader was killed (lease %s)", at.Sub(killed).Seconds(), *leaseFlag)
	if err := b.k.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The new leader's first pass over every pod and Service ends before the next phase counts calls.
	d := waitEvery(ctx, t, to.within(15*time.Minute), scrapeEvery, "the new leader to reconcile everything", func() (bool, error) {
		return reconciled(t, standby, to), nil
	})
	r["failover"].(map[string]any)["to_reconciled_s"] = time.Since(killed).Seconds()
	// Read once the new leader has loaded its view: at its first write it serves new pods while it still lists
	// every port, and says it reconciles (raven_reconciling) only once that listing is in.
	r["failover"].(map[string]any)["standby_leads"] = standby.metric(t, "raven_reconciling") == 1
	logf(t, "failover: the new leader reconciled everything %.1f s after the kill (%.1f s after its first write)", time.Since(killed).Seconds(), d.Seconds())
	b.start(t, leader.name)
}

func percentile(ms []float64, p float64) float64 {
	if len(ms) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)]
}

// listFloor is a cold start's floor: what Raven must read to know the cluster's OpenStack side, listed by hand
// with the same clients and filters (namespace networks and subnets, every port of the cluster, the router's
// interfaces, the Services' load balancers with their listeners, pools and members), without Raven. The port
// listing runs beside the router's interfaces and the load balancers' reads, as Raven's does. ports
// is the time of the port listing alone: one paginated listing, which any writer that must not leak or
// duplicate a port reads before it writes.
func (b *bench) listFloor(ctx context.Context, t *testing.T) (all, ports time.Duration, calls int64) {
	c, err := openstack.NewClients(ctx, filepath.Join(b.dir, "clouds.yaml"), "sim", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ns := ownership.Selector(clusterID, ownership.KindNamespace)
	if _, err := c.Networking.ListNetworks(ctx, openstack.Filter{Tags: ns}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Networking.ListSubnets(ctx, openstack.Filter{Tags: ns}); err != nil {
		t.Fatal(err)
	}
	routers, err := c.Networking.ListRouters(ctx, openstack.Filter{Tags: ownership.Owner{Cluster: clusterID, Kind: ownership.KindCluster}.Tags()})
	if err != nil || len(routers) != 1 {
		t.Fatalf("the cluster's router: %d routers, %v", len(routers), err)
	}
	listed := make(chan error, 2)
	go func() {
		from := time.Now()
		_, err := c.Networking.ListPorts(ctx, openstack.Filter{Tags: ownership.ClusterSelector(clusterID)})
		ports = time.Since(from)
		listed <- err
	}()
	go func() { // the router's interfaces, which carry no tag of the cluster's, beside the ports
		_, err := c.Networking.ListPorts(ctx, openstack.Filter{DeviceID: routers[0].ID})
		listed <- err
	}()
	svc := ownership.Selector(clusterID, ownership.KindService)
	lbs, err := c.LoadBalancing.ListLoadBalancers(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	// What Octavia holds for each load balancer: the listeners and pools of all (two paginated lists), then
	// each one's members (the status tree), read with as many at once as Raven's workers.
	layouts, err := octavia.Layouts(ctx, c.LoadBalancing, svc)
	if err != nil {
		t.Fatal(err)
	}
	parallel(t, 0, len(lbs), 8, func(i int) error {
		_, err := octavia.ReadWith(ctx, c.LoadBalancing, lbs[i].ID, layouts[lbs[i].ID])
		return err
	})
	for range 2 {
		if err := <-listed; err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start), ports, c.Calls.Calls()
}
