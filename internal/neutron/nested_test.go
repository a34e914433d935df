package neutron

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// vmNeutron is a fake Neutron with two node VMs on the worker subnet, each VM port the parent of a trunk.
func vmNeutron(t *testing.T) (*fake.Neutron, map[string]VMNode, map[string]*openstack.Trunk) {
	t.Helper()
	n := fake.NewNeutron()
	nodes := map[string]VMNode{"vm-1": {Name: "vm-1", Address: "192.168.0.11"}, "vm-2": {Name: "vm-2", Address: "192.168.0.12"}}
	trunks := map[string]*openstack.Trunk{}
	for name, node := range nodes {
		p := &openstack.Port{ID: "vmport-" + name, NetworkID: "workers-net", FixedIPs: []openstack.FixedIP{{SubnetID: "workers", IPAddress: node.Address}}}
		n.Ports[p.ID] = p
		trunks[name] = n.AddTrunk(p.ID)
	}
	return n, nodes, trunks
}

// subportCandidate puts a pod's port into the fake.
func subportCandidate(t *testing.T, n *fake.Neutron, name string) string {
	t.Helper()
	id := fmt.Sprintf("port-%s-%d", name, len(n.Ports))
	n.Ports[id] = &openstack.Port{ID: id, Name: name, NetworkID: "ns-net", DeviceOwner: DeviceOwner}
	return id
}

func TestTrunksAttach(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// before runs on Neutron before a fresh Trunks attaches; it returns the ports to attach, in order, with
		// the node of each.
		before func(t *testing.T, n *fake.Neutron, tr map[string]*openstack.Trunk) (ports, nodes []string)
		want   []int
		// adds is the add_subports calls Raven makes.
		adds int
	}{
		{
			name: "VLAN IDs count per trunk",
			before: func(t *testing.T, n *fake.Neutron, _ map[string]*openstack.Trunk) ([]string, []string) {
				return []string{subportCandidate(t, n, "a"), subportCandidate(t, n, "b"), subportCandidate(t, n, "c")}, []string{"vm-1", "vm-1", "vm-2"}
			},
			want: []int{1, 2, 1}, adds: 3,
		},
		{
			name: "a port attached already keeps its ID, with no call",
			before: func(t *testing.T, n *fake.Neutron, tr map[string]*openstack.Trunk) ([]string, []string) {
				a := subportCandidate(t, n, "a")
				if err := n.AddSubports(ctx, tr["vm-1"].ID, []openstack.Subport{{PortID: a, SegmentationType: "vlan", SegmentationID: 7}}); err != nil {
					t.Fatal(err)
				}
				return []string{a, a}, []string{"vm-1", "vm-1"}
			},
			want: []int{7, 7}, adds: 0,
		},
		{
			name: "after a restart the IDs in use are read from Neutron",
			before: func(t *testing.T, n *fake.Neutron, tr map[string]*openstack.Trunk) ([]string, []string) {
				old := subportCandidate(t, n, "old")
				if err := n.AddSubports(ctx, tr["vm-1"].ID, []openstack.Subport{{PortID: old, SegmentationType: "vlan", SegmentationID: 1}}); err != nil {
					t.Fatal(err)
				}
				return []string{subportCandidate(t, n, "new")}, []string{"vm-1"}
			},
			want: []int{2}, adds: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, nodes, trunks := vmNeutron(t)
			ports, on := tc.before(t, n, trunks)
			adds := n.Called("AddSubports")
			x := &Trunks{N: n, WorkerSubnetID: "workers"}
			for i, p := range ports {
				s, err := x.Attach(ctx, nodes[on[i]], p)
				if err != nil {
					t.Fatal(err)
				}
				if s.VLAN != tc.want[i] || s.TrunkID != trunks[on[i]].ID || s.ParentPortID != "vmport-"+on[i] {
					t.Errorf("port %d on %s: %+v, want VLAN %d on trunk %s", i, on[i], s, tc.want[i], trunks[on[i]].ID)
				}
			}
			if got := n.Called("AddSubports") - adds; got != tc.adds {
				t.Errorf("%d add_subports calls, want %d", got, tc.adds)
			}
		})
	}
}

// Another writer (a Raven that led before) took the ID this one chose since it read the trunk: Neutron says
// 409, and the port goes on the next free ID; no ID is ever on two ports.
func TestTrunksAttachAfterAConflict(t *testing.T) {
	ctx := context.Background()
	n, nodes, trunks := vmNeutron(t)
	x := &Trunks{N: n, WorkerSubnetID: "workers"}
	if _, err := x.Attach(ctx, nodes["vm-1"], subportCandidate(t, n, "a")); err != nil {
		t.Fatal(err)
	}
	other := subportCandidate(t, n, "other")
	if err := n.AddSubports(ctx, trunks["vm-1"].ID, []openstack.Subport{{PortID: other, SegmentationType: "vlan", SegmentationID: 2}}); err != nil {
		t.Fatal(err)
	}
	s, err := x.Attach(ctx, nodes["vm-1"], subportCandidate(t, n, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if s.VLAN != 3 {
		t.Fatalf("VLAN %d, want 3 (1 is a's, 2 the other writer's)", s.VLAN)
	}
	seen := map[int]string{}
	for _, sp := range n.Trunks[trunks["vm-1"].ID].Subports {
		if p, dup := seen[sp.SegmentationID]; dup {
			t.Fatalf("VLAN %d is on %s and %s", sp.SegmentationID, p, sp.PortID)
		}
		seen[sp.SegmentationID] = sp.PortID
	}
}

func TestTrunksAttachRefusals(t *testing.T) {
	ctx := context.Background()
	n, nodes, trunks := vmNeutron(t)
	n.Ports["lonely"] = &openstack.Port{ID: "lonely", FixedIPs: []openstack.FixedIP{{SubnetID: "workers", IPAddress: "192.168.0.13"}}}
	full := make([]openstack.Subport, 0, MaxVLAN)
	for id := 1; id <= MaxVLAN; id++ {
		p := fmt.Sprintf("filler-%d", id)
		n.Ports[p] = &openstack.Port{ID: p}
		full = append(full, openstack.Subport{PortID: p, SegmentationType: "vlan", SegmentationID: id})
	}
	if err := n.AddSubports(ctx, trunks["vm-2"].ID, full); err != nil {
		t.Fatal(err)
	}
	x := &Trunks{N: n, WorkerSubnetID: "workers"}
	for _, tc := range []struct {
		node VMNode
		want string
		is   error
	}{
		{VMNode{Name: "vm-3", Address: "192.168.0.13"}, "trunk create --parent-port lonely", nil},
		{VMNode{Name: "vm-4", Address: "192.168.0.14"}, "0 ports hold 192.168.0.14", nil},
		{VMNode{Name: "vm-5"}, "no InternalIP", nil},
		{nodes["vm-2"], "every VLAN ID", ErrTrunkFull},
	} {
		_, err := x.Attach(ctx, tc.node, subportCandidate(t, n, "p"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("node %s: error %v, want one saying %q", tc.node.Name, err, tc.want)
		}
	}
}

// A subport cannot be deleted (Neutron's PortInUseAsSubPort); Detach takes it off its trunk first, whether
// this Raven attached it or one before it did.
func TestTrunksDetach(t *testing.T) {
	ctx := context.Background()
	for _, fresh := range []bool{false, true} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			n, nodes, trunks := vmNeutron(t)
			x := &Trunks{N: n, WorkerSubnetID: "workers"}
			p := subportCandidate(t, n, "a")
			if _, err := x.Attach(ctx, nodes["vm-1"], p); err != nil {
				t.Fatal(err)
			}
			if err := n.DeletePort(ctx, p); openstack.KindOf(err) != openstack.KindConflict {
				t.Fatalf("deleting a subport: %v, want Neutron's 409", err)
			}
			if fresh {
				x = &Trunks{N: n, WorkerSubnetID: "workers"}
			}
			if err := x.Detach(ctx, p); err != nil {
				t.Fatal(err)
			}
			if len(n.Trunks[trunks["vm-1"].ID].Subports) != 0 {
				t.Fatal("the port is still a subport")
			}
			if err := n.DeletePort(ctx, p); err != nil {
				t.Fatal(err)
			}
			if err := x.Detach(ctx, "never-attached"); err != nil {
				t.Fatalf("detaching a port no trunk carries: %v", err)
			}
		})
	}
}

// A node's VM replaced under the same node name (a new port and trunk): the next attach finds the new trunk.
func TestTrunksAttachAfterTheVMWasReplaced(t *testing.T) {
	ctx := context.Background()
	n, nodes, trunks := vmNeutron(t)
	x := &Trunks{N: n, WorkerSubnetID: "workers"}
	if _, err := x.Attach(ctx, nodes["vm-1"], subportCandidate(t, n, "a")); err != nil {
		t.Fatal(err)
	}
	old := trunks["vm-1"]
	delete(n.Trunks, old.ID)
	delete(n.Ports, old.PortID)
	n.Ports["vmport-new"] = &openstack.Port{ID: "vmport-new", FixedIPs: []openstack.FixedIP{{SubnetID: "workers", IPAddress: nodes["vm-1"].Address}}}
	fresh := n.AddTrunk("vmport-new")
	s, err := x.Attach(ctx, nodes["vm-1"], subportCandidate(t, n, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if s.TrunkID != fresh.ID || s.ParentPortID != "vmport-new" || s.VLAN != 1 {
		t.Fatalf("attached at %+v, want VLAN 1 on the new trunk %s", s, fresh.ID)
	}
}

// A burst of pods with pools off: the attaches that wait while one add_subports is in Neutron go together in
// the next, each port on a VLAN of its own; a port Neutron refuses (its pod deleted meanwhile) fails alone.
func TestTrunksAttachBatches(t *testing.T) {
	for _, withGone := range []bool{false, true} {
		n, nodes, trunks := vmNeutron(t)
		n.Delay = 20 * time.Millisecond
		x := &Trunks{N: n, WorkerSubnetID: "workers"}
		const pods = 20
		ports := make([]string, pods)
		for i := range ports {
			ports[i] = subportCandidate(t, n, fmt.Sprint("p", i))
		}
		if withGone {
			ports[pods/2] = "port-deleted-meanwhile"
		}
		subs, errs := make([]Subport, pods), make([]error, pods)
		var wg sync.WaitGroup
		for i := range ports {
			wg.Go(func() { subs[i], errs[i] = x.Attach(context.Background(), nodes["vm-1"], ports[i]) })
		}
		wg.Wait()
		vlans := map[int]string{}
		for i, id := range ports {
			if withGone && i == pods/2 {
				if !openstack.IsNotFound(errs[i]) {
					t.Errorf("the deleted port's attach: %v, want Neutron's 404", errs[i])
				}
				continue
			}
			if errs[i] != nil {
				t.Fatalf("gone port %v: port %s: %v", withGone, id, errs[i])
			}
			if other, dup := vlans[subs[i].VLAN]; dup {
				t.Fatalf("VLAN %d is on %s and %s", subs[i].VLAN, other, id)
			}
			vlans[subs[i].VLAN] = id
		}
		n.Lock()
		calls, carried := n.Calls["AddSubports"], len(n.Trunks[trunks["vm-1"].ID].Subports)
		n.Unlock()
		if want := len(vlans); carried != want {
			t.Errorf("gone port %v: the trunk carries %d subports, want %d", withGone, carried, want)
		}
		if !withGone && calls > pods/2 {
			t.Errorf("%d add_subports calls for %d concurrent attaches, want them batched", calls, pods)
		}
		t.Logf("gone port %v: %d concurrent attaches in %d add_subports calls", withGone, pods, calls)
	}
}

// A namespace's teardown: the detaches of many subports of one trunk that wait while a remove_subports is in
// Neutron go together in the next, and each port is deleted with no refused DELETE first; a port already off
// the trunk (taken off behind Raven's back) does not fail the others.
func TestTrunksDetachBatches(t *testing.T) {
	for _, withGone := range []bool{false, true} {
		n, nodes, trunks := vmNeutron(t)
		x := &Trunks{N: n, WorkerSubnetID: "workers"}
		m := &Manager{N: n, X: NewIndex(), T: x}
		const pods = 20
		ports := make([]string, pods)
		for i := range ports {
			ports[i] = subportCandidate(t, n, fmt.Sprint("p", i))
		}
		if _, err := x.AttachAll(context.Background(), nodes["vm-1"], ports); err != nil {
			t.Fatal(err)
		}
		if withGone {
			if err := n.RemoveSubports(context.Background(), trunks["vm-1"].ID, ports[pods/2:pods/2+1]); err != nil {
				t.Fatal(err)
			}
		}
		n.Lock()
		n.Delay = 20 * time.Millisecond
		removes, deletes := n.Calls["RemoveSubports"], n.Calls["DeletePort"]
		n.Unlock()
		errs := make([]error, pods)
		var wg sync.WaitGroup
		for i := range ports {
			wg.Go(func() { errs[i] = m.deletePort(context.Background(), ports[i]) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("gone port %v: deleting port %s: %v", withGone, ports[i], err)
			}
		}
		n.Lock()
		if len(n.Ports) != 2 || len(n.Trunks[trunks["vm-1"].ID].Subports) != 0 {
			t.Errorf("gone port %v: %d ports left (want the two VMs'), %d subports left", withGone, len(n.Ports), len(n.Trunks[trunks["vm-1"].ID].Subports))
		}
		if got := n.Calls["DeletePort"] - deletes; got != pods {
			t.Errorf("gone port %v: %d DELETEs for %d ports, want one each (none refused)", withGone, got, pods)
		}
		// Each DELETE, also a write of the fake, is one at a time between the batches: fewer calls than ports
		// is what shows the batching.
		if got := n.Calls["RemoveSubports"] - removes; !withGone && got >= pods {
			t.Errorf("%d remove_subports calls for %d concurrent deletes, want them batched", got, pods)
		}
		t.Logf("gone port %v: %d concurrent deletes of subports, %d remove_subports calls", withGone, pods, n.Calls["RemoveSubports"]-removes)
		n.Unlock()
	}
}

// A running pod's subport deleted out of band (taken off the trunk, then deleted, as Neutron requires): the
// port made again for the pod goes on the VLAN of the former one, which the pod's interface on its node
// carries, when no other port holds it in Neutron; Raven's own copy of the trunk, which still names the
// former port there, is not what decides.
func TestTrunksAttachAtKeepsTheVLANOfAPortMadeAgain(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// oob runs on Neutron once a, b and c are on vm-1's trunk (VLANs 1, 2, 3), behind Raven's back.
		oob  func(t *testing.T, n *fake.Neutron, trunk string, b string)
		keep int
		want int
	}{
		{
			name: "the former port's VLAN is free in Neutron: the new port takes it",
			oob: func(t *testing.T, n *fake.Neutron, trunk, b string) {
				if err := n.RemoveSubports(ctx, trunk, []string{b}); err != nil {
					t.Fatal(err)
				}
				if err := n.DeletePort(ctx, b); err != nil {
					t.Fatal(err)
				}
			},
			keep: 2, want: 2,
		},
		{
			name: "another port took the former VLAN meanwhile: the lowest free one",
			oob: func(t *testing.T, n *fake.Neutron, trunk, b string) {
				if err := n.RemoveSubports(ctx, trunk, []string{b}); err != nil {
					t.Fatal(err)
				}
				other := subportCandidate(t, n, "other")
				if err := n.AddSubports(ctx, trunk, []openstack.Subport{{PortID: other, SegmentationType: "vlan", SegmentationID: 2}}); err != nil {
					t.Fatal(err)
				}
			},
			keep: 2, want: 4,
		},
		{
			name: "a VLAN no port holds, asked for: the new port takes it",
			oob:  func(*testing.T, *fake.Neutron, string, string) {},
			keep: 9, want: 9,
		},
		{
			name: "nothing asked for: the lowest free one",
			oob: func(t *testing.T, n *fake.Neutron, trunk, b string) {
				if err := n.RemoveSubports(ctx, trunk, []string{b}); err != nil {
					t.Fatal(err)
				}
			},
			keep: 0, want: 4,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, nodes, trunks := vmNeutron(t)
			x := &Trunks{N: n, WorkerSubnetID: "workers"}
			b := attachABC(ctx, t, n, x, nodes["vm-1"])
			tr := trunks["vm-1"].ID
			tc.oob(t, n, tr, b)
			s, err := x.AttachAt(ctx, nodes["vm-1"], subportCandidate(t, n, "b-again"), tc.keep)
			if err != nil {
				t.Fatal(err)
			}
			if s.VLAN != tc.want || s.TrunkID != tr {
				t.Errorf("the port made again is at %+v, want VLAN %d on trunk %s", s, tc.want, tr)
			}
			noVLANTwice(t, n.Trunks[tr].Subports)
		})
	}
}

// attachABC attaches ports a, b and c to vm's trunk (VLANs 1, 2, 3) and returns b's ID.
func attachABC(ctx context.Context, t *testing.T, n *fake.Neutron, x *Trunks, vm VMNode) string {
	t.Helper()
	var b string
	for i, name := range []string{"a", "b", "c"} {
		p := subportCandidate(t, n, name)
		if s, err := x.Attach(ctx, vm, p); err != nil || s.VLAN != i+1 {
			t.Fatalf("port %s: %+v, %v; want VLAN %d", name, s, err, i+1)
		}
		if name == "b" {
			b = p
		}
	}
	return b
}

// noVLANTwice fails t when two subports share a VLAN.
func noVLANTwice(t *testing.T, subports []openstack.Subport) {
	t.Helper()
	seen := map[int]string{}
	for _, sp := range subports {
		if p, dup := seen[sp.SegmentationID]; dup {
			t.Fatalf("VLAN %d is on %s and %s", sp.SegmentationID, p, sp.PortID)
		}
		seen[sp.SegmentationID] = sp.PortID
	}
}

// A node whose InternalIP changed (its VM replaced under the same name, the former VM and its trunk still
// there) has its pods' ports put on the trunk of the VM that holds its address now, not on the one Raven found
// first; Forget (the Node deleted) makes the next attach look the VM up again.
func TestTrunksFollowTheNodesAddress(t *testing.T) {
	ctx := context.Background()
	n, nodes, trunks := vmNeutron(t)
	x := &Trunks{N: n, WorkerSubnetID: "workers"}
	if s, err := x.Attach(ctx, nodes["vm-1"], subportCandidate(t, n, "a")); err != nil || s.TrunkID != trunks["vm-1"].ID {
		t.Fatalf("first attach: %+v, %v; want trunk %s", s, err, trunks["vm-1"].ID)
	}
	n.Ports["vmport-new"] = &openstack.Port{ID: "vmport-new", FixedIPs: []openstack.FixedIP{{SubnetID: "workers", IPAddress: "192.168.0.21"}}}
	fresh := n.AddTrunk("vmport-new")
	moved := VMNode{Name: "vm-1", Address: "192.168.0.21"}
	s, err := x.Attach(ctx, moved, subportCandidate(t, n, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if s.TrunkID != fresh.ID || s.ParentPortID != "vmport-new" {
		t.Fatalf("a pod of the node at its new address went to %+v, want the trunk %s of the VM holding that address", s, fresh.ID)
	}

	lookups := n.Called("PortsWithAddress")
	if _, err := x.Attach(ctx, moved, subportCandidate(t, n, "c")); err != nil {
		t.Fatal(err)
	}
	if got := n.Called("PortsWithAddress") - lookups; got != 0 {
		t.Errorf("%d lookups of the VM's port for a node whose address did not change, want 0", got)
	}
	x.Forget("vm-1")
	if _, err := x.Attach(ctx, moved, subportCandidate(t, n, "d")); err != nil {
		t.Fatal(err)
	}
	if got := n.Called("PortsWithAddress") - lookups; got != 1 {
		t.Errorf("%d lookups of the VM's port after Forget, want 1", got)
	}
}
