//go:build e2e && bench

package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
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

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/server"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

var (
	benchNodePods   = flag.Int("bench.node-pods", 100, "pods in each burst of the node benchmark")
	benchNodeSeq    = flag.Int("bench.node-seq", 20, "single bound port creates timed for the node benchmark's Neutron floor")
	benchNodePhases = flag.String("bench.node-phases", "pools_off,pools_warm,pools_warm_per_node", "the node benchmark's phases after its floors")
	benchNodeOut    = flag.String("bench.node-out", "bench/results/node", "where the node benchmark writes latest.json and latest.md")
	benchNodePodsTo = flag.String("bench.node-pods-to", "", "when set, a file each phase appends one line per pod to: created → annotation seen, Ready seen, answered (ms)")
	nodeComponents  = []string{"raven-node", "ovs-vswitchd", "ovsdb-server", "ovn-controller", "node-standin", "neutron-server", "ovn-northd", "kube-apiserver", "etcd"}
)

// nodeUsage is the CPU seconds and resident memory of the processes that do a pod's network on the node side
// (and Neutron's, which binds the ports, and Kubernetes'), by process group, plus Raven's, plus the CPU seconds
// the whole machine spent ("machine", no RSS).
type nodeUsage map[string][2]float64 // name → {CPU seconds, RSS MiB}

func measureNode(t testing.TB) nodeUsage {
	t.Helper()
	u := nodeUsage{}
	for _, c := range nodeComponents {
		cpu, rss := groupUsage(t, filepath.Join(env.vars["STACK_DIR"], "pids", c+".pid"))
		u[c] = [2]float64{cpu, rss}
	}
	if env.raven != nil && env.raven.running() {
		cpu, rss, _ := procStat(t, env.raven.cmd.Process.Pid)
		u["raven"] = [2]float64{cpu, rss}
	}
	u["machine"] = [2]float64{machineBusy(t), 0}
	return u
}

// machineBusy is the CPU time, in seconds, all CPUs of the machine spent on anything but idling and waiting
// for I/O since boot.
func machineBusy(t testing.TB) float64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0]) // cpu user nice system idle iowait irq softirq steal ...
	var busy float64
	for i, v := range f[1:] {
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		busy += n
	}
	return busy / 100
}

// groupUsage is the CPU time, in seconds, and the resident memory, in MiB, of the process group whose leader's
// PID is in pidFile. The CPU time includes that of the children its processes waited for (ovs-vsctl for
// raven-node, the CNI plugin for the stand-in).
func groupUsage(t testing.TB, pidFile string) (cpu, rssMiB float64) {
	t.Helper()
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pgid := strings.TrimSpace(string(raw))
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b)[strings.LastIndex(string(b), ")")+2:])
		if len(f) > 21 && f[2] == pgid {
			for _, v := range f[11:15] { // utime, stime, cutime, cstime
				n, _ := strconv.ParseFloat(v, 64)
				cpu += n / 100
			}
			pages, _ := strconv.ParseFloat(f[21], 64)
			rssMiB += pages * float64(os.Getpagesize()) / (1 << 20)
		}
	}
	return cpu, rssMiB
}

// putUsage records the CPU each component spent between two measures, and its RSS at the second.
func putUsage(put func(string, float64), prefix string, a, b nodeUsage) {
	for name, v := range b {
		put(prefix+name+"_cpu_s", v[0]-a[name][0])
		if name != "machine" {
			put(prefix+name+"_rss_mib", v[1])
		}
	}
}

// probeUntil connects from the network namespace from to addr (TCP), sends a line and reads the answer, again
// and again, until an exchange succeeds or the deadline passes; it returns when the first exchange succeeded.
// A connection attempt gives up after 150 ms (a port without flows drops the SYN), so the moment is known
// within that.
func probeUntil(from, addr string, deadline time.Time) (time.Time, error) {
	var err error
	for time.Now().Before(deadline) {
		start := time.Now()
		err = inNetns(from, func() error {
			c, err := net.DialTimeout("tcp", addr, 150*time.Millisecond)
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			_ = c.SetDeadline(time.Now().Add(time.Second))
			if _, err := c.Write([]byte("hello\n")); err != nil {
				return err
			}
			_, err = bufio.NewReader(c).ReadString('\n')
			return err
		})
		if err == nil {
			return time.Now(), nil
		}
		if time.Since(start) < 20*time.Millisecond { // refused at once: do not spin
			time.Sleep(20 * time.Millisecond)
		}
	}
	return time.Time{}, fmt.Errorf("no exchange with %s from %s before the deadline: %w", addr, from, err)
}

// handPlugged is one port plugged by hand for the floor: a network namespace named after it, a veth whose
// host end is on br-int with the port's iface-id, and a server in the namespace answering on port 80.
type handPlugged struct {
	netns string
	port  openstack.Port
	ln    net.Listener
}

// plugByHand does what a CNI plugin must do for a port already bound to the node, and nothing else: the veth
// into the namespace (MAC, MTU, address, default route, no tx checksum), the host end on br-int with
// iface-id, attached-mac and iface-status. The namespace and its server exist before (the runtime and the
// pod make them, not the CNI).
func plugByHand(ctx context.Context, vs *ovs.VSCtl, h *handPlugged, subnet *openstack.Subnet) error {
	mac, err := net.ParseMAC(h.port.MACAddress)
	if err != nil {
		return err
	}
	_, cidr, _ := net.ParseCIDR(subnet.CIDR)
	gw := net.ParseIP(subnet.GatewayIP)
	ps := plug.Spec{Netns: "/var/run/netns/" + h.netns, IfName: "eth0", HostIfName: server.HostIfName(h.port.ID), MAC: mac,
		MTU: server.DefaultMTU, Address: &net.IPNet{IP: net.ParseIP(h.port.FixedIPs[0].IPAddress), Mask: cidr.Mask},
		Routes: []plug.Route{{Dst: plug.DefaultRoute(gw), GW: gw}}}
	if _, err := plug.Setup(ps); err != nil {
		return err
	}
	return vs.AddPort(ctx, ps.HostIfName, map[string]string{ovs.KeyIfaceID: h.port.ID, ovs.KeyAttachedMAC: mac.String(), ovs.KeyIfaceStatus: "active"})
}

// newHandNetns makes the namespace of a hand-plugged port and starts its server (in the test process, its
// socket in that namespace).
func newHandNetns(t *testing.T, h *handPlugged) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", h.netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", h.netns, err, out)
	}
	err := inNetns(h.netns, func() error {
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		var err error
		h.ln, err = net.Listen("tcp", ":80")
		return err
	})
	if err != nil {
		t.Fatalf("server in %s: %v", h.netns, err)
	}
	go func() {
		for {
			c, err := h.ln.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(c, "%s\n", h.netns)
			_ = c.Close()
		}
	}()
}

func (h *handPlugged) remove(vs *ovs.VSCtl) {
	ctx := context.Background()
	if h.ln != nil {
		_ = h.ln.Close()
	}
	host := server.HostIfName(h.port.ID)
	_ = vs.DelPort(ctx, host)
	_ = plug.Teardown("", "/var/run/netns/"+h.netns, "eth0", host)
	_ = exec.Command("ip", "netns", "del", h.netns).Run()
	_ = env.os.Networking.DeletePort(ctx, h.port.ID)
}

// nodeFloor measures, Raven stopped, on a network of its own: Neutron creating single ports bound to the
// node, one at a time (n = seq); then n ports created bound in advance and plugged by hand all at once, each
// until a connection from a prober namespace on the same network is answered. It returns both in ms.
func nodeFloor(t *testing.T, seq, n int) (createMs, plugMs []float64, u0, u1 nodeUsage) {
	t.Helper()
	ctx := context.Background()
	network, err := env.os.Networking.CreateNetwork(ctx, openstack.NetworkSpec{Name: "bench-node-floor-" + randSuffix()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.os.Networking.DeleteNetwork(context.Background(), network.ID) }()
	subnet, err := env.os.Networking.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: network.ID, CIDR: "192.168.16.0/23", Name: "bench-node-floor"})
	if err != nil {
		t.Fatal(err)
	}
	vs := &ovs.VSCtl{DB: env.vars["STACK_OVS_DB"], Bridge: "br-int"}
	var all []*handPlugged
	defer func() {
		for _, h := range all {
			h.remove(vs)
		}
	}()
	create := func(i int) *handPlugged {
		spec := floorSpec(network.ID, subnet.ID, i)
		start := time.Now()
		port, err := env.os.Networking.CreatePort(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		createMs = append(createMs, msSince(start, time.Now()))
		h := &handPlugged{netns: fmt.Sprintf("bench-floor-%d", i), port: *port}
		all = append(all, h)
		return h
	}
	prober := create(0)
	newHandNetns(t, prober)
	if err := plugByHand(ctx, vs, prober, subnet); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := vs.WaitInstalled(wctx, server.HostIfName(prober.port.ID), nil); err != nil {
		t.Fatal(err)
	}
	targets := make([]*handPlugged, 0, n)
	for i := range n {
		targets = append(targets, create(i+1))
	}
	createMs = createMs[:min(seq, len(createMs))]
	for _, h := range targets {
		newHandNetns(t, h)
	}
	plugMs = make([]float64, n)
	errs := make([]error, n)
	u0 = measureNode(t)
	var wg sync.WaitGroup
	deadline := time.Now().Add(5 * time.Minute)
	for i, h := range targets {
		wg.Go(func() {
			start := time.Now()
			if errs[i] = plugByHand(ctx, vs, h, subnet); errs[i] != nil {
				return
			}
			var at time.Time
			at, errs[i] = probeUntil(prober.netns, net.JoinHostPort(h.port.FixedIPs[0].IPAddress, "80"), deadline)
			plugMs[i] = msSince(start, at)
		})
	}
	wg.Wait()
	u1 = measureNode(t)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return createMs, plugMs, u0, u1
}

// kubernetesNodeFloor measures Kubernetes alone on the node: n hostNetwork pods created at once, each until it
// is seen Ready (the API server, the stand-in's binding and its status write, no network plugin), in ms, and
// what the node's components and the machine spent from the first create until the last pod was seen Ready.
// The pods are deleted again before it returns.
func kubernetesNodeFloor(t *testing.T, w *annotationWatch, n int) (ms []float64, u0, u1 nodeUsage) {
	t.Helper()
	ns := benchNamespace(t, "bench-node-kubernetes")
	var names, keys []string
	for i := range n {
		names = append(names, fmt.Sprintf("host-%d", i))
		keys = append(keys, ns+"/"+names[i])
	}
	u0 = measureNode(t)
	starts := createConcurrentlyWith(t, map[string][]string{ns: names}, func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	w.wait(t, keys, w.ready, 5*time.Minute)
	u1 = measureNode(t)
	ms, _ = w.latenciesOf(w.ready, keys, starts)
	if err := env.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNamespacesGone(t, 5*time.Minute)
	return ms, u0, u1
}

// TestBenchmarkNode measures the number users feel, pod created → network ready (a connection from another
// pod of its namespace is answered), on the stack with the node side (STACK_CNI=1): 100 pods created at once,
// with pools off and with warm pools, beside two floors from the same run: Neutron creating a port bound to
// the node, and 100 ports created bound in advance and plugged by hand at once (plug → ready). It also
// reports the CPU and memory each node component spent during each burst.
func TestBenchmarkNode(t *testing.T) {
	if env.vars["STACK_CNI"] != "1" {
		t.Fatal("the node benchmark needs the node side: stop the stack with 'make stack-down' and run 'make bench-node' " +
			"(it starts the stack with STACK_CNI=1)")
	}
	res := map[string]any{}
	put := func(k string, v float64) { res[k] = float64(int64(v*100)) / 100 }
	res["stack"] = "ML2/OVN Neutron and Octavia on MariaDB, node side on (STACK_CNI=1, " + env.vars["STACK_NODES"] + " nodes), userspace datapath"
	res["machine"] = fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	res["when"] = time.Now().UTC().Format(time.RFC3339)
	def := benchRaven(ravenOpts{})
	res["raven.resync_period"] = def.resync.String()
	w := watchAnnotations(t)
	defer w.stop()
	if env.raven != nil {
		env.raven.stop()
	}

	// ---- floors, Raven stopped.
	createMs, plugMs, fu0, fu1 := nodeFloor(t, *benchNodeSeq, *benchNodePods)
	putUsage(put, "floor.plug_", fu0, fu1)
	cs, ps := summarize(createMs), summarize(plugMs)
	putStats(put, "floor.neutron_bound_create_", cs)
	putStats(put, "floor.plug_ready_", ps)
	if ps.n <= 100 {
		put("floor.plug_ready_p99", ps.p99) // with 100 samples, the maximum
	}
	t.Logf("floor: Neutron bound port create p50 %.0f ms, max %.0f ms (n = %d); %d ports plugged by hand at once, plug → answered p50 %.0f ms, p99 %.0f ms (machine %.1f CPU-s)",
		cs.p50, cs.max, cs.n, ps.n, ps.p50, ps.p99, fu1["machine"][0]-fu0["machine"][0])
	kms, ku0, ku1 := kubernetesNodeFloor(t, w, *benchNodePods)
	ks := summarize(kms)
	putStats(put, "floor.kubernetes_ready_", ks)
	put("floor.kubernetes_ready_p99", ks.p99)
	putUsage(put, "floor.kubernetes_", ku0, ku1)
	t.Logf("floor: Kubernetes alone, %d hostNetwork pods created at once → Ready (bound, run by the node, no network plugin) p50 %.0f ms, p99 %.0f ms (machine %.1f CPU-s)",
		ks.n, ks.p50, ks.p99, ku1["machine"][0]-ku0["machine"][0])
	b := budget{create: time.Duration(cs.max * float64(time.Millisecond)), bulk: time.Duration(cs.p50 * float64(time.Millisecond)),
		del: time.Duration(cs.p50 * float64(time.Millisecond)), network: 10 * time.Second}
	perPod := time.Duration((cs.max + ps.max) * float64(time.Millisecond))

	// ---- Raven: 100 pods at once, pools off, then warm pools.
	phases := strings.Split(*benchNodePhases, ",")
	if slices.Contains(phases, "pools_off") {
		off := nodePhase(t, w, b, perPod, put, "pools_off", benchRaven(ravenOpts{args: []string{"--port-pools=false"}}), false)
		put("target.off_p50_over_floor_sum", off.p50/(cs.p50+ps.p50))
		t.Logf("pools off p50 %.2f × (create p50 + plug → ready p50) (target ≤ 1.2)", off.p50/(cs.p50+ps.p50))
	}
	if slices.Contains(phases, "pools_warm") {
		warmCfg := writeConfig(t, fmt.Sprintf("pools: {enabled: true, minFree: %d, batch: 50, max: %d}\n", *benchNodePods, *benchNodePods+50))
		warm := nodePhase(t, w, b, perPod, put, "pools_warm", benchRaven(ravenOpts{config: warmCfg}), true)
		put("target.warm_p99_minus_floor_p99_s", (warm.p99-ps.p99)/1000)
		t.Logf("warm pools p99 %.2f s above the plug → ready floor's p99 (target ≤ 0.5 s)", (warm.p99-ps.p99)/1000)
	}
	if slices.Contains(phases, "pools_warm_per_node") {
		perNodeCfg := writeConfig(t, fmt.Sprintf("pools: {enabled: true, perNode: true, minFree: %d, batch: 50, max: %d}\n", *benchNodePods, *benchNodePods+50))
		perNode := nodePhase(t, w, b, perPod, put, "pools_warm_per_node", benchRaven(ravenOpts{config: perNodeCfg}), true)
		put("target.warm_per_node_p99_minus_floor_p99_s", (perNode.p99-ps.p99)/1000)
		t.Logf("warm pools per node p99 %.2f s above the plug → ready floor's p99 (target ≤ 0.5 s)", (perNode.p99-ps.p99)/1000)
	}
	res["phases"] = *benchNodePhases
	writeResultsTo(t, filepath.Join(env.repo, *benchNodeOut), res, nil)
}

// nodePhase starts Raven with o, makes a namespace with a prober pod (and, when warm, waits for its pool to
// hold a port for every pod of the burst), then creates the burst at once and measures each pod's created →
// answered time, and the node components' CPU and memory over the burst.
func nodePhase(t *testing.T, w *annotationWatch, b budget, perPod time.Duration, put func(string, float64), label string, o ravenOpts, warm bool) stats {
	ctx := context.Background()
	startRaven(t, o)
	ns := benchNamespace(t, "bench-node-"+strings.ReplaceAll(label, "_", "-"))
	benchSubnet(t, ns, b.namespace())
	// The prober: a pod of the namespace, Ready before the burst.
	prober := servingPod("prober")
	prober.Labels[benchLabel] = "true"
	if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, prober, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.wait(t, []string{ns + "/prober"}, w.ready, b.within(perPod))
	if warm {
		// Pools fill only where pods are being created: the prober was the first, now the pool fills.
		eventually(t, b.within(time.Duration(*benchNodePods)*b.bulk), "the warm pool to fill", func() (bool, error) {
			ports, err := env.os.Networking.ListPorts(ctx, openstack.Filter{Tags: ownership.Owner{Cluster: env.cluster, Kind: ownership.KindPool, Name: ns}.Tags()})
			return len(ports) >= *benchNodePods, err
		})
		waitRavenQuiet(t, env.raven, b, *benchNodePods+50, 0)
	}
	names := make([]string, *benchNodePods)
	var keys []string
	for i := range names {
		names[i] = fmt.Sprintf("burst-%d", i)
		keys = append(keys, ns+"/"+names[i])
	}
	u0 := measureNode(t)
	starts := createConcurrentlyWith(t, map[string][]string{ns: names}, func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = servingPod(p.Name).Spec.Containers[0].Ports
	})
	readyMs := probeBurst(t, w, ns, names, starts, time.Now().Add(b.within(time.Duration(len(names))*perPod)))
	u1 := measureNode(t)
	annotated, _ := w.latenciesOf(w.seen, keys, starts)
	if *benchNodePodsTo != "" {
		bound, _ := w.latenciesOf(w.bound, keys, starts)
		readySeen, _ := w.latenciesOf(w.ready, keys, starts)
		writePodTimes(t, *benchNodePodsTo, label, keys, starts, [][]float64{bound, annotated, readySeen, readyMs})
	}
	rs, as := summarize(readyMs), summarize(annotated)
	putStats(put, label+".ready_", rs)
	put(label+".ready_p99", rs.p99) // with 100 samples, the maximum
	putStats(put, label+".annotated_", as)
	putUsage(put, label+".", u0, u1)
	d := func(c string) float64 { return u1[c][0] - u0[c][0] }
	t.Logf("%s: %d pods at once, created → answered p50 %.0f ms, p99 %.0f ms (annotated p50 %.0f ms); CPU s: machine %.1f, raven %.1f, raven-node %.1f, node-standin %.1f, ovs-vswitchd %.1f, ovn-controller %.1f, neutron-server %.1f, kube-apiserver %.1f",
		label, rs.n, rs.p50, rs.p99, as.p50, d("machine"), d("raven"), d("raven-node"), d("node-standin"), d("ovs-vswitchd"), d("ovn-controller"), d("neutron-server"), d("kube-apiserver"))
	endPhase(t, b, ns)
	return rs
}

// writePodTimes appends, for each pod of a phase, when it was created and how long after that its annotation
// binding, its annotation and its Ready condition were seen and a connection to it was answered.
func writePodTimes(t *testing.T, path, label string, keys []string, starts map[string]time.Time, ms [][]float64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	_, _ = fmt.Fprintf(f, "# phase %s: pod, created (UTC), ms after it: seen bound, annotation seen, Ready seen, answered\n", label)
	for i, k := range keys {
		_, _ = fmt.Fprintf(f, "%s\t%s", k, starts[k].UTC().Format("15:04:05.000000"))
		for _, m := range ms {
			_, _ = fmt.Fprintf(f, "\t%.0f", m[i])
		}
		_, _ = fmt.Fprintln(f)
	}
}

// probeBurst probes each pod of the burst from the namespace's prober as soon as its annotation shows its
// address, and returns each one's created → answered time in ms.
func probeBurst(t *testing.T, w *annotationWatch, ns string, names []string, starts map[string]time.Time, deadline time.Time) []float64 {
	ctx := context.Background()
	readyMs := make([]float64, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			key := ns + "/" + name
			var ann *annotations.Port
			for ann == nil && time.Now().Before(deadline) {
				if _, ok := w.at(key, w.seen); !ok {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				p, err := env.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					errs[i] = err
					return
				}
				var port annotations.Port
				if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &port); ok && err == nil {
					ann = &port
				}
			}
			if ann == nil {
				errs[i] = fmt.Errorf("pod %s: no port annotation before the deadline", key)
				return
			}
			var at time.Time
			at, errs[i] = probeUntil(podNetns(ns, "prober"), net.JoinHostPort(ann.FixedIPs[0].IPAddress, "80"), deadline)
			readyMs[i] = msSince(starts[key], at)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return readyMs
}
