package neutron

import (
	"context"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// A running pod whose port is gone gets a port with the same MAC and IP when Neutron still has them free,
// and a port with a new address otherwise.
func TestEnsurePortKeepsTheAddressOfAVanishedPort(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// prepare runs after the pod's port was deleted out of band (with the port of the pod made before it,
		// so that the lowest free address is not the pod's).
		prepare func(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet, gone openstack.Port) *Address
		// wantSame says the new port has the gone port's MAC and IP.
		wantSame bool
		// wantCreates is the number of port creates Neutron saw for the pod.
		wantCreates int
	}{
		{
			name:     "the address is free: the new port has the same MAC and IP",
			wantSame: true, wantCreates: 1,
		},
		{
			name: "another port holds the IP now: the pod gets a new address, and that port is left alone",
			prepare: func(t *testing.T, n *fake.Neutron, _ *Manager, nn *NamespaceNet, gone openstack.Port) *Address {
				if _, err := n.CreatePort(ctx, openstack.PortSpec{Name: "user", NetworkID: nn.Network.ID, IPAddress: gone.FixedIPs[0].IPAddress}); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			wantCreates: 2,
		},
		{
			name: "the address is not in the namespace's subnet (its network was made again): Neutron is not asked for it",
			prepare: func(*testing.T, *fake.Neutron, *Manager, *NamespaceNet, openstack.Port) *Address {
				return &Address{MAC: "fa:16:3e:00:99:99", IP: "10.99.0.7"}
			},
			wantCreates: 1,
		},
		{
			name: "Neutron's policy forbids choosing the address: the pod gets a new one",
			prepare: func(_ *testing.T, n *fake.Neutron, _ *Manager, _ *NamespaceNet, _ openstack.Port) *Address {
				n.Fail("CreatePort", 1, openstack.NewError("neutron port create", openstack.KindForbidden, 403, "(rule:create_port:mac_address) is disallowed by policy"))
				return nil
			},
			wantCreates: 2,
		},
		{
			name: "with a free pool port, the address is asked for first",
			prepare: func(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet, _ openstack.Port) *Address {
				m.P = &Pools{M: m, Cfg: PoolConfig{Max: 5, Batch: 1}}
				pool := ownership.Owner{Cluster: "c1", Kind: ownership.KindPool, Name: "ns"}
				free, err := n.CreatePort(ctx, openstack.PortSpec{Name: PoolPortName, NetworkID: nn.Network.ID, DeviceOwner: DeviceOwner, Tags: pool.Tags()})
				if err != nil {
					t.Fatal(err)
				}
				m.X.PutPort("c1", *free)
				return nil
			},
			wantSame: true, wantCreates: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := fake.NewNeutron()
			m, nn := setupNamespace(t, n)
			pod := PodRef{UID: "uid-1", Namespace: "ns", Name: "p", Node: "node-a"}
			// Out of band: both ports deleted, and the resync's listing shows it.
			gone := deleteThePodsPortAndTheOneBefore(ctx, t, n, m, nn, pod)
			keep := &Address{MAC: gone.MACAddress, IP: gone.FixedIPs[0].IPAddress}
			if tc.prepare != nil {
				if k := tc.prepare(t, n, m, nn, gone); k != nil {
					keep = k
				}
			}
			relist(ctx, t, n, m)
			creates := n.Called("CreatePort")

			pod.Keep = keep
			port, _, err := m.EnsurePort(ctx, pod, nn, gone.ID)
			if err != nil {
				t.Fatalf("EnsurePort = %v", err)
			}
			checkANewPortOfThePod(t, port, gone, pod)
			checkTheAddressIsKeptOnlyIf(t, port, keep, tc.wantSame)
			if got := n.Called("CreatePort") - creates; got != tc.wantCreates {
				t.Errorf("%d port creates, want %d", got, tc.wantCreates)
			}
			checkThePodHasOnePort(t, n, pod)
		})
	}
}

// deleteThePodsPortAndTheOneBefore makes a port for a pod made before pod, then pod's, and deletes both out of
// band. It returns pod's port.
func deleteThePodsPortAndTheOneBefore(ctx context.Context, t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet, pod PodRef) openstack.Port {
	t.Helper()
	first, _, err := m.EnsurePort(ctx, PodRef{UID: "uid-0", Namespace: "ns", Name: "before", Node: "node-a"}, nn, "")
	if err != nil {
		t.Fatal(err)
	}
	gone, _, err := m.EnsurePort(ctx, pod, nn, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first.ID, gone.ID} {
		if err := n.DeletePort(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	return gone
}

// relist is a resync's listing: the index holds what Neutron shows now.
func relist(ctx context.Context, t *testing.T, n *fake.Neutron, m *Manager) {
	t.Helper()
	snap, err := List(ctx, n, m.C)
	if err != nil {
		t.Fatal(err)
	}
	m.X.Replace("c1", snap)
}

// checkANewPortOfThePod: port is another port than gone, with one address, bound to node-a, of pod.
func checkANewPortOfThePod(t *testing.T, port, gone openstack.Port, pod PodRef) {
	t.Helper()
	if port.ID == gone.ID || len(port.FixedIPs) != 1 || port.HostID != "node-a" || port.DeviceID != pod.UID {
		t.Fatalf("new port %+v: want another port than %s, with one address, bound to node-a, of the pod", port, gone.ID)
	}
}

// checkTheAddressIsKeptOnlyIf: port has keep's MAC and IP exactly when wantSame.
func checkTheAddressIsKeptOnlyIf(t *testing.T, port openstack.Port, keep *Address, wantSame bool) {
	t.Helper()
	same := port.MACAddress == keep.MAC && port.FixedIPs[0].IPAddress == keep.IP
	if same != wantSame {
		t.Errorf("new port has MAC %s, IP %s; the gone port's were %s, %s; want the same: %v",
			port.MACAddress, port.FixedIPs[0].IPAddress, keep.MAC, keep.IP, wantSame)
	}
}

// checkThePodHasOnePort: Neutron has exactly one port of pod.
func checkThePodHasOnePort(t *testing.T, n *fake.Neutron, pod PodRef) {
	t.Helper()
	var mine int
	for _, p := range n.Ports {
		if p.DeviceID == pod.UID {
			mine++
		}
	}
	if mine != 1 {
		t.Errorf("the pod has %d ports in Neutron, want 1", mine)
	}
}
