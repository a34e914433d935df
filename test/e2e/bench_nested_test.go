//go:build e2e && bench

package e2e

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podctl "github.com/raven-net/raven/internal/controller/pod"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/pkg/annotations"
)

// nestedFloorPorts are the nested floor's ports, Raven stopped: on a network of the floor's own, routed (the
// gateway answers the ARP a nested pod's readiness waits for), a prober's port and one for each pod of the
// burst, made at Raven's concurrency and then put on the stack VM's trunk in one add_subports. Neutron's time
// for both is the pools-off phase's floor.
type nestedFloorPorts struct {
	subnet          *openstack.Subnet
	prober          annotations.Port
	burst           []annotations.Port
	createWallS     float64 // the burst's ports and the prober's, all at once at Raven's concurrency
	addSubportsS    float64 // all of them on the trunk, in one request
	neutronWallS    float64 // both
	vlans           []int
	trunk, parentID string
}

func makeNestedFloorPorts(t *testing.T, vm vmNode, n int) *nestedFloorPorts {
	t.Helper()
	ctx := context.Background()
	net := env.os.Networking
	network, err := net.CreateNetwork(ctx, openstack.NetworkSpec{Name: "bench-nested-floor-" + randSuffix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = net.DeleteNetwork(context.Background(), network.ID) })
	f := &nestedFloorPorts{trunk: vm.trunk, parentID: vm.port}
	if f.subnet, err = net.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: network.ID, CIDR: "192.168.18.0/23", Name: "bench-nested-floor"}); err != nil {
		t.Fatal(err)
	}
	router, err := net.CreateRouter(ctx, openstack.RouterSpec{Name: "bench-nested-floor"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = net.DeleteRouter(context.Background(), router.ID) })
	if err := net.AddRouterInterface(ctx, router.ID, f.subnet.ID); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = net.RemoveRouterInterface(context.Background(), router.ID, f.subnet.ID) })

	b := &neutron.Batcher{N: net, Max: neutron.BulkMax, InFlight: neutron.BulkInFlight}
	ports, errs := make([]openstack.Port, n+1), make([]error, n+1)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range ports {
		wg.Go(func() {
			spec := floorSpec(network.ID, f.subnet.ID, i)
			spec.HostID, spec.DeviceID = "", "" // a subport: unbound, and no device of its own
			var p *openstack.Port
			if p, errs[i] = b.Create(ctx, spec); errs[i] == nil {
				ports[i] = *p
			}
		})
	}
	wg.Wait()
	f.createWallS = time.Since(start).Seconds()
	var ids []string
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ports[i].ID)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			_ = net.DeletePort(context.Background(), id)
		}
	})
	used := vm.subports(t)
	var subs []openstack.Subport
	for vlan := 1; len(subs) < len(ports); vlan++ {
		if !slices.Contains(mapValues(used), vlan) {
			subs = append(subs, openstack.Subport{PortID: ports[len(subs)].ID, SegmentationType: openstack.SegmentationVLAN, SegmentationID: vlan})
		}
	}
	addStart := time.Now()
	if err := net.AddSubports(ctx, vm.trunk, subs); err != nil {
		t.Fatal(err)
	}
	f.addSubportsS = time.Since(addStart).Seconds()
	f.neutronWallS = time.Since(start).Seconds()
	t.Cleanup(func() { _ = net.RemoveSubports(context.Background(), vm.trunk, ids) })
	for i, p := range ports {
		a := podctl.PortAnnotation(p, 0)
		a.HostID = ""
		a.Nested = &annotations.Nested{Node: vm.name, VLAN: subs[i].SegmentationID, TrunkID: vm.trunk, ParentPortID: vm.port}
		f.vlans = append(f.vlans, subs[i].SegmentationID)
		if i == 0 {
			f.prober = a
		} else {
			f.burst = append(f.burst, a)
		}
	}
	return f
}

func mapValues(m map[string]int) []int {
	out := make([]int, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// nestedPodOf makes a burst pod (or the prober) one of the stack's nested node.
func nestedPodOf(p *corev1.Pod) {
	onNestedNode(p)
	p.Spec.Containers[0].Ports = servingPod(p.Name).Spec.Containers[0].Ports
}

// nestedNodeFloor is the nested node without Raven: the burst on the VM's kubelet and containerd, with
// floor-cni plugging the subports made and attached in advance as raven-node --nested does (an access port of
// the VLAN on the VM's bridge, ready once the gateway answers ARP), each pod until the prober's connection is
// answered.
func nestedNodeFloor(t *testing.T, w *annotationWatch, f *nestedFloorPorts) stats {
	t.Helper()
	vm := env.vars["STACK_VM_NAME"]
	ns := benchNamespace(t, "bench-nested-floor")
	subnet := podctl.SubnetAnnotation(*f.subnet)
	ports := map[string]any{ns + "/prober": map[string]any{"port": f.prober, "subnet": subnet}}
	names := make([]string, len(f.burst))
	for i, p := range f.burst {
		names[i] = fmt.Sprintf("burst-%d", i)
		ports[ns+"/"+names[i]] = map[string]any{"port": p, "subnet": subnet}
	}
	restore := floorCNIOn(t, vm, env.vars["STACK_OVS3_DB"], "br-vm", filepath.Join(env.vars["STACK_DIR"], "nodes", vm, "datapath-netns"), ports)
	prober := servingPod("prober")
	prober.Labels[benchLabel] = "true"
	nestedPodOf(prober)
	if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), prober, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.wait(t, []string{ns + "/prober"}, w.ready, 2*time.Minute)
	starts := createConcurrentlyWith(t, map[string][]string{ns: names}, nestedPodOf)
	ms := make([]float64, len(names))
	errs := make([]error, len(names))
	deadline := time.Now().Add(5 * time.Minute)
	var wg sync.WaitGroup
	for i, p := range f.burst {
		wg.Go(func() {
			var at time.Time
			at, errs[i] = probeUntil(podNetns(ns, "prober"), net.JoinHostPort(p.FixedIPs[0].IPAddress, "80"), deadline)
			ms[i] = msSince(starts[ns+"/"+names[i]], at)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	removeNamespace(t, ns)
	restore()
	return summarize(ms)
}

// nestedBench runs the node benchmark's nested phases on the stack's nested node (hack/stack-vm.sh): floors
// first (Neutron making and attaching the burst's subports; the VM's node plugging them without Raven), then
// Raven with pools off and with a warm trunk pool, each against its floor.
func nestedBench(t *testing.T, w *annotationWatch, put func(string, float64), phases []string) {
	vm := stackVM()
	if vm.name == "" {
		t.Fatal("the nested phases need the stack's nested node (STACK_NESTED=1, two nodes)")
	}
	if env.raven != nil {
		env.raven.stop()
	}
	defer func() {
		if slices.Contains(phases, "nested_limits") {
			nestedLimits(t, put, *benchTrunkSubports, 200)
		}
	}()
	if !slices.Contains(phases, "nested_pools_off") && !slices.Contains(phases, "nested_pools_warm") {
		return
	}
	f := makeNestedFloorPorts(t, vm, *benchNodePods+1)
	put("floor.nested_neutron_create_wall_s", f.createWallS)
	put("floor.nested_neutron_add_subports_s", f.addSubportsS)
	put("floor.nested_neutron_wall_s", f.neutronWallS)
	t.Logf("floor (nested): Neutron made %d unbound ports at Raven's concurrency in %.1f s and put them on trunk %s in one add_subports in %.1f s",
		len(f.burst)+1, f.createWallS, vm.trunk, f.addSubportsS)
	floor := nestedNodeFloor(t, w, f)
	putStats(put, "floor.nested_node_ready_", floor)
	put("floor.nested_node_ready_p99", floor.p99)
	t.Logf("floor (nested): the VM node without Raven, %d pods at once plugged by floor-cni on subports attached in advance, created → answered p50 %.0f ms, p99 %.0f ms",
		floor.n, floor.p50, floor.p99)
	b := budget{create: 5 * time.Second, bulk: time.Second, del: time.Second, network: 10 * time.Second}
	nested := fmt.Sprintf("nested: {workerSubnetID: %s, nodeSelector: raven.io/nested=true}\n", vm.subnet)
	for _, ph := range []struct {
		label string
		o     ravenOpts
		warm  bool
	}{
		{"nested_pools_off", ravenOpts{config: writeConfig(t, nested), args: []string{"--port-pools=false"}}, false},
		{"nested_pools_warm", ravenOpts{config: writeConfig(t, nested+fmt.Sprintf("pools: {enabled: true, minFree: %d, batch: 50, max: %d}\n",
			*benchNodePods, *benchNodePods+50))}, true},
	} {
		if !slices.Contains(phases, ph.label) {
			continue
		}
		s, calls := nestedPhase(t, w, b, put, ph.label, benchRaven(ph.o), ph.warm, vm)
		put(ph.label+".neutron_calls_per_pod", calls)
		switch ph.label {
		case "nested_pools_off":
			ratio := s.p50 / (floor.p50 + f.neutronWallS*1000)
			put("target.nested_off_p50_over_floor", ratio)
			t.Logf("nested pools off p50 %.2f × (the nested node floor's p50 + Neutron's create and add_subports of the burst's ports); %.1f Neutron calls per pod", ratio, calls)
		case "nested_pools_warm":
			ratio := s.p99 / floor.p99
			put("target.nested_warm_p99_over_floor_p99", ratio)
			t.Logf("nested warm trunk pool p99 %.2f × the nested node floor's p99 (target ≤ 1.25); %.1f Neutron calls per pod", ratio, calls)
		}
	}
	if env.raven != nil {
		env.raven.stop()
	}
}

// nestedPhase starts Raven with o, makes a namespace with a prober on the nested node (and, when warm, waits
// for the VM's trunk pool to hold a subport for every pod of the burst), creates the burst there at once and
// measures each pod's created → answered time; it returns them and Raven's Neutron calls per pod.
func nestedPhase(t *testing.T, w *annotationWatch, b budget, put func(string, float64), label string, o ravenOpts, warm bool, vm vmNode) (stats, float64) {
	ctx := context.Background()
	r := startRaven(t, o)
	ns := benchNamespace(t, "bench-"+strings.ReplaceAll(label, "_", "-"))
	benchSubnet(t, ns, b.namespace())
	prober := servingPod("prober")
	prober.Labels[benchLabel] = "true"
	nestedPodOf(prober)
	if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, prober, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.wait(t, []string{ns + "/prober"}, w.ready, 2*time.Minute)
	if warm {
		waitTrunkPool(t, r, vm, ns, *benchNodePods, 5*time.Minute)
		waitRavenQuiet(t, r, b, *benchNodePods+50, 0)
	}
	names := make([]string, *benchNodePods)
	keys := make([]string, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("burst-%d", i)
		keys[i] = ns + "/" + names[i]
	}
	calls0, _ := neutronCalls(t, r)
	starts := createConcurrentlyWith(t, map[string][]string{ns: names}, nestedPodOf)
	readyMs := probeBurst(t, w, ns, names, starts, time.Now().Add(10*time.Minute))
	calls1, _ := neutronCalls(t, r)
	annotated, _ := w.latenciesOf(w.seen, keys, starts)
	rs, as := summarize(readyMs), summarize(annotated)
	putStats(put, label+".ready_", rs)
	put(label+".ready_p99", rs.p99)
	putStats(put, label+".annotated_", as)
	perPod := (calls1 - calls0) / float64(len(names))
	t.Logf("%s: %d pods at once on nested node %s, created → answered p50 %.0f ms, p99 %.0f ms (annotated p50 %.0f ms); Neutron calls during the burst: %.0f (%.1f per pod)",
		label, rs.n, vm.name, rs.p50, rs.p99, as.p50, calls1-calls0, perPod)
	endPhase(t, b, ns)
	return rs, perPod
}

// benchTrunkSubports is how many subports nestedLimits puts on one trunk.
var benchTrunkSubports = flag.Int("bench.trunk-subports", neutron.MaxVLAN, "subports the nested_limits phase puts on one trunk (at most 4094)")

// fillTrunk makes ports on the network and puts them on the trunk on VLANs 1 to total, step at a time (each
// ID appended to ids, for the cleanup), and returns each add_subports' time in ms.
func fillTrunk(t *testing.T, networkID, subnetID, trunkID string, total, step int, ids *[]string) []float64 {
	t.Helper()
	ctx := context.Background()
	net := env.os.Networking
	var addMs []float64
	for vlan := 1; vlan <= total; vlan += step {
		n := min(step, total-vlan+1)
		specs := make([]openstack.PortSpec, n)
		for i := range specs {
			specs[i] = openstack.PortSpec{NetworkID: networkID, SubnetID: subnetID, Name: fmt.Sprintf("sub-%d", vlan+i)}
		}
		var ports []openstack.Port
		for i := 0; i < n; i += neutron.BulkMax {
			made, err := net.CreatePorts(ctx, specs[i:min(i+neutron.BulkMax, n)])
			if err != nil {
				t.Fatal(err)
			}
			ports = append(ports, made...)
		}
		subs := make([]openstack.Subport, n)
		for i, p := range ports {
			*ids = append(*ids, p.ID)
			subs[i] = openstack.Subport{PortID: p.ID, SegmentationType: openstack.SegmentationVLAN, SegmentationID: vlan + i}
		}
		at := time.Now()
		if err := net.AddSubports(ctx, trunkID, subs); err != nil {
			t.Fatalf("add_subports of VLANs %d-%d: %v", vlan, vlan+n-1, err)
		}
		addMs = append(addMs, msSince(at, time.Now()))
	}
	return addMs
}

// nestedLimits measures what one trunk holds: a VM port bound to the first node (no VM behind it: OVN makes
// every subport a logical switch port of it all the same) whose trunk gets a subport on VLAN IDs 1 to total,
// in add_subports of step ports each. It records each request's time as the trunk fills, how long
// Neutron takes to show the full trunk and OVN's northbound database to hold its logical switch ports, and
// what Neutron answers to a subport on VLAN 4095 and to a second port on a VLAN in use.
func nestedLimits(t *testing.T, put func(string, float64), total, step int) {
	ctx := context.Background()
	net := env.os.Networking
	network, err := net.CreateNetwork(ctx, openstack.NetworkSpec{Name: "bench-trunk-limits-" + randSuffix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = net.DeleteNetwork(context.Background(), network.ID) })
	subnet, err := net.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: network.ID, CIDR: "10.96.0.0/19", Name: "bench-trunk-limits"})
	if err != nil {
		t.Fatal(err)
	}
	parent, err := net.CreatePort(ctx, openstack.PortSpec{NetworkID: network.ID, SubnetID: subnet.ID, Name: "bench-trunk-limits-vm",
		DeviceOwner: "compute:nova", HostID: env.vars["STACK_NODE_NAME"]})
	if err != nil {
		t.Fatal(err)
	}
	var trunk struct{ Trunk struct{ ID string } }
	neutronDo(t, http.MethodPost, "trunks", map[string]any{"trunk": map[string]any{"port_id": parent.ID, "name": "bench-trunk-limits"}}, &trunk)
	var ids []string
	t.Cleanup(func() {
		for i := 0; i < len(ids); i += step {
			_ = net.RemoveSubports(context.Background(), trunk.Trunk.ID, ids[i:min(i+step, len(ids))])
		}
		_ = neutronTry(http.MethodDelete, "trunks/"+trunk.Trunk.ID, nil, nil)
		for i := 0; i < len(ids); i += neutron.BulkMax {
			for _, id := range ids[i:min(i+neutron.BulkMax, len(ids))] {
				_ = net.DeletePort(context.Background(), id)
			}
		}
		_ = net.DeletePort(context.Background(), parent.ID)
	})
	total = min(total, neutron.MaxVLAN)
	start := time.Now()
	addMs := fillTrunk(t, network.ID, subnet.ID, trunk.Trunk.ID, total, step, &ids)
	fillS := time.Since(start).Seconds()
	at := time.Now()
	got, err := net.GetTrunk(ctx, trunk.Trunk.ID)
	if err != nil || len(got.Subports) != total {
		t.Fatalf("the full trunk: %v, %d subports, want %d", err, len(got.Subports), total)
	}
	getMs := msSince(at, time.Now())
	var nb int
	eventually(t, 5*time.Minute, "OVN's northbound database to hold a logical switch port per subport", func() (bool, error) {
		out, err := exec.Command("ovn-nbctl", "--db="+env.vars["STACK_OVN_NB_TCP"], "--timeout=30", "--format=csv", "--no-headings", "find",
			"Logical_Switch_Port", "parent_name="+parent.ID).Output()
		nb = strings.Count(string(out), "\n")
		return nb >= total, err
	})
	ovnS := time.Since(at).Seconds()
	// One more: VLAN 4095 is no 802.1Q VLAN ID, and a VLAN in use is refused.
	extra, err := net.CreatePort(ctx, openstack.PortSpec{NetworkID: network.ID, SubnetID: subnet.ID, Name: "sub-extra"})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, extra.ID)
	over := net.AddSubports(ctx, trunk.Trunk.ID, []openstack.Subport{{PortID: extra.ID, SegmentationType: openstack.SegmentationVLAN, SegmentationID: 4095}})
	dup := net.AddSubports(ctx, trunk.Trunk.ID, []openstack.Subport{{PortID: extra.ID, SegmentationType: openstack.SegmentationVLAN, SegmentationID: 7}})
	if over == nil || dup == nil {
		t.Errorf("Neutron took a subport on VLAN 4095 (%v) or on VLAN 7 in use (%v)", over, dup)
	}
	s := summarize(addMs)
	put("limits.trunk_subports", float64(len(got.Subports)))
	put("limits.add_subports_step", float64(step))
	for i, ms := range addMs {
		put(fmt.Sprintf("limits.add_subports_ms_from_%04d", i*step+1), ms)
	}
	put("limits.add_subports_first_ms", addMs[0])
	put("limits.add_subports_last_ms", addMs[len(addMs)-1])
	put("limits.add_subports_p50_ms", s.p50)
	put("limits.add_subports_max_ms", s.max)
	put("limits.fill_wall_s", fillS)
	put("limits.get_full_trunk_ms", getMs)
	put("limits.ovn_lsps_after_s", ovnS)
	t.Logf("limits: a trunk took a subport on each of the %d VLAN IDs in %.0f s (ports made and attached %d at a time); add_subports took %.0f ms at first, %.0f ms last, max %.0f ms; GET of the full trunk %.0f ms; OVN NB held %d child ports %.1f s after; VLAN 4095 refused: %v; a VLAN in use refused: %v",
		len(got.Subports), fillS, step, addMs[0], addMs[len(addMs)-1], s.max, getMs, nb, ovnS, openstack.KindOf(over), openstack.KindOf(dup))
}
