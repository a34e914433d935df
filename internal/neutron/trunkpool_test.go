package neutron

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// trunkPoolSetup is a cluster with namespace "ns" and two node VMs (vmNeutron), with trunk pools of the given
// size and per-node pools for the chassis nodes.
func trunkPoolSetup(ctx context.Context, t *testing.T, minFree int) (*fake.Neutron, *Manager, *NamespaceNet, map[string]VMNode, map[string]*openstack.Trunk) {
	t.Helper()
	n, vms, trunks := vmNeutron(t)
	m, nn := setupNamespace(t, n)
	m.C.Caps.TagsOnPortCreate = true
	m.T = &Trunks{N: n, WorkerSubnetID: "workers"}
	m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: minFree, Max: 2 * max(minFree, 1), Batch: minFree, PerNode: true},
		retry: time.Millisecond, quiet: time.Millisecond}
	m.P.Start(ctx, 2)
	return n, m, nn, vms, trunks
}

// nestedPod is a pod of namespace ns on the nested node vm, and its owner.
func nestedPod(uid string, vm VMNode) (PodRef, ownership.Owner) {
	return PodRef{UID: uid, Namespace: "ns", Name: uid, Node: vm.Name, VM: &vm},
		ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: uid, Name: "ns/" + uid}
}

// warmTrunkPool has a first pod of vm take a port (made for it: the pool is empty), which starts the pool of
// vm's trunk, and waits for it to hold minFree ports.
func warmTrunkPool(ctx context.Context, t *testing.T, m *Manager, nn *NamespaceNet, vm VMNode, minFree int) {
	t.Helper()
	pod, _ := nestedPod("uid-first-"+vm.Name, vm)
	port, _, err := m.EnsurePort(ctx, pod, nn, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Attach(ctx, vm, port.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the trunk pool to fill", func() bool {
		return m.X.FreeIn(nn.Network.ID, TrunkPool(vm.Name)) >= minFree && m.P.Refilling() == 0
	})
}

// A nested node's pool is its VM's trunk: ports made in one bulk create, unbound and tagged with the node, go
// on the trunk in one add_subports request, each on a VLAN of its own.
func TestTrunkPoolsAttachInAdvance(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, m, nn, vms, trunks := trunkPoolSetup(ctx, t, 4)
	creates, adds := n.Called("CreatePorts"), n.Called("AddSubports")
	warmTrunkPool(ctx, t, m, nn, vms["vm-1"], 4)
	if got := n.Called("CreatePorts") - creates; got != 1 {
		t.Errorf("%d bulk creates filled the pool, want 1", got)
	}
	if got := n.Called("AddSubports") - adds; got != 2 {
		t.Errorf("%d add_subports calls attached the first pod's port and the pool, want 2", got)
	}
	n.Lock()
	defer n.Unlock()
	vlans := map[int]bool{}
	for _, s := range n.Trunks[trunks["vm-1"].ID].Subports {
		p := n.Ports[s.PortID]
		o, _ := ownership.Parse(p.Tags)
		if o.Kind == ownership.KindPod {
			vlans[s.SegmentationID] = true
			continue // the first pod's
		}
		if o.Kind != ownership.KindPool || o.Node != "vm-1" || p.HostID != "" || p.DeviceID != "" || vlans[s.SegmentationID] {
			t.Errorf("subport %s on VLAN %d: tags %v, host %q, device_id %q; want an unbound pool port of vm-1 on a VLAN of its own",
				p.ID, s.SegmentationID, p.Tags, p.HostID, p.DeviceID)
		}
		vlans[s.SegmentationID] = true
	}
	if len(vlans) != 5 {
		t.Errorf("the trunk carries %d ports, want the first pod's and 4 of the pool", len(vlans))
	}
	if len(n.Trunks[trunks["vm-2"].ID].Subports) != 0 || m.X.FreeIn(nn.Network.ID, "vm-1") != 0 || m.X.FreeIn(nn.Network.ID, "") != 0 {
		t.Error("a trunk pool's refill filled another pool")
	}
}

// A pod of a nested node takes a port of its trunk's pool, a subport already, with no request on its way to its
// annotation; its tags and name follow in the background, and it never gets a device_id. The claim survives a
// restart of Raven by the pod's annotation.
func TestTrunkPoolTake(t *testing.T) {
	for _, restarted := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		n, m, nn, vms, trunks := trunkPoolSetup(ctx, t, 1)
		warmTrunkPool(ctx, t, m, nn, vms["vm-1"], 1)
		m.P.Cfg.MinFree = 0 // no refill after the take: the restart below finds the pool empty
		pod, owner := nestedPod("uid-1", vms["vm-1"])
		writes := n.Wrote()
		port, created, err := m.EnsurePort(ctx, pod, nn, "")
		if err != nil || !created {
			t.Fatalf("EnsurePort = %v, %v", created, err)
		}
		sub, err := m.Attach(ctx, *pod.VM, port.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n.Wrote() != writes {
			t.Fatalf("restarted %v: the take and attach made %d Neutron writes, want 0", restarted, n.Wrote()-writes)
		}
		if sub.TrunkID != trunks["vm-1"].ID || sub.VLAN < 1 {
			t.Fatalf("the pod's port is at %+v, want a VLAN on vm-1's trunk", sub)
		}
		if restarted {
			restart(t, n, m, pod, port.ID, nn.Network.ID, TrunkPool("vm-1"))
			m.P.Start(ctx, 1)
		}
		eventually(t, "Neutron shows the subport as the pod's", func() bool {
			n.Lock()
			defer n.Unlock()
			p := n.Ports[port.ID]
			o, _ := ownership.Parse(p.Tags)
			return p.Name == pod.Name && o.Kind == ownership.KindPod && o.UID == owner.UID
		})
		eventually(t, "no claim is pending", func() bool { return m.P.Pending() == 0 && len(m.X.Claims()) == 0 })
		n.Lock()
		if p := n.Ports[port.ID]; p.DeviceID != "" || !slices.ContainsFunc(n.Trunks[trunks["vm-1"].ID].Subports,
			func(s openstack.Subport) bool { return s.PortID == port.ID && s.SegmentationID == sub.VLAN }) {
			t.Errorf("restarted %v: the port has device_id %q, or is not on VLAN %d of the trunk", restarted, p.DeviceID, sub.VLAN)
		}
		n.Unlock()
		cancel()
	}
}

// A pod whose NetworkPolicies want other groups than the pool's gets them before it is annotated, in one update
// that touches nothing else; a refused update leaves the port in the pool.
func TestTrunkPoolTakeWithPolicyGroups(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, m, nn, vms, _ := trunkPoolSetup(ctx, t, 1)
	warmTrunkPool(ctx, t, m, nn, vms["vm-1"], 1)
	m.P.Cfg.MinFree = 0
	pod, _ := nestedPod("uid-1", vms["vm-1"])
	pod.SecurityGroups = []string{"sg-policy"}
	n.Fail("UpdatePort", 1, openstack.NewError("neutron port update", openstack.KindConflict, 409, "Conflict"))
	if _, _, err := m.P.Take(ctx, nn, pod, ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: pod.UID}); err == nil {
		t.Fatal("Take succeeded although Neutron refused the groups")
	}
	if m.X.FreeIn(nn.Network.ID, TrunkPool("vm-1")) != 1 {
		t.Fatal("a refused group update took the port out of the pool")
	}
	port, ok, err := m.P.Take(ctx, nn, pod, ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: pod.UID})
	if err != nil || !ok {
		t.Fatalf("Take = %v, %v", ok, err)
	}
	n.Lock()
	defer n.Unlock()
	p := n.Ports[port.ID]
	if !slices.Equal(p.SecurityGroups, []string{"sg-policy"}) || p.DeviceID != "" || p.HostID != "" {
		t.Fatalf("the port has groups %v, device_id %q, host %q; want the policy's group alone and nothing else changed",
			p.SecurityGroups, p.DeviceID, p.HostID)
	}
}

// The trunk's subports show the VM's hypervisor as their host (ML2/OVN's trunk driver binds them there): a pod
// of that hypervisor, a chassis node, never takes one.
func TestAChassisPodNeverTakesATrunkPoolPort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, m, nn, vms, _ := trunkPoolSetup(ctx, t, 2)
	warmTrunkPool(ctx, t, m, nn, vms["vm-1"], 2)
	m.P.Cfg.MinFree = 0
	n.Lock()
	for _, p := range n.Ports {
		if o, _ := ownership.Parse(p.Tags); o.Node == "vm-1" {
			p.HostID = "node-1"
		}
	}
	n.Unlock()
	snap, err := List(ctx, n, m.C)
	if err != nil {
		t.Fatal(err)
	}
	m.X.Replace("c1", snap)
	pod := PodRef{UID: "uid-chassis", Namespace: "ns", Name: "c", Node: "node-1"}
	_, ok, err := m.P.Take(ctx, nn, pod, ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: pod.UID})
	if ok || err != nil {
		t.Fatalf("a pod of node-1 took a port (%v, %v); vm-1's trunk pool holds %d", ok, err, m.X.FreeIn(nn.Network.ID, TrunkPool("vm-1")))
	}
	if m.X.FreeIn(nn.Network.ID, TrunkPool("vm-1")) != 2 {
		t.Fatal("the trunk pool lost its ports to the listing")
	}
}

// The trunk pool of a deleted node, and the pools of a deleted namespace, are taken off the trunk and deleted;
// a nested pod's port is deleted, not recycled into a pool.
func TestTrunkPoolPortsGo(t *testing.T) {
	cases := []struct {
		name string
		act  func(t *testing.T, ctx context.Context, m *Manager, nn *NamespaceNet)
	}{
		{name: "the node is deleted", act: func(t *testing.T, ctx context.Context, m *Manager, nn *NamespaceNet) {
			m.P.Nodes = func(context.Context) ([]string, error) { return []string{"vm-2"}, nil }
			m.P.Tend(ctx, []NamespaceNet{*nn}, time.Now())
			m.P.bg.Wait()
		}},
		{name: "the namespace is deleted", act: func(t *testing.T, ctx context.Context, m *Manager, nn *NamespaceNet) {
			if _, err := m.ReleasePorts(ctx, "uid-first-vm-1"); err != nil {
				t.Fatal(err)
			}
			if err := m.DeleteNamespace(ctx, nn.NamespaceUID); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n, m, nn, vms, trunks := trunkPoolSetup(ctx, t, 2)
			m.P.Cfg.Recycle = true
			warmTrunkPool(ctx, t, m, nn, vms["vm-1"], 2)
			m.P.Cfg.MinFree = 0
			tc.act(t, ctx, m, nn)
			n.Lock()
			defer n.Unlock()
			for _, p := range n.Ports {
				if o, _ := ownership.Parse(p.Tags); o.Kind == ownership.KindPool {
					t.Errorf("pool port %s is left (tags %v)", p.ID, p.Tags)
				}
			}
			want := 0 // the namespace's pod is gone
			if tc.name == "the node is deleted" {
				want = 1 // the pod's port goes with the pod, not with its node's pool
			}
			if subs := n.Trunks[trunks["vm-1"].ID].Subports; len(subs) != want {
				t.Errorf("vm-1's trunk carries %d subports, want %d", len(subs), want)
			}
		})
	}
}

// A nested pod's port, made for it and attached since the index last listed it (the index's copy does not say
// it is a subport), is deleted when its pod goes, not recycled into a pool: it is still on the trunk.
func TestANestedPodsPortIsNotRecycled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, m, nn, vms, trunks := trunkPoolSetup(ctx, t, 0)
	m.P.Cfg.Recycle = true
	pod, _ := nestedPod("uid-1", vms["vm-1"])
	port, _, err := m.EnsurePort(ctx, pod, nn, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Attach(ctx, vms["vm-1"], port.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReleasePorts(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	n.Lock()
	defer n.Unlock()
	if _, left := n.Ports[port.ID]; left || len(n.Trunks[trunks["vm-1"].ID].Subports) != 0 {
		t.Fatalf("the nested pod's port is left in Neutron (%v) or on the trunk (%d subports)", left, len(n.Trunks[trunks["vm-1"].ID].Subports))
	}
	if m.X.FreeTotal() != 0 {
		t.Fatal("the nested pod's port went into a pool")
	}
}

// A restarted Raven does not refill a trunk pool before a pod of its node takes a port: until then it does not
// know the VM's address, which finds the trunk, and the ports it made could not go on the trunk.
func TestATrunkPoolRefillsOnlyOnceItsNodeIsKnown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, m, nn, vms, _ := trunkPoolSetup(ctx, t, 2)
	warmTrunkPool(ctx, t, m, nn, vms["vm-1"], 2)
	// A restart, with one free port left in the pool (below minFree).
	m.P.Cfg.MinFree = 0
	taker, owner := nestedPod("uid-taker", vms["vm-1"])
	if _, ok, err := m.P.Take(ctx, nn, taker, owner); !ok || err != nil {
		t.Fatalf("Take = %v, %v", ok, err)
	}
	m.P.Cfg.MinFree = 2
	m.T = &Trunks{N: n, WorkerSubnetID: "workers"}
	m.P = &Pools{M: m, Cfg: m.P.Cfg}
	m.P.Start(ctx, 1)
	creates := n.Called("CreatePorts")
	m.P.Tend(ctx, []NamespaceNet{*nn}, time.Now())
	eventually(t, "the tend's refill to end", func() bool { return m.P.Refilling() == 0 })
	if n.Called("CreatePorts") != creates {
		t.Fatal("a trunk pool was refilled before its node's VM was known")
	}
	pod, owner := nestedPod("uid-next", vms["vm-1"])
	if _, ok, err := m.P.Take(ctx, nn, pod, owner); !ok || err != nil {
		t.Fatalf("Take = %v, %v", ok, err)
	}
	eventually(t, "the trunk pool to fill once a pod of its node came", func() bool {
		return m.X.FreeIn(nn.Network.ID, TrunkPool("vm-1")) >= 2 && m.P.Refilling() == 0
	})
}
