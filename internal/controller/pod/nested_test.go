package pod

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
)

// nestedWorld is a world whose node "vm-1" is a nested node (a Nova VM on the worker subnet, its port the
// parent of a trunk) and whose node "metal" is an OVN chassis.
func nestedWorld(t *testing.T, objs ...*corev1.Pod) (*world, *openstack.Trunk) {
	t.Helper()
	vm := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm-1", Labels: map[string]string{"raven.io/nested": "true"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.11"}}}}
	metal := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal"}}
	w := newWorld(t, vm, metal)
	for _, p := range objs {
		if err := w.c.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	w.n.Ports["vmport"] = &openstack.Port{ID: "vmport", FixedIPs: []openstack.FixedIP{{SubnetID: "workers", IPAddress: "192.168.0.11"}}}
	tr := w.n.AddTrunk("vmport")
	w.r.Neutron.T = &neutron.Trunks{N: w.n, WorkerSubnetID: "workers"}
	w.r.Nested = &NestedNodes{Selector: labels.SelectorFromSet(labels.Set{"raven.io/nested": "true"})}
	return w, tr
}

func onNode(node string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

// A pod on a nested node gets a port that is not bound to the node but is a subport of the node VM's trunk, on
// a VLAN of its own there, and the annotation says where; a pod on a chassis node is bound as before; a pod
// not yet scheduled waits. Deleting the nested pod takes its port off the trunk and deletes it.
func TestNestedPodsGetSubports(t *testing.T) {
	ctx := context.Background()
	w, tr := nestedWorld(t, pod("a", "ua", onNode("vm-1")), pod("b", "ub", onNode("vm-1")), pod("m", "um", onNode("metal")), pod("later", "ul"))
	for _, name := range []string{"a", "b", "m", "later"} {
		if err := w.reconcile(t, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	checkSubport(t, w, "a", "ua", 1, tr.ID)
	checkSubport(t, w, "b", "ub", 2, tr.ID)
	if a := w.annotation(t, "m"); a == nil || a.Nested != nil || a.HostID != "metal" {
		t.Errorf("pod on the chassis node: annotation %+v, want its port bound to metal and no trunk", a)
	}
	if a := w.annotation(t, "later"); a != nil {
		t.Errorf("an unscheduled pod was annotated (%+v): a nested node's pod needs its node first", a)
	}
	if n := len(w.n.Trunks[tr.ID].Subports); n != 2 {
		t.Fatalf("the trunk carries %d subports, want 2", n)
	}

	if err := w.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.reconcile(t, "a"); err != nil {
		t.Fatal(err)
	}
	if ports := w.ports("ua"); len(ports) != 0 {
		t.Fatalf("the deleted pod still has %d port(s)", len(ports))
	}
	if subs := w.n.Trunks[tr.ID].Subports; len(subs) != 1 || subs[0].SegmentationID != 2 {
		t.Fatalf("trunk subports %+v, want b's alone on VLAN 2", subs)
	}
}

// checkSubport checks that the pod's annotation puts its port on the trunk of vm-1 on vlan, unbound, and
// names the pod's UID (a subport has no device_id to carry it).
func checkSubport(t *testing.T, w *world, name, uid string, vlan int, trunk string) {
	t.Helper()
	a := w.annotation(t, name)
	if a == nil || a.Nested == nil {
		t.Fatalf("pod %s: annotation %+v, want one with where its port is on the trunk", name, a)
	}
	if a.Nested.VLAN != vlan || a.Nested.Node != "vm-1" || a.Nested.TrunkID != trunk || a.Nested.ParentPortID != "vmport" || a.HostID != "" {
		t.Errorf("pod %s: nested %+v, host %q; want VLAN %d on trunk %s of vm-1, not bound", name, *a.Nested, a.HostID, vlan, trunk)
	}
	if a.PodUID != uid || a.DeviceID != "" {
		t.Errorf("pod %s: pod_uid %q, device_id %q; want %s and none", name, a.PodUID, a.DeviceID, uid)
	}
}

// A nested node whose VM port has no trunk: the pod gets a Warning event that says what to do, and an error
// for the retry.
func TestNestedPodWithoutTrunkIsAWarning(t *testing.T) {
	w, tr := nestedWorld(t, pod("a", "ua", onNode("vm-1")))
	delete(w.n.Trunks, tr.ID)
	if err := w.reconcile(t, "a"); err == nil {
		t.Fatal("no error for a node VM without a trunk")
	}
	select {
	case e := <-w.recorder.Events:
		if !strings.Contains(e, "Warning") || !strings.Contains(e, "trunk create --parent-port vmport") {
			t.Fatalf("event %q, want a Warning that says to create the trunk", e)
		}
	default:
		t.Fatal("no event")
	}
}

// A Raven whose nested configuration was removed (no worker subnet: it attaches nothing) still takes a deleted
// pod's port off its trunk to delete it; else Neutron's 409 would hold the port, and with it the namespace. It
// looks at the trunks of its own project (the node VMs' trunks it attached to are there) or, with credentials
// that name no project (auth_type none), at the trunk of the parent port the port's binding profile names;
// never at every trunk of the cloud.
func TestNestedPortReleasedWithoutNestedConfig(t *testing.T) {
	for _, project := range []string{"raven", ""} {
		t.Run("project "+project, func(t *testing.T) {
			ctx := context.Background()
			w, tr := nestedWorld(t, pod("a", "ua", onNode("vm-1")))
			if err := w.reconcile(t, "a"); err != nil {
				t.Fatal(err)
			}
			w.n.Project, w.n.Trunks[tr.ID].ProjectID = project, project
			w.n.ForgetListings()
			w.r.Nested = nil
			w.r.Neutron.T = &neutron.Trunks{N: w.n}
			if err := w.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}); err != nil {
				t.Fatal(err)
			}
			if err := w.reconcile(t, "a"); err != nil {
				t.Fatal(err)
			}
			if ports := w.ports("ua"); len(ports) != 0 || len(w.n.Trunks[tr.ID].Subports) != 0 {
				t.Fatalf("%d port(s) left, trunk subports %+v: want the port off the trunk and gone", len(ports), w.n.Trunks[tr.ID].Subports)
			}
			for _, l := range w.n.Unscoped("c1") {
				t.Errorf("%s by %+v (of %v) is not scoped to the cluster or Raven's project", l.Method, l.Filter, l.IDs)
			}
		})
	}
}

// A running nested pod whose subport is deleted out of band (taken off the trunk, then deleted, as Neutron
// requires): the port made for it has the former one's MAC and IP and goes on its VLAN, which the pod's
// interface on the VM carries (raven-node on a nested node does not re-plug a running pod), and a Normal event
// says so. When another port holds that VLAN meanwhile, the new port goes on another, and a Warning says the pod
// has no network until it is made again.
func TestNestedPodWhosePortIsDeletedKeepsItsVLAN(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		taken     bool
		wantVLAN  int
		wantEvent []string
	}{
		{name: "its VLAN free: kept", wantVLAN: 2, wantEvent: []string{"Normal PortRemade", "deleted from Neutron", "same MAC"}},
		{name: "its VLAN taken meanwhile: another, and a Warning", taken: true, wantVLAN: 4,
			wantEvent: []string{"Warning PodVLANChanged", "VLAN 4", "VLAN 2", "deleted and made again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runningOn := func(p *corev1.Pod) { p.Spec.NodeName, p.Status.Phase = "vm-1", corev1.PodRunning }
			w, tr := nestedWorld(t, pod("a", "ua", runningOn), pod("b", "ub", runningOn), pod("c", "uc", runningOn))
			for _, name := range []string{"a", "b", "c"} {
				if err := w.reconcile(t, name); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			checkSubport(t, w, "b", "ub", 2, tr.ID)
			before := w.annotation(t, "b")
			if err := w.n.RemoveSubports(ctx, tr.ID, []string{before.ID}); err != nil {
				t.Fatal(err)
			}
			if err := w.n.DeletePort(ctx, before.ID); err != nil {
				t.Fatal(err)
			}
			if tc.taken {
				w.n.Ports["other"] = &openstack.Port{ID: "other", NetworkID: before.NetworkID}
				if err := w.n.AddSubports(ctx, tr.ID, []openstack.Subport{{PortID: "other", SegmentationType: "vlan", SegmentationID: 2}}); err != nil {
					t.Fatal(err)
				}
			}
			w.list(t, "") // the resync's listing shows the port gone, and sends the pod back
			if err := w.reconcile(t, "b"); err != nil {
				t.Fatal(err)
			}
			after := w.annotation(t, "b")
			if after == nil || after.ID == before.ID || after.MACAddress != before.MACAddress || after.FixedIPs[0].IPAddress != before.FixedIPs[0].IPAddress {
				t.Fatalf("annotation %+v, want a new port with the MAC and IP of %+v", after, before)
			}
			checkSubport(t, w, "b", "ub", tc.wantVLAN, tr.ID)
			ev := nextEvent(t, w)
			checkEventHas(t, ev, append(tc.wantEvent, before.ID, after.ID))
		})
	}
}

// A deleted Node's trunk is forgotten: a Node made again under its name (another VM) has its VM's port looked
// up again for its next pod, and Raven does not keep the trunk of every VM the cluster ever had.
func TestADeletedNestedNodesTrunkIsForgotten(t *testing.T) {
	ctx := context.Background()
	w, _ := nestedWorld(t, pod("a", "ua", onNode("vm-1")), pod("b", "ub", onNode("vm-1")))
	if err := w.reconcile(t, "a"); err != nil {
		t.Fatal(err)
	}
	lookups := w.n.Called("PortsWithAddress")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm-1"}}
	w.r.forgetTrunks().Delete(ctx, event.DeleteEvent{Object: node}, nil)
	if err := w.reconcile(t, "b"); err != nil {
		t.Fatal(err)
	}
	if got := w.n.Called("PortsWithAddress") - lookups; got != 1 {
		t.Fatalf("%d lookups of the VM's port for a pod of a Node deleted and made again, want 1", got)
	}
}
