package neutron

import (
	"context"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// Raven's credentials may see every project of the cloud (an admin's, or the service role's): each listing
// names the cluster's tag, its networks or the objects it is about, never only a kind of object. (The
// lookups by name or by marker of objects whose tags may be missing, in EnsureCluster and EnsureNamespace,
// are not scoped yet: setups forget their listings.)
func TestListingsAreScopedToTheCluster(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(t *testing.T, n *fake.Neutron)
	}{
		{"ensuring the cluster with a configured subnet pool reads that pool alone", func(t *testing.T, n *fake.Neutron) {
			for _, p := range []string{"10.50.0.0/16", "10.60.0.0/16"} { // another project's pool first
				if _, err := n.CreateSubnetPool(ctx, openstack.SubnetPoolSpec{Name: p, Prefixes: []string{p}, PrefixLength: 24}); err != nil {
					t.Fatal(err)
				}
			}
			var mine string
			for id, p := range n.Pools {
				if p.Name == "10.60.0.0/16" {
					mine = id
				}
			}
			c := &Cluster{ID: "c1", SubnetPoolID: mine}
			err := c.readPoolPrefixes(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.PodPrefixes) != 1 || c.PodPrefixes[0] != "10.60.0.0/16" {
				t.Fatalf("pod prefixes %v, want the configured pool's", c.PodPrefixes)
			}
		}},
		{"adopting the ports that lost their tags looks at the cluster's networks", func(t *testing.T, n *fake.Neutron) {
			m, nn := setupNamespace(t, n)
			n.ForgetListings()
			owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: "u1", Name: "ns/p"}
			n.DropTags = 1
			p, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: nn.Network.ID, DeviceOwner: DeviceOwner,
				Description: Marker(owner.Tags()), Tags: owner.Tags()})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := m.AdoptMarked(ctx); err != nil || got != 1 {
				t.Fatalf("AdoptMarked = %d, %v; want the port tagged", got, err)
			}
			if !ownership.Owns("c1", n.Ports[p.ID].Tags) {
				t.Fatalf("the port has tags %v, want the pod's", n.Ports[p.ID].Tags)
			}
		}},
		{"taking a port off a trunk this Raven did not attach it to looks at the node VMs' trunks", func(t *testing.T, n *fake.Neutron) {
			vm := &openstack.Port{ID: "vmport", NetworkID: "workers-net", FixedIPs: []openstack.FixedIP{{SubnetID: "workers", IPAddress: "192.168.0.11"}}}
			n.Ports[vm.ID] = vm
			trunk := n.AddTrunk(vm.ID)
			p := subportCandidate(t, n, "a")
			if err := n.AddSubports(ctx, trunk.ID, []openstack.Subport{{PortID: p, SegmentationType: "vlan", SegmentationID: 3}}); err != nil {
				t.Fatal(err)
			}
			if err := (&Trunks{N: n, WorkerSubnetID: "workers"}).Detach(ctx, p); err != nil {
				t.Fatal(err)
			}
			if len(n.Trunks[trunk.ID].Subports) != 0 {
				t.Fatalf("the port is still on the trunk: %+v", n.Trunks[trunk.ID].Subports)
			}
		}},
		{"listing the cluster's objects", func(t *testing.T, n *fake.Neutron) {
			m, nn := setupNamespace(t, n)
			if _, _, err := m.EnsurePort(ctx, PodRef{UID: "u1", Namespace: "ns", Name: "p", Node: "node-a"}, nn, ""); err != nil {
				t.Fatal(err)
			}
			n.ForgetListings()
			snap, err := List(ctx, n, m.C)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Networks) != 1 {
				t.Fatalf("%d namespace networks listed, want 1", len(snap.Networks))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := fake.NewNeutron()
			tc.run(t, n)
			for _, l := range n.Unscoped("c1") {
				t.Errorf("%s by %+v (of %v) is not scoped to the cluster", l.Method, l.Filter, l.IDs)
			}
		})
	}
}
