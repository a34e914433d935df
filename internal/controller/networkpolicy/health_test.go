package networkpolicy

import (
	"context"
	"slices"
	"testing"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// The OVN provider's health checks come from the network:distributed ports of the cluster's pod networks:
// those are listed by the cluster's networks, not every distributed port of the cloud.
func TestHealthSourcesListTheClustersNetworksOnly(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	x := neutron.NewIndex()
	var mine string
	for _, name := range []string{"mine", "another-project"} {
		net, err := n.CreateNetwork(ctx, openstack.NetworkSpec{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		sub, err := n.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: net.ID, CIDR: map[string]string{"mine": "10.244.1.0/24", "another-project": "10.9.0.0/24"}[name]})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: net.ID, SubnetID: sub.ID, DeviceOwner: "network:distributed"}); err != nil {
			t.Fatal(err)
		}
		if name == "mine" {
			mine = net.ID
			tags := ownership.Owner{Cluster: "c1", Kind: ownership.KindNamespace, UID: "ns-uid", Name: "ns"}.Tags()
			if err := n.ReplaceTags(ctx, openstack.ResourceNetworks, net.ID, tags); err != nil {
				t.Fatal(err)
			}
			net.Tags = tags
			x.SetNetwork(neutron.NamespaceNet{NamespaceUID: "ns-uid", Namespace: "ns", Network: *net, Subnet: sub})
		}
	}
	r := &Reconciler{Neutron: &neutron.Manager{N: n, C: &neutron.Cluster{ID: "c1"}, X: x}}
	got, err := r.healthSources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range n.Ports {
		if p.NetworkID == mine {
			want = append(want, p.FixedIPs[0].IPAddress)
		}
	}
	if !slices.Equal(got, want) || len(want) != 1 {
		t.Fatalf("health sources %v, want %v (the cluster's network's distributed port)", got, want)
	}
	for _, l := range n.Unscoped("c1") {
		t.Errorf("%s by %+v is not scoped to the cluster", l.Method, l.Filter)
	}
}
