package uninstall

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// cluster makes, in the fakes, what Raven makes for cluster id: the cluster objects, a namespace network with
// a pod port, a floating IP, a policy group and a load balancer; it returns the namespace network's ID.
func cluster(t *testing.T, n *fake.Neutron, o *fake.Octavia, id string, cidr string) string {
	t.Helper()
	ctx := context.Background()
	c, err := neutron.EnsureCluster(ctx, n, id, config.Neutron{
		ExternalNetwork: "public", PodSubnetPoolCIDR: cidr, PodSubnetPrefixLength: 24, ServiceSubnetCIDR: "10.0.0.0/24",
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	m := &neutron.Manager{N: n, C: c, X: neutron.NewIndex()}
	nn, err := m.EnsureNamespace(ctx, id+"-ns-uid", "ns")
	if err != nil {
		t.Fatal(err)
	}
	port, err := n.CreatePort(ctx, openstack.PortSpec{Name: "ns/pod", NetworkID: nn.Network.ID, SubnetID: nn.Subnet.ID,
		Tags: ownership.Owner{Cluster: id, Kind: ownership.KindPod, UID: "pod-uid", Name: "ns/pod"}.Tags()})
	if err != nil {
		t.Fatal(err)
	}
	// A nested node's pod: its port is a subport of the node VM's trunk (the VM's port and trunk are not
	// Raven's), which Neutron will not delete until it is off the trunk.
	nested, err := n.CreatePort(ctx, openstack.PortSpec{Name: "ns/nested", NetworkID: nn.Network.ID, SubnetID: nn.Subnet.ID,
		Tags: ownership.Owner{Cluster: id, Kind: ownership.KindPod, UID: "nested-uid", Name: "ns/nested"}.Tags()})
	if err != nil {
		t.Fatal(err)
	}
	n.Ports["vm-"+id] = &openstack.Port{ID: "vm-" + id, FixedIPs: []openstack.FixedIP{{SubnetID: "workers-" + id, IPAddress: "192.168.0.11"}}}
	trunk := n.AddTrunk("vm-" + id)
	if err := n.AddSubports(ctx, trunk.ID, []openstack.Subport{{PortID: nested.ID, SegmentationType: "vlan", SegmentationID: 1}}); err != nil {
		t.Fatal(err)
	}
	svc := ownership.Owner{Cluster: id, Kind: ownership.KindService, UID: "svc-uid", Name: "ns/svc"}
	fip, err := n.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: c.ExternalNetworkID})
	if err != nil {
		t.Fatal(err)
	}
	sg, err := n.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "raven-" + id + "-policy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []struct {
		r    openstack.Resource
		id   string
		tags []string
	}{
		{openstack.ResourceFloatingIPs, fip.ID, svc.Tags()},
		{openstack.ResourceSecurityGroups, sg.ID, ownership.Owner{Cluster: id, Kind: ownership.KindPolicy, UID: "np-uid", Name: "ns/np"}.Tags()},
	} {
		if err := n.ReplaceTags(ctx, tag.r, tag.id, tag.tags); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: "ns/svc", VipSubnetID: c.ServiceSubnet.ID, VipAddress: "10.0.0.10",
		Provider: "ovn", Tags: svc.Tags(), Listeners: []openstack.ListenerGraph{{
			Listener: openstack.ListenerSpec{Protocol: "TCP", ProtocolPort: 80},
			Pool:     openstack.PoolSpec{Protocol: "TCP", LBAlgorithm: "SOURCE_IP_PORT"},
			Members:  []openstack.MemberSpec{{Address: port.FixedIPs[0].IPAddress, ProtocolPort: 80, SubnetID: nn.Subnet.ID}},
		}}}); err != nil {
		t.Fatal(err)
	}
	return nn.Network.ID
}

// count is how many objects of every kind carry the cluster's tag, and how many the router has interfaces.
func count(t *testing.T, n *fake.Neutron, o *fake.Octavia, id string) int {
	t.Helper()
	ctx := context.Background()
	sel := openstack.Filter{Tags: ownership.ClusterSelector(id)}
	lbs, _ := o.ListLoadBalancers(ctx, sel.Tags)
	fips, _ := n.ListFloatingIPs(ctx, sel)
	ports, _ := n.ListPorts(ctx, sel)
	sgs, _ := n.ListSecurityGroups(ctx, sel)
	subnets, _ := n.ListSubnets(ctx, sel)
	nets, _ := n.ListNetworks(ctx, sel)
	routers, _ := n.ListRouters(ctx, sel)
	pools, _ := n.ListSubnetPools(ctx, sel)
	return len(lbs) + len(fips) + len(ports) + len(sgs) + len(subnets) + len(nets) + len(routers) + len(pools)
}

func options(id string) Options {
	prov, _ := octavia.ProviderNamed("ovn")
	return Options{Cluster: id, Provider: prov, WorkerSubnetID: "workers-" + id, Timeout: 2 * time.Second, Poll: time.Millisecond}
}

// Every object of the cluster goes, those of another cluster stay; a dry run finds the same and removes
// nothing.
func TestUninstallRemovesTheClustersObjectsOnly(t *testing.T) {
	n, o := fake.NewNeutron(), fake.NewOctavia()
	cluster(t, n, o, "c1", "10.244.0.0/16")
	cluster(t, n, o, "c2", "10.245.0.0/16")
	before, other := count(t, n, o, "c1"), count(t, n, o, "c2")
	router := routerOf(t, n, "c1")

	dry := options("c1")
	dry.DryRun = true
	found, err := OpenStack(context.Background(), n, o, dry)
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, n, o, "c1"); got != before {
		t.Fatalf("a dry run left %d of the cluster's %d objects", got, before)
	}

	n.ForgetListings()
	o.ForgetListings()
	removed, err := OpenStack(context.Background(), n, o, options("c1"))
	if err != nil {
		t.Fatal(err)
	}
	// Every listing names the cluster's tag or what it is of (the node VMs' trunks by their ports on the
	// worker subnet): none reads every object of a kind in the cloud.
	for _, l := range append(n.Unscoped("c1"), o.Unscoped("c1")...) {
		t.Errorf("%s by %+v %v %v is not scoped to the cluster", l.Method, l.Filter, l.Tags, l.IDs)
	}
	if got := count(t, n, o, "c1"); got != 0 {
		t.Fatalf("%d of the cluster's objects are left (removed: %v)", got, removed)
	}
	if got := count(t, n, o, "c2"); got != other {
		t.Fatalf("the other cluster has %d objects left of %d", got, other)
	}
	if found.String() != removed.String() {
		t.Errorf("the dry run found %v, the removal removed %v", found, removed)
	}
	for _, kind := range []string{"loadbalancers", "floatingips", "ports", "securitygroups", "subnets", "networks", "routers", "subnetpools"} {
		if removed[kind] == 0 {
			t.Errorf("no %s removed: %v", kind, removed)
		}
	}
	t.Logf("removed %v", removed)
	checkRouterAndTrunks(t, n, router)
}

// checkRouterAndTrunks: the cluster's router has no interface left; the node VMs' ports stay, and the other
// cluster's nested pod port stays on its trunk.
func checkRouterAndTrunks(t *testing.T, n *fake.Neutron, router string) {
	t.Helper()
	if router == "" || len(n.Interfaces[router]) != 0 {
		t.Errorf("the cluster's router still has interfaces: %v", n.Interfaces)
	}
	for _, tr := range n.Trunks {
		if _, vm := n.Ports[tr.PortID]; !vm {
			t.Errorf("the node VM's port %s, not the cluster's, is gone", tr.PortID)
		}
		if tr.PortID == "vm-c2" && len(tr.Subports) != 1 {
			t.Errorf("the other cluster's nested pod port is off its trunk: %+v", tr.Subports)
		}
	}
}

// A port without the cluster's tag on the cluster's network is left where it is, and the error says what it
// holds up.
func TestUninstallLeavesForeignObjectsAndSaysWhatTheyHold(t *testing.T) {
	n, o := fake.NewNeutron(), fake.NewOctavia()
	network := cluster(t, n, o, "c1", "10.244.0.0/16")
	foreign, err := n.CreatePort(context.Background(), openstack.PortSpec{Name: "someone-elses", NetworkID: network})
	if err != nil {
		t.Fatal(err)
	}
	opts := options("c1")
	opts.Timeout = 100 * time.Millisecond
	_, err = OpenStack(context.Background(), n, o, opts)
	if err == nil || !strings.Contains(err.Error(), "networks") || !strings.Contains(err.Error(), network) {
		t.Fatalf("error %v, want one naming the network that stays", err)
	}
	if _, ok := n.Ports[foreign.ID]; !ok {
		t.Fatal("the port without the cluster's tag was deleted")
	}
}

func routerOf(t *testing.T, n *fake.Neutron, id string) string {
	t.Helper()
	for _, r := range n.Routers {
		if ownership.Owns(id, r.Tags) {
			return r.ID
		}
	}
	return ""
}
