package neutron

import (
	"context"
	"strings"
	"testing"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// Raven's credentials may see every project of the cloud (an admin's, or the service role's): each listing
// names the cluster's tag, its networks or the objects it is about, never only a kind of object. (The
// lookups by marker of objects whose tags may be missing, in EnsureCluster and EnsureNamespace, are scoped
// by Raven's project: TestMarkedObjectsAreLookedUpInRavensProject.)
func TestListingsAreScopedToTheCluster(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(t *testing.T, n *fake.Neutron)
	}{
		{"ensuring the cluster with a configured subnet pool reads that pool alone", readsTheConfiguredPoolAlone},
		{"adopting the ports that lost their tags looks at the cluster's networks", adoptsOnTheClustersNetworks},
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

// readsTheConfiguredPoolAlone: with neutron.podSubnetPoolID set, the cluster reads that pool, not every pool.
func readsTheConfiguredPoolAlone(t *testing.T, n *fake.Neutron) {
	ctx := context.Background()
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
}

// adoptsOnTheClustersNetworks: the ports that lost their tags are looked for on the cluster's networks.
func adoptsOnTheClustersNetworks(t *testing.T, n *fake.Neutron) {
	ctx := context.Background()
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
}

// An object whose tag call failed is found again by the marker in its description. With credentials that see
// every project, another project's object with the same description (written by anyone who read the marker)
// must not be taken for Raven's: the marker lookups are scoped by the project of Raven's token.
func TestMarkedObjectsAreLookedUpInRavensProject(t *testing.T) {
	ctx := context.Background()
	clusterTags := ownership.Owner{Cluster: "c1", Kind: ownership.KindCluster}.Tags()
	svcTags := ownership.Owner{Cluster: "c1", Kind: ownership.KindCluster, Name: "services"}.Tags()
	nsTags := ownership.Owner{Cluster: "c1", Kind: ownership.KindNamespace, UID: "ns-uid", Name: "ns"}.Tags()
	fipTags := ownership.Owner{Cluster: "c1", Kind: ownership.KindService, UID: "svc-uid", Name: "ns/svc"}.Tags()
	cases := []struct {
		name string
		// plant puts another project's objects carrying Raven's markers into n; it returns their IDs.
		plant func(n *fake.Neutron) []string
		run   func(t *testing.T, n *fake.Neutron)
	}{
		{"ensuring the cluster leaves another project's pool, router and service network alone", func(n *fake.Neutron) []string {
			n.Pools["other-pool"] = &openstack.SubnetPool{ID: "other-pool", ProjectID: "p-other", Description: Marker(clusterTags), Prefixes: []string{"10.244.0.0/16"}}
			n.Routers["other-router"] = &openstack.Router{ID: "other-router", ProjectID: "p-other", Description: Marker(clusterTags)}
			n.Nets["other-net"] = &openstack.Network{ID: "other-net", ProjectID: "p-other", Description: Marker(svcTags)}
			return []string{"other-pool", "other-router", "other-net"}
		}, func(t *testing.T, n *fake.Neutron) {
			m := setup(t, n)
			if m.C.SubnetPoolID == "other-pool" || m.C.RouterID == "other-router" || m.C.ServiceNetworkID == "other-net" {
				t.Fatalf("the cluster took another project's objects: %+v", m.C)
			}
		}},
		{"ensuring a namespace leaves another project's network and subnet alone", func(n *fake.Neutron) []string {
			n.Nets["other-net"] = &openstack.Network{ID: "other-net", ProjectID: "p-other", Description: Marker(nsTags)}
			n.Subnets["other-sub"] = &openstack.Subnet{ID: "other-sub", NetworkID: "other-net", ProjectID: "p-other", Description: Marker(nsTags), CIDR: "10.244.9.0/24"}
			return []string{"other-net", "other-sub"}
		}, func(t *testing.T, n *fake.Neutron) {
			_, nn := setupNamespace(t, n)
			if nn.Network.ID == "other-net" || nn.Subnet.ID == "other-sub" {
				t.Fatalf("the namespace took another project's network or subnet: %+v", nn)
			}
		}},
		{"making a Service's floating IP leaves another project's floating IP alone", func(n *fake.Neutron) []string {
			n.FIPs["other-fip"] = &openstack.FloatingIP{ID: "other-fip", ProjectID: "p-other", FloatingNetworkID: "public", FloatingIP: "172.24.4.99", Description: Marker(fipTags)}
			return []string{"other-fip"}
		}, func(t *testing.T, n *fake.Neutron) {
			m := setup(t, n)
			fip, err := m.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: "public"}, fipTags)
			if err != nil {
				t.Fatal(err)
			}
			if fip.ID == "other-fip" {
				t.Fatal("the Service took another project's floating IP")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := fake.NewNeutron()
			n.Project = "p-raven"
			planted := tc.plant(n)
			tc.run(t, n)
			for _, id := range planted {
				if tags := tagsOf(n, id); len(tags) > 0 {
					t.Errorf("another project's object %s was tagged %v", id, tags)
				}
			}
			for _, l := range n.Unscoped("c1") {
				t.Errorf("%s by %+v (of %v) is not scoped to the cluster or Raven's project", l.Method, l.Filter, l.IDs)
			}
		})
	}
}

// tagsOf returns the tags of the object id of n, whatever its kind.
func tagsOf(n *fake.Neutron, id string) []string {
	n.Lock()
	defer n.Unlock()
	switch {
	case n.Nets[id] != nil:
		return n.Nets[id].Tags
	case n.Subnets[id] != nil:
		return n.Subnets[id].Tags
	case n.Pools[id] != nil:
		return n.Pools[id].Tags
	case n.Routers[id] != nil:
		return n.Routers[id].Tags
	case n.FIPs[id] != nil:
		return n.FIPs[id].Tags
	}
	return nil
}

// The external network is the operator's, given by ID or by name. By name it is looked for among the external
// networks only (which an admin makes and every project sees): a project's own network of that name is not
// it, and two external networks of that name are refused with both IDs.
func TestExternalNetworkByName(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		nets    []openstack.Network
		want    string
		wantErr []string
	}{
		{name: "a project's network of the external network's name is not taken for it",
			nets: []openstack.Network{{ID: "tenant-1", Name: "ext-net", ProjectID: "p-other"}, {ID: "ext-1", Name: "ext-net", External: true}},
			want: "ext-1"},
		{name: "two external networks of that name are refused, naming both",
			nets:    []openstack.Network{{ID: "ext-1", Name: "ext-net", External: true}, {ID: "ext-2", Name: "ext-net", External: true}},
			wantErr: []string{"ext-1", "ext-2", "externalNetwork"}},
		{name: "a name no external network has is refused",
			nets:    []openstack.Network{{ID: "tenant-1", Name: "ext-net", ProjectID: "p-other"}},
			wantErr: []string{"ext-net", "not found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := fake.NewNeutron()
			n.Project = "p-raven"
			for _, x := range tc.nets {
				n.Nets[x.ID] = &x
			}
			c, err := EnsureCluster(ctx, n, "c1", config.Neutron{ExternalNetwork: "ext-net", PodSubnetPoolCIDR: "10.244.0.0/16",
				PodSubnetPrefixLength: 24, ServiceSubnetCIDR: "10.0.0.0/24"}, true)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("EnsureCluster took external network %s, want an error", c.ExternalNetworkID)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
			} else if err != nil {
				t.Fatal(err)
			} else if c.ExternalNetworkID != tc.want {
				t.Fatalf("external network %s, want %s", c.ExternalNetworkID, tc.want)
			}
			for _, l := range n.Unscoped("c1") {
				t.Errorf("%s by %+v (of %v) is not scoped to the cluster or Raven's project", l.Method, l.Filter, l.IDs)
			}
		})
	}
}
