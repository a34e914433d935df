package neutron

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

func setup(t *testing.T, n *fake.Neutron) *Manager {
	t.Helper()
	ctx := context.Background()
	c, err := EnsureCluster(ctx, n, "c1", config.Neutron{
		ExternalNetwork: "public", PodSubnetPoolCIDR: "10.244.0.0/16", PodSubnetPrefixLength: 24, ServiceSubnetCIDR: "10.0.0.0/24",
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{N: n, C: c, X: NewIndex()}
	snap, err := List(ctx, n, c)
	if err != nil {
		t.Fatal(err)
	}
	m.X.Replace("c1", snap)
	return m
}

// setupNamespace is setup plus the network of namespace "ns" (UID "ns-uid").
func setupNamespace(t *testing.T, n *fake.Neutron) (*Manager, *NamespaceNet) {
	t.Helper()
	m := setup(t, n)
	nn, err := m.EnsureNamespace(context.Background(), "ns-uid", "ns")
	if err != nil {
		t.Fatal(err)
	}
	return m, nn
}

func TestEnsureClusterIsIdempotent(t *testing.T) {
	n := fake.NewNeutron()
	first := setup(t, n)
	writes := n.Wrote()
	second := setup(t, n)
	if n.Wrote() != writes {
		t.Fatalf("a second EnsureCluster made %d writes, want 0", n.Wrote()-writes)
	}
	if first.C.ServiceSubnet.ID != second.C.ServiceSubnet.ID || first.C.RouterID != second.C.RouterID || first.C.SubnetPoolID != second.C.SubnetPoolID {
		t.Fatal("a second EnsureCluster found other objects than the first made")
	}
	if gw := first.C.ServiceSubnet.GatewayIP; gw != "10.0.0.254" {
		t.Fatalf("service gateway %s, want the last usable address so that clusterIPs stay free", gw)
	}
}

func TestEnsureNamespaceAndPort(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// prepare runs before the pod's port is ensured.
		prepare func(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet)
		// wantPorts is the number of ports of the pod afterwards.
		wantPorts int
		wantErr   openstack.Kind
	}{
		{name: "a new pod gets one port", wantPorts: 1},
		{
			name: "a port left by a crash before the index knew it is adopted, not duplicated",
			prepare: func(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet) {
				owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: "uid-1", Name: "ns/p"}
				if _, err := n.CreatePort(ctx, openstack.PortSpec{Name: "p", NetworkID: nn.Network.ID, DeviceID: "uid-1", DeviceOwner: DeviceOwner, Tags: owner.Tags()}); err != nil {
					t.Fatal(err)
				}
				snap, _ := List(ctx, n, m.C)
				m.X.Replace("c1", snap)
			},
			wantPorts: 1,
		},
		{
			name:      "two ports of one pod (a duplicate) become one",
			prepare:   twoPortsOfOnePod,
			wantPorts: 1,
		},
		{
			name: "without tags on create, an untagged port of the pod is found by device_id and tagged",
			prepare: func(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet) {
				n.Caps.TagsOnPortCreate = false
				m.C.Caps.TagsOnPortCreate = false
				if _, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: nn.Network.ID, DeviceID: "uid-1", DeviceOwner: DeviceOwner}); err != nil {
					t.Fatal(err)
				}
			},
			wantPorts: 1,
		},
		{
			name: "a quota error is returned classified, and nothing is left behind",
			prepare: func(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet) {
				n.Fail("CreatePort", 1, openstack.NewError("neutron port create", openstack.KindQuota, 409, "OverQuota"))
			},
			wantPorts: 0,
			wantErr:   openstack.KindQuota,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := fake.NewNeutron()
			m, nn := setupNamespace(t, n)
			if tc.prepare != nil {
				tc.prepare(t, n, m, nn)
			}
			port, _, err := m.EnsurePort(ctx, PodRef{UID: "uid-1", Namespace: "ns", Name: "p"}, nn, "")
			if got := openstack.KindOf(err); (err != nil || tc.wantErr != "") && got != tc.wantErr {
				t.Fatalf("err = %v (%s), want kind %q", err, got, tc.wantErr)
			}
			var mine []openstack.Port
			for _, p := range n.Ports {
				if p.DeviceID == "uid-1" {
					mine = append(mine, *p)
				}
			}
			if len(mine) != tc.wantPorts {
				t.Fatalf("%d ports for the pod in Neutron, want %d", len(mine), tc.wantPorts)
			}
			if tc.wantPorts == 1 {
				if mine[0].ID != port.ID || !ownership.Owns("c1", mine[0].Tags) {
					t.Fatalf("returned port %s, Neutron has %s with tags %v", port.ID, mine[0].ID, mine[0].Tags)
				}
			}
		})
	}
}

func TestDeleteNamespace(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	if _, _, err := m.EnsurePort(ctx, PodRef{UID: "uid-1", Namespace: "ns", Name: "p"}, nn, ""); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteNamespace(ctx, "ns-uid"); !errors.Is(err, ErrPortsRemain) {
		t.Fatalf("with a pod port left, DeleteNamespace = %v, want ErrPortsRemain", err)
	}
	if _, err := m.ReleasePorts(ctx, "uid-1"); err != nil {
		t.Fatal(err)
	}
	// A user's own port on the network is not Raven's to delete: the network stays, with a clear error.
	userPort, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: nn.Network.ID, Name: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteNamespace(ctx, "ns-uid"); openstack.KindOf(err) != openstack.KindConflict {
		t.Fatalf("with a user's port on the network, DeleteNamespace = %v, want a conflict", err)
	}
	if _, ok := n.Ports[userPort.ID]; !ok {
		t.Fatal("Raven deleted a port it does not own")
	}
	delete(n.Ports, userPort.ID)
	// A pool port the index never learnt of (a bulk create whose answer was lost to a deadline) is the
	// cluster's: it goes with the network.
	lost, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: nn.Network.ID, Name: "raven-pool",
		Tags: ownership.Owner{Cluster: "c1", Kind: ownership.KindPool, Name: "ns"}.Tags()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteNamespace(ctx, "ns-uid"); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Ports[lost.ID]; ok {
		t.Fatal("the pool port the index did not know is still there")
	}
	if _, ok := n.Nets[nn.Network.ID]; ok {
		t.Fatal("network still there")
	}
	if _, ok := n.Subnets[nn.Subnet.ID]; ok {
		t.Fatal("subnet still there")
	}
	if m.X.Network("ns-uid") != nil {
		t.Fatal("index still has the network")
	}
}

func TestEnsurePortKeepsTheAnnouncedDuplicate(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: "uid-1", Name: "ns/p"}
	var ids []string
	for range 2 {
		p, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: nn.Network.ID, DeviceID: "uid-1", Tags: owner.Tags()})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	snap, _ := List(ctx, n, m.C)
	m.X.Replace("c1", snap)
	// The pod already announces the newer port: it keeps its address, the older duplicate goes.
	port, _, err := m.EnsurePort(ctx, PodRef{UID: "uid-1", Namespace: "ns", Name: "p"}, nn, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if port.ID != ids[1] {
		t.Fatalf("kept %s, want the announced %s", port.ID, ids[1])
	}
	if _, ok := n.Ports[ids[0]]; ok {
		t.Fatal("the duplicate is still in Neutron")
	}
}

func TestConcurrentReleasesSendOneDelete(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	if _, _, err := m.EnsurePort(ctx, PodRef{UID: "uid-1", Namespace: "ns", Name: "p"}, nn, ""); err != nil {
		t.Fatal(err)
	}
	n.Delay = 100 * time.Millisecond // a busy Neutron: the workers overlap
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := m.ReleasePorts(ctx, "uid-1"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := n.Called("DeletePort"); got != 1 {
		t.Errorf("%d DELETEs for one port released by 8 workers at once, want 1", got)
	}
	if left := m.X.PortsOf("uid-1"); len(left) != 0 {
		t.Errorf("ports left in the index: %v", left)
	}
}

// twoPortsOfOnePod creates two tagged ports for pod uid-1 in Neutron and lists them into the index.
func twoPortsOfOnePod(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet) {
	ctx := context.Background()
	owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: "uid-1", Name: "ns/p"}
	for range 2 {
		if _, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: nn.Network.ID, DeviceID: "uid-1", Tags: owner.Tags()}); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := List(ctx, n, m.C)
	m.X.Replace("c1", snap)
}

// podPort gives the pod a port: taken from the pool when claimed (Neutron not yet showing the claim),
// else ensured as usual.
func podPort(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet, pod PodRef, owner ownership.Owner, claimed bool) openstack.Port {
	ctx := context.Background()
	var port openstack.Port
	if claimed {
		pool := ownership.Owner{Cluster: "c1", Kind: ownership.KindPool, Name: "ns"}
		free, err := n.CreatePort(ctx, openstack.PortSpec{Name: PoolPortName, NetworkID: nn.Network.ID, DeviceOwner: DeviceOwner, Tags: pool.Tags()})
		if err != nil {
			t.Fatal(err)
		}
		m.X.PutPort("c1", *free)
		var ok bool
		if port, ok, err = m.P.Take(ctx, nn, pod, owner); err != nil || !ok {
			t.Fatalf("no pool port taken (%v)", err)
		}
	} else {
		var err error
		if port, _, err = m.EnsurePort(ctx, pod, nn, ""); err != nil {
			t.Fatal(err)
		}
	}
	return port
}

func TestReleaseRecyclesIntoThePool(t *testing.T) {
	ctx := context.Background()
	pod := PodRef{UID: "uid-1", Namespace: "ns", Name: "p"}
	cases := []struct {
		name    string
		cfg     PoolConfig
		claimed bool // the port came from the pool and Neutron does not show the claim yet
		recycle bool
	}{
		{name: "recycling on, room in the pool: back to the pool", cfg: PoolConfig{Max: 5, Batch: 1, Recycle: true}, recycle: true},
		{name: "recycling off: deleted", cfg: PoolConfig{Max: 5, Batch: 1}},
		{name: "pool full: deleted", cfg: PoolConfig{Max: 0, Batch: 1, Recycle: true}},
		{name: "claim not yet in Neutron: deleted", cfg: PoolConfig{Max: 5, Batch: 1, Recycle: true}, claimed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := fake.NewNeutron()
			m, nn := setupNamespace(t, n)
			m.P = &Pools{M: m, Cfg: tc.cfg}
			owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: pod.UID, Name: "ns/p"}
			port := podPort(t, n, m, nn, pod, owner, tc.claimed)
			if _, err := m.ReleasePorts(ctx, pod.UID); err != nil {
				t.Fatal(err)
			}
			if len(m.X.PortsOf(pod.UID)) != 0 {
				t.Fatal("the pod still has a port in the index")
			}
			got, err := n.GetPort(ctx, port.ID)
			if !tc.recycle {
				if !openstack.IsNotFound(err) {
					t.Fatalf("port not deleted (%v)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("recycled port gone: %v", err)
			}
			if o, _ := ownership.Parse(got.Tags); o.Kind != ownership.KindPool || got.Name != PoolPortName || got.DeviceID != "" {
				t.Fatalf("recycled port = %+v, want a free pool port", got)
			}
			if m.X.FreeIn(nn.Network.ID, "") != 1 {
				t.Fatalf("free ports in the index = %d, want 1", m.X.FreeIn(nn.Network.ID, ""))
			}
			if n.Called("DeletePort") != 0 {
				t.Fatal("a recycled port must not be deleted")
			}
		})
	}
}

func TestReleaseLeavesAPortThatChangedHands(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	port, _, err := m.EnsurePort(ctx, PodRef{UID: "uid-new", Namespace: "ns", Name: "new"}, nn, "")
	if err != nil {
		t.Fatal(err)
	}
	// A worker that read the port as uid-old's before it changed hands must leave it alone.
	done, err := m.release(ctx, "uid-old", port)
	if err != nil || done {
		t.Fatalf("release = %v, %v; want nothing done", done, err)
	}
	if _, err := n.GetPort(ctx, port.ID); err != nil || n.Called("DeletePort") != 0 {
		t.Fatalf("the new owner's port was deleted (%v, %d deletes)", err, n.Called("DeletePort"))
	}
}

func TestRecyclingStopsAtMax(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	m.P = &Pools{M: m, Cfg: PoolConfig{Max: 2, Batch: 1, Recycle: true}}
	var uids []string
	for i := range 6 {
		uid := fmt.Sprintf("uid-%d", i)
		if _, _, err := m.EnsurePort(ctx, PodRef{UID: uid, Namespace: "ns", Name: uid}, nn, ""); err != nil {
			t.Fatal(err)
		}
		uids = append(uids, uid)
	}
	n.Delay = 20 * time.Millisecond // the recycling workers overlap
	var wg sync.WaitGroup
	for _, uid := range uids {
		wg.Go(func() {
			if _, err := m.ReleasePorts(ctx, uid); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if free := m.X.FreeIn(nn.Network.ID, ""); free != 2 {
		t.Errorf("%d free ports after 6 releases into a pool of at most 2, want 2", free)
	}
	if n.Called("DeletePort") != 4 {
		t.Errorf("%d deletes, want the 4 ports the pool had no room for", n.Called("DeletePort"))
	}
}
