//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/pkg/annotations"
)

// neutronDo sends one request to the stack's Neutron (no Keystone on the main stack) and decodes the answer
// into out (nil: none wanted); a failure fails the test.
func neutronDo(t *testing.T, method, path string, body, out any) {
	t.Helper()
	if err := neutronTry(method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

// neutronTry is neutronDo for cleanups, which report what they could not undo and go on.
func neutronTry(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, env.vars["NEUTRON_URL"]+"/v2.0/"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("neutron %s %s: %s: %s", method, path, resp.Status, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// undo runs a cleanup request and logs what it could not undo; what is gone already (404: Raven took a
// subport off the trunk of the deleted node meanwhile) is undone.
func undo(t *testing.T, method, path string, body any) {
	if err := neutronTry(method, path, body, nil); err != nil && !strings.Contains(err.Error(), ": 404 ") {
		t.Logf("cleanup: %v", err)
	}
}

// vmNode is a Nova VM standing for a nested node on the local stack: its port on a worker network, bound to
// the chassis node-1, the parent of a trunk.
type vmNode struct {
	name, subnet, port, trunk, address string
}

// newVMNode makes the worker network, the VM's port and its trunk in Neutron, and the Node object (no kubelet
// runs it: pods bound to it by name never run, and what Raven does for them is control plane alone). All go
// at the end of the test.
func newVMNode(t *testing.T, name, cidr, address string) vmNode {
	t.Helper()
	vm := vmNode{name: name, address: address}
	var network struct{ Network struct{ ID string } }
	neutronDo(t, http.MethodPost, "networks", map[string]any{"network": map[string]any{"name": "workers-" + name}}, &network)
	t.Cleanup(func() { undo(t, http.MethodDelete, "networks/"+network.Network.ID, nil) })
	var sub struct{ Subnet struct{ ID string } }
	neutronDo(t, http.MethodPost, "subnets", map[string]any{"subnet": map[string]any{"network_id": network.Network.ID, "ip_version": 4,
		"cidr": cidr, "enable_dhcp": false, "name": "workers-" + name}}, &sub)
	vm.subnet = sub.Subnet.ID
	var port struct{ Port struct{ ID string } }
	neutronDo(t, http.MethodPost, "ports", map[string]any{"port": map[string]any{"network_id": network.Network.ID, "name": name,
		"fixed_ips": []any{map[string]any{"subnet_id": vm.subnet, "ip_address": address}}, "device_owner": "compute:nova",
		"binding:host_id": env.vars["STACK_NODE_NAME"]}}, &port)
	vm.port = port.Port.ID
	t.Cleanup(func() { undo(t, http.MethodDelete, "ports/"+vm.port, nil) })
	var trunk struct{ Trunk struct{ ID string } }
	neutronDo(t, http.MethodPost, "trunks", map[string]any{"trunk": map[string]any{"port_id": vm.port, "name": name}}, &trunk)
	vm.trunk = trunk.Trunk.ID
	t.Cleanup(func() {
		// Raven's subports go with their namespace, after the test: take them off first, as Nova would.
		var tr struct{ Trunk openstack.Trunk }
		_ = neutronTry(http.MethodGet, "trunks/"+vm.trunk, nil, &tr)
		for _, s := range tr.Trunk.Subports {
			undo(t, http.MethodPut, "trunks/"+vm.trunk+"/remove_subports", map[string]any{"sub_ports": []any{map[string]any{"port_id": s.PortID}}})
		}
		undo(t, http.MethodDelete, "trunks/"+vm.trunk, nil)
	})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"raven.io/nested": "true"}}}
	if _, err := env.kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: address}}
	if _, err := env.kube.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return vm
}

// subports reads the trunk's subports from Neutron, by port.
func (vm vmNode) subports(t *testing.T) map[string]int {
	t.Helper()
	var tr struct{ Trunk openstack.Trunk }
	neutronDo(t, http.MethodGet, "trunks/"+vm.trunk, nil, &tr)
	out := map[string]int{}
	for _, s := range tr.Trunk.Subports {
		out[s.PortID] = s.SegmentationID
	}
	return out
}

// nbPort reads a logical switch port's parent_name and tag from OVN's northbound database.
func nbPort(t *testing.T, id string) (parent, tag string) {
	t.Helper()
	out, err := exec.Command("ovn-nbctl", "--db="+env.vars["STACK_OVN_NB_TCP"], "--timeout=10", "--bare", "--columns=parent_name,tag",
		"find", "Logical_Switch_Port", "name="+id).Output()
	if err != nil {
		fatalf(t, "ovn-nbctl: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return "", ""
	}
	return f[0], f[1]
}

// Nested nodes against the real Neutron (trunk service plugin, ML2/OVN's trunk driver) and OVN: a Node that
// stands for a Nova VM, whose port on a worker network is bound to the chassis node-1 and is the parent of a
// trunk. Raven, configured with the worker subnet and a node selector (applied by a rollout of the changed
// raven.yaml), gives the pods bound to that node unbound ports that become subports of the trunk, each on a
// VLAN of its own there; OVN makes each a logical switch port with the VM's port as parent and the VLAN as tag
// (what a chassis matches a VM's tagged frames by). A deleted pod's port comes off the trunk and goes.
func TestNestedPodsAreTrunkSubports(t *testing.T) {
	if !realNodes() {
		t.Skip("runs against the installed Raven")
	}
	vm := newVMNode(t, "vm-"+randSuffix(), "192.168.100.0/24", "192.168.100.11")
	startRaven(t, ravenOpts{config: writeConfig(t, fmt.Sprintf("nested: {workerSubnetID: %s, nodeSelector: raven.io/nested=true}\n", vm.subnet))})
	t.Cleanup(func() { startRaven(t, ravenOpts{}) }) // the suite's configuration again

	ns := newNamespace(t)
	// No kubelet confirms these pods' deletion: they go at once, before their namespace does.
	t.Cleanup(func() {
		_ = env.kube.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	})
	const n = 3
	for i := range n {
		p := podSpec(fmt.Sprintf("nested-%d", i))
		p.Spec.NodeName = vm.name
		if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ports := waitNestedAnnotations(t, ns, n)
	vlans := checkSubports(t, vm, ports)
	slices.Sort(vlans)
	if len(slices.Compact(slices.Clone(vlans))) != n {
		errorf(t, "VLANs %v: two pods share one", vlans)
	}
	t.Logf("%d pods on nested node %s: subports of trunk %s on VLANs %v, each a logical switch port with parent %s", n, vm.name, vm.trunk, vlans, vm.port)

	gone := ports["nested-0"].ID
	if err := env.kube.CoreV1().Pods(ns).Delete(context.Background(), "nested-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitPortGone(t, gone, "the deleted nested pod's port to be gone")
	if _, on := vm.subports(t)[gone]; on {
		errorf(t, "port %s is gone from Neutron but still on trunk %s", gone, vm.trunk)
	}
}

// waitNestedAnnotations waits until pods nested-0..n-1 carry port annotations that place them on a trunk.
func waitNestedAnnotations(t *testing.T, ns string, n int) map[string]annotations.Port {
	t.Helper()
	ports := map[string]annotations.Port{}
	eventually(t, time.Minute, "the nested pods' annotations with their VLANs", func() (bool, error) {
		for i := range n {
			name := fmt.Sprintf("nested-%d", i)
			_, a := portAnnotation(t, ns, name)
			if a == nil || a.Nested == nil {
				return false, nil
			}
			ports[name] = *a
		}
		return true, nil
	})
	return ports
}

// checkSubports checks each pod's port against Neutron's trunk and OVN's logical switch port, and returns the
// VLANs.
func checkSubports(t *testing.T, vm vmNode, ports map[string]annotations.Port) []int {
	t.Helper()
	subs := vm.subports(t)
	vlans := []int{}
	for name, a := range ports {
		if a.HostID != "" || a.Nested.Node != vm.name || a.Nested.TrunkID != vm.trunk || a.Nested.ParentPortID != vm.port {
			errorf(t, "pod %s: port %s host %q nested %+v, want an unbound subport of trunk %s of %s", name, a.ID, a.HostID, *a.Nested, vm.trunk, vm.name)
		}
		if subs[a.ID] != a.Nested.VLAN {
			errorf(t, "pod %s: Neutron's trunk has port %s on VLAN %d, the annotation says %d", name, a.ID, subs[a.ID], a.Nested.VLAN)
		}
		if parent, tag := nbPort(t, a.ID); parent != vm.port || tag != fmt.Sprint(a.Nested.VLAN) {
			errorf(t, "pod %s: OVN's logical switch port has parent %q and tag %q, want %s and %d", name, parent, tag, vm.port, a.Nested.VLAN)
		}
		vlans = append(vlans, a.Nested.VLAN)
	}
	return vlans
}

// Raven killed (SIGKILL of its container's process) during a burst of pods on a nested node: between a port's
// create, its add to the trunk and the annotation. Afterwards every pod has one port, on the trunk on the VLAN
// its annotation names, no VLAN is on two ports, and no subport is left for a port of no pod.
func TestNestedKillDuringBurst(t *testing.T) {
	if !realNodes() {
		t.Skip("runs against the installed Raven")
	}
	vm := newVMNode(t, "vm-"+randSuffix(), "192.168.101.0/24", "192.168.101.11")
	r := startRaven(t, ravenOpts{config: writeConfig(t, fmt.Sprintf("nested: {workerSubnetID: %s, nodeSelector: raven.io/nested=true}\n", vm.subnet))})
	t.Cleanup(func() { startRaven(t, ravenOpts{}) })
	ns := newNamespace(t)
	t.Cleanup(func() {
		_ = env.kube.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	})
	namespaceSubnet(t, ns)
	const n = 20
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			p := podSpec(fmt.Sprintf("nested-%d", i))
			p.Spec.NodeName = vm.name
			if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		}
	}()
	eventually(t, time.Minute, "Raven to have annotated a pod of the burst", func() (bool, error) { return anyAnnotated(ns) })
	r.kill()
	<-done
	startRaven(t, ravenOpts{config: writeConfig(t, fmt.Sprintf("nested: {workerSubnetID: %s, nodeSelector: raven.io/nested=true}\n", vm.subnet))})
	ports := waitNestedAnnotations(t, ns, n)
	vlans := checkSubports(t, vm, ports)
	slices.Sort(vlans)
	if len(slices.Compact(slices.Clone(vlans))) != n {
		errorf(t, "VLANs %v: two pods share one", vlans)
	}
	checkOnePortPerPod(t, ns)
	mine := map[string]bool{}
	for _, a := range ports {
		mine[a.ID] = true
	}
	pooled := 0
	for port, vlan := range vm.subports(t) {
		var p struct{ Port openstack.Port }
		neutronDo(t, http.MethodGet, "ports/"+port, nil, &p)
		switch {
		case mine[port]:
		case trunkPoolPort(p.Port, vm):
			pooled++ // a free port of the node's trunk pool
		default:
			errorf(t, "trunk %s carries port %s on VLAN %d (tags %v), which is neither a pod's nor the trunk pool's", vm.trunk, port, vlan, p.Port.Tags)
		}
	}
	t.Logf("Raven killed during a burst of %d pods on nested node %s: each has one subport, on VLANs %v; %d free ports of the trunk pool",
		n, vm.name, vlans, pooled)
}

// nestedPod is a serving pod on the stack's nested node.
func nestedPod(name string) *corev1.Pod {
	p := servingPod(name)
	onNestedNode(p)
	return p
}

// onNestedNode binds the pod to the stack's (first) nested node, whose taint it tolerates.
func onNestedNode(p *corev1.Pod) {
	p.Spec.NodeName = env.vars["STACK_VM_NAME"]
	p.Spec.Tolerations = []corev1.Toleration{{Key: "raven.io/nested", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
}

// trunkPoolPort says the port is a free port of Raven's trunk pool for the VM's node.
func trunkPoolPort(p openstack.Port, vm vmNode) bool {
	return slices.Contains(p.Tags, "raven.kind=pool") && slices.Contains(p.Tags, "raven.node="+vm.name)
}

// Pods on the stack's nested node (hack/stack-vm.sh: a VM's namespace on node-1's br-int through its trunk's
// parent port, with an Open vSwitch, a containerd and a kubelet of its own) carry traffic: raven-node-nested
// plugs each as an access port of its subport's VLAN on the VM's bridge, the ADD ends when the gateway answers
// ARP through the trunk, and the pods answer TCP from each other and from a pod on a chassis node, and reach it.
func TestNestedPodsTalk(t *testing.T) {
	needDatapath(t)
	if env.vars["STACK_VM_NAME"] == "" {
		t.Skip("the stack has no nested node (STACK_NESTED=1)")
	}
	r := startRaven(t, ravenOpts{config: writeConfig(t, fmt.Sprintf("nested: {workerSubnetID: %s, nodeSelector: raven.io/nested=true}\n", env.vars["STACK_VM_SUBNET"]))})
	t.Cleanup(func() { startRaven(t, ravenOpts{}) })
	ns := newNamespace(t)
	for _, name := range []string{"a", "b"} {
		if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), nestedPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	chassis := createServingPods(t, ns, "c")
	ports := map[string]*annotations.Port{"c": chassis["c"]}
	for _, name := range []string{"a", "b"} {
		waitPodReady(t, ns, name, 3*time.Minute)
		_, ports[name] = portAnnotation(t, ns, name)
		if ports[name] == nil || ports[name].Nested == nil {
			fatalf(t, "nested pod %s is Ready without a nested port annotation: %+v", name, ports[name])
		}
	}
	addr := func(name string) string { return net.JoinHostPort(ports[name].FixedIPs[0].IPAddress, "80") }
	for _, c := range []struct{ from, to string }{{"a", "b"}, {"b", "a"}, {"a", "c"}, {"c", "a"}} {
		expectAnswer(t, podNetns(ns, c.from), "tcp", addr(c.to), c.to)
		expectAnswer(t, podNetns(ns, c.from), "udp", addr(c.to), c.to)
	}
	t.Logf("nested pods a (VLAN %d) and b (VLAN %d) on %s answer each other and pod c on %s, over TCP and UDP",
		ports["a"].Nested.VLAN, ports["b"].Nested.VLAN, env.vars["STACK_VM_NAME"], env.vars["STACK_NODE_NAME"])

	// The first pods' takes started the VM's trunk pool: ports attached to the trunk before any pod asks.
	nestedPoolPods(t, r, ns, ports, addr)
	nestedOutside(t, ns, "a", ports["a"], "d", ports["d"])
	if env.vars["STACK_VM2_NAME"] != "" {
		nestedSecondVM(t, ns, ports, addr)
	}
}

// nestedPoolPods creates pods d and e on the stack's first VM once its trunk pool holds ports, checks that they
// take ports the trunk carried before they were created, and that they talk to each other, to a and to c.
func nestedPoolPods(t *testing.T, r *Raven, ns string, ports map[string]*annotations.Port, addr func(string) string) {
	t.Helper()
	vm := stackVM()
	pooled := waitTrunkPool(t, r, vm, ns, 5, time.Minute)
	for _, name := range []string{"d", "e"} {
		if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), nestedPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"d", "e"} {
		waitPodReady(t, ns, name, 3*time.Minute)
		_, ports[name] = portAnnotation(t, ns, name)
		if vlan, ok := pooled[ports[name].ID]; !ok || vlan != ports[name].Nested.VLAN {
			errorf(t, "pod %s has port %s on VLAN %d; want one of the trunk pool's, attached before the pod was created (%v)",
				name, ports[name].ID, ports[name].Nested.VLAN, pooled)
		}
	}
	for _, c := range []struct{ from, to string }{{"d", "e"}, {"d", "a"}, {"c", "d"}} {
		expectAnswer(t, podNetns(ns, c.from), "tcp", addr(c.to), c.to)
		expectAnswer(t, podNetns(ns, c.from), "udp", addr(c.to), c.to)
	}
	t.Logf("pods d (VLAN %d) and e (VLAN %d) took subports of the trunk pool and talk", ports["d"].Nested.VLAN, ports["e"].Nested.VLAN)
}

// nestedSecondVM creates pod f on the stack's second VM, on node-2: its traffic to the first VM's pods crosses
// the tunnel between the two chassis, tagged on each VM's NIC with its own subport's VLAN.
func nestedSecondVM(t *testing.T, ns string, ports map[string]*annotations.Port, addr func(string) string) {
	t.Helper()
	f := nestedPod("f")
	f.Spec.NodeName = env.vars["STACK_VM2_NAME"]
	if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), f, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodReady(t, ns, "f", 3*time.Minute)
	_, ports["f"] = portAnnotation(t, ns, "f")
	if n := ports["f"].Nested; n == nil || n.Node != env.vars["STACK_VM2_NAME"] || n.TrunkID != env.vars["STACK_VM2_TRUNK"] {
		fatalf(t, "pod f's port is not a subport of %s's trunk %s: %+v", env.vars["STACK_VM2_NAME"], env.vars["STACK_VM2_TRUNK"], ports["f"].Nested)
	}
	for _, c := range []struct{ from, to string }{{"f", "a"}, {"a", "f"}, {"f", "c"}} {
		expectAnswer(t, podNetns(ns, c.from), "tcp", addr(c.to), c.to)
		expectAnswer(t, podNetns(ns, c.from), "udp", addr(c.to), c.to)
	}
	t.Logf("pod f on %s (node-2's VM, VLAN %d) and pod a on %s (node-1's VM, VLAN %d) answer each other, over TCP and UDP",
		env.vars["STACK_VM2_NAME"], ports["f"].Nested.VLAN, env.vars["STACK_VM_NAME"], ports["a"].Nested.VLAN)
}

// nestedOutside checks that the nested pod from reaches the outside through the router's SNAT, and that the
// outside reaches the nested pod to through a floating IP on its subport, over TCP and UDP.
func nestedOutside(t *testing.T, ns, from string, fromPort *annotations.Port, to string, toPort *annotations.Port) {
	t.Helper()
	outsideServer(t, 8080)
	gw := strings.Split(env.vars["STACK_EXTERNAL_GATEWAY"], "/")[0]
	if gw == "" {
		gw = "172.24.4.1"
	}
	for _, proto := range []string{"tcp", "udp"} {
		got, err := retryExchange(podNetns(ns, from), proto, net.JoinHostPort(gw, "8080"))
		if err != nil {
			dumpOutsidePath(t)
			fatalf(t, "%s nested pod %s → outside: %v", proto, from, err)
		}
		if !strings.HasPrefix(got, "outside ") || strings.TrimPrefix(got, "outside ") == fromPort.FixedIPs[0].IPAddress {
			fatalf(t, "%s nested pod %s → outside answered %q: want an answer seen from the router's address, not the pod's", proto, from, got)
		}
	}
	ctx := context.Background()
	ext, err := env.os.Networking.ListNetworks(ctx, openstack.Filter{Name: "public"})
	if err != nil || len(ext) != 1 {
		fatalf(t, "external network: %v (%d found)", err, len(ext))
	}
	fip, err := env.os.Networking.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: ext[0].ID, PortID: toPort.ID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.os.Networking.DeleteFloatingIP(context.Background(), fip.ID) })
	for _, proto := range []string{"tcp", "udp"} {
		expectAnswer(t, env.vars["STACK_OUTSIDE_NETNS"], proto, net.JoinHostPort(fip.FloatingIP, "80"), to)
	}
	t.Logf("nested pod %s reached the outside through SNAT; the outside reached nested pod %s at floating IP %s", from, to, fip.FloatingIP)
}

// stackVM is the stack's nested node (hack/stack-vm.sh), as Neutron holds it.
func stackVM() vmNode {
	return vmNode{name: env.vars["STACK_VM_NAME"], subnet: env.vars["STACK_VM_SUBNET"], port: env.vars["STACK_VM_PORT"],
		trunk: env.vars["STACK_VM_TRUNK"]}
}

// waitTrunkPool waits until the VM's trunk carries at least n free ports of Raven's trunk pool for the
// namespace (tagged raven.kind=pool and raven.node=<the VM's node>, on the namespace's network), and r refills
// no pool, and returns them with their VLANs. A refill runs in batches: while one is under way, a port its next
// batch attaches would be free before a pod is created and missing from what this returns.
func waitTrunkPool(t *testing.T, r *Raven, vm vmNode, ns string, n int, timeout time.Duration) map[string]int {
	t.Helper()
	network := namespaceNetwork(t, ns)
	pooled := map[string]int{}
	eventually(t, timeout, fmt.Sprintf("%d ports of the trunk pool on %s's trunk", n, vm.name), func() (bool, error) {
		clear(pooled)
		for id, vlan := range vm.subports(t) {
			var p struct{ Port openstack.Port }
			if err := neutronTry(http.MethodGet, "ports/"+id, nil, &p); err != nil {
				return false, err
			}
			if trunkPoolPort(p.Port, vm) && p.Port.NetworkID == network {
				pooled[id] = vlan
			}
		}
		return len(pooled) >= n && r.metric(t, "raven_port_pool_refills_in_progress", nil) == 0, nil
	})
	return pooled
}

// A nested pod behind a Service and under a NetworkPolicy, as a chassis pod is: a pod on node-1 reaches it
// through the Service's clusterIP (an OVN load balancer whose member is the subport's address), and once a
// policy admits ingress only from pods labelled role=allowed, the subport's security group refuses the other
// client, by pod address and clusterIP, while the allowed one keeps reaching it.
func TestNestedPodsBehindServicesAndPolicies(t *testing.T) {
	needDatapath(t)
	needOVNProvider(t)
	if env.vars["STACK_VM_NAME"] == "" {
		t.Skip("the stack has no nested node (STACK_NESTED=1)")
	}
	startRaven(t, ravenOpts{config: writeConfig(t, fmt.Sprintf("nested: {workerSubnetID: %s, nodeSelector: raven.io/nested=true}\n", env.vars["STACK_VM_SUBNET"]))})
	t.Cleanup(func() { startRaven(t, ravenOpts{}) })
	ctx := context.Background()
	ns := newNamespace(t)
	if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, nestedPod("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createServingPods(t, ns, "other", "allowed")
	if _, err := env.kube.CoreV1().Pods(ns).Patch(ctx, "allowed", types.MergePatchType, []byte(`{"metadata":{"labels":{"role":"allowed"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	web := waitPodReady(t, ns, "web", 3*time.Minute)
	svc := createService(t, ns, "web", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: 8080, Protocol: corev1.ProtocolTCP, TargetPort: intOrString(80)}}
	})
	waitMembers(t, ns, "web", svc.UID, 1, 80)
	paths := []path{
		{"the nested pod's address", "tcp", net.JoinHostPort(web.Status.PodIP, "80")},
		{"the clusterIP", "tcp", net.JoinHostPort(svc.Spec.ClusterIP, "8080")},
	}
	other, allowed := podNetns(ns, "other"), podNetns(ns, "allowed")
	for _, p := range paths {
		openWithin(t, other, p, "web", 2*time.Minute)
		openWithin(t, allowed, p, "web", 2*time.Minute)
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web-from-allowed"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "allowed"}}}}}},
	}}
	if _, err := env.kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the policy to close the nested pod to the other client", func() (bool, error) {
		return closedFor(other, paths[0], "web", 3*time.Second), nil
	})
	for _, p := range paths {
		if !closedFor(other, p, "web", 5*time.Second) {
			errorf(t, "the other client still reaches the nested pod through %s", p.what)
		}
		openWithin(t, allowed, p, "web", 30*time.Second)
	}
	t.Logf("nested pod web (VLAN subport on %s) behind Service %s: reached through its clusterIP; under a policy, refused to the other client and reached by the allowed one, by address and clusterIP",
		env.vars["STACK_VM_NAME"], svc.Spec.ClusterIP)
}

// namespaceNetwork is the ID of the namespace's Neutron network, from its subnet annotation.
func namespaceNetwork(t *testing.T, ns string) string {
	t.Helper()
	n, err := env.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sub annotations.Subnet
	if _, err := annotations.Decode(n.Annotations, annotations.NamespaceSubnet, &sub); err != nil {
		t.Fatal(err)
	}
	return sub.NetworkID
}
