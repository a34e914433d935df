package neutron

import (
	"context"
	"testing"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

var serverError = openstack.NewError("fake tag", openstack.KindServer, 500, "Internal Server Error")

// count counts n's objects of the cluster c1 by collection, tagged or not (description markers included).
func count(n *fake.Neutron) map[string]int {
	n.Lock()
	defer n.Unlock()
	return map[string]int{"networks": len(n.Nets) - 1, "subnets": len(n.Subnets), "subnetpools": len(n.Pools),
		"routers": len(n.Routers), "floatingips": len(n.FIPs)}
}

func TestAFailedTagCallLeavesNoDuplicate(t *testing.T) {
	ctx := context.Background()
	opts := config.Neutron{ExternalNetwork: "public", PodSubnetPoolCIDR: "10.244.0.0/16", PodSubnetPrefixLength: 24, ServiceSubnetCIDR: "10.0.0.0/24"}
	cases := []struct {
		name string
		// deleteFails also fails the delete that undoes the untagged object: the next attempt must adopt it.
		deleteFails string
		act         func(m *Manager) error
		want        map[string]int
	}{
		{name: "a namespace network whose tag call fails is deleted, and the retry makes one",
			act:  func(m *Manager) error { _, err := m.EnsureNamespace(ctx, "ns-uid", "ns"); return err },
			want: map[string]int{"networks": 2, "subnets": 2, "subnetpools": 1, "routers": 1}},
		{name: "a namespace network whose tag call fails and cannot be deleted is adopted by the retry",
			deleteFails: "DeleteNetwork",
			act:         func(m *Manager) error { _, err := m.EnsureNamespace(ctx, "ns-uid", "ns"); return err },
			want:        map[string]int{"networks": 2, "subnets": 2, "subnetpools": 1, "routers": 1}},
		{name: "a namespace subnet whose tag call fails and cannot be deleted is adopted, not one more prefix taken",
			deleteFails: "DeleteSubnet",
			act: func(m *Manager) error {
				nn, err := m.EnsureNamespace(ctx, "ns-uid", "ns")
				if err != nil || nn.Subnet == nil {
					return err
				}
				return nil
			},
			want: map[string]int{"networks": 2, "subnets": 2, "subnetpools": 1, "routers": 1}},
		{name: "a floating IP whose tag call fails and cannot be deleted is adopted, not created again on the same port",
			deleteFails: "DeleteFloatingIP",
			act: func(m *Manager) error {
				owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindService, UID: "svc-uid", Name: "ns/svc"}
				_, err := m.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: "public", PortID: "vip"}, owner.Tags())
				return err
			},
			want: map[string]int{"networks": 1, "subnets": 1, "subnetpools": 1, "routers": 1, "floatingips": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := fake.NewNeutron()
			m := setup(t, n)
			n.Fail("ReplaceTags", 1, serverError)
			if tc.deleteFails != "" {
				n.Fail(tc.deleteFails, 1, serverError)
			}
			if err := tc.act(m); err == nil {
				t.Fatal("the first attempt succeeded although its tag call failed")
			}
			for attempt := 0; attempt < 3; attempt++ {
				if err := tc.act(m); err != nil {
					t.Fatalf("attempt %d after the fault: %v", attempt+2, err)
				}
			}
			got := count(n)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
				}
			}
			checkAllTagged(t, n)
		})
	}
	t.Run("cluster objects whose tag calls fail are neither duplicated nor left untagged", func(t *testing.T) {
		for _, method := range []string{"DeleteSubnetPool", "DeleteRouter", "DeleteNetwork", "DeleteSubnet"} {
			clusterAfterFailedTagAndDelete(t, opts, method)
		}
	})
}

// checkAllTagged fails the test for each network (but the external one), subnet or floating IP in n
// without the cluster's tags.
func checkAllTagged(t *testing.T, n *fake.Neutron) {
	t.Helper()
	n.Lock()
	defer n.Unlock()
	for _, x := range n.Nets {
		if x.ID != "public" && !ownership.Owns("c1", x.Tags) {
			t.Errorf("network %s is left untagged", x.ID)
		}
	}
	for _, x := range n.Subnets {
		if !ownership.Owns("c1", x.Tags) {
			t.Errorf("subnet %s is left untagged", x.ID)
		}
	}
	for _, x := range n.FIPs {
		if !ownership.Owns("c1", x.Tags) {
			t.Errorf("floating IP %s is left untagged", x.ID)
		}
	}
}

// clusterAfterFailedTagAndDelete runs EnsureCluster with a failing tag call and a failing method until it
// succeeds, then once more, and checks that each cluster object exists once.
func clusterAfterFailedTagAndDelete(t *testing.T, opts config.Neutron, method string) {
	t.Helper()
	ctx := context.Background()
	n := fake.NewNeutron()
	n.Fail("ReplaceTags", 1, serverError)
	n.Fail(method, 1, serverError)
	var err error
	for attempt := 0; attempt < 6; attempt++ {
		if _, err = EnsureCluster(ctx, n, "c1", opts, true); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("%s: EnsureCluster never succeeded: %v", method, err)
	}
	if _, err := EnsureCluster(ctx, n, "c1", opts, true); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"networks": 1, "subnets": 1, "subnetpools": 1, "routers": 1}
	got := count(n)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s failing: %s: %d, want %d", method, k, got[k], v)
		}
	}
}

func TestAttachTellsAFaultFromAnInterfaceAlreadyThere(t *testing.T) {
	ctx := context.Background()
	badRequest := openstack.NewError("fake add interface", openstack.KindBadRequest, 400, "Bad router request: Cidr overlaps")
	n := fake.NewNeutron()
	m := setup(t, n)
	n.Fail("AddRouterInterface", 1, badRequest)
	if _, err := m.EnsureNamespace(ctx, "ns-uid", "ns"); err == nil {
		t.Fatal("a 400 for a subnet the router has no interface on was taken for success")
	}
	nn, err := m.EnsureNamespace(ctx, "ns-uid", "ns")
	if err != nil || !nn.Attached {
		t.Fatalf("the retry did not attach the subnet: %v", err)
	}
	// Now the router has the interface: a second attach answers 400 and that is success.
	x := m.X.Network("ns-uid")
	x.Attached = false
	m.X.SetNetwork(*x)
	if _, err := m.EnsureNamespace(ctx, "ns-uid", "ns"); err != nil {
		t.Fatalf("a 400 for an interface already there was taken for a fault: %v", err)
	}
}

// A cloud whose default security group rules hold no egress rule (an admin's choice since Neutron 2023.2): the
// pod group still lets pods reach anywhere, because it states its egress rules itself. Before, pods on such a
// cloud could reach nothing (the local 2025.1 stack, built without its defaults, showed it).
func TestPodGroupAllowsEgressWithoutNeutronDefaults(t *testing.T) {
	for _, noDefaults := range []bool{false, true} {
		n := fake.NewNeutron()
		n.NoDefaultEgress = noDefaults
		m := setup(t, n)
		g := n.SGs[m.C.PodSecurityGroups[0]]
		for _, et := range []string{"IPv4", "IPv6"} {
			want := openstack.SecurityGroupRule{SecurityGroupID: g.ID, Direction: "egress", EtherType: et}
			if !hasRule(g.Rules, want) {
				t.Errorf("default egress rules %v: the pod group lacks egress %s to anywhere: %+v", !noDefaults, et, g.Rules)
			}
		}
		egress := 0
		for _, r := range g.Rules {
			if r.Direction == "egress" {
				egress++
			}
		}
		if egress != 2 {
			t.Errorf("default egress rules %v: %d egress rules, want 2 (none doubled)", !noDefaults, egress)
		}
	}
}

func TestPodPortsGetTheClusterPodGroup(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	if len(m.C.PodSecurityGroups) != 1 {
		t.Fatalf("pod groups %v, want the one cluster pod group", m.C.PodSecurityGroups)
	}
	g := n.SGs[m.C.PodSecurityGroups[0]]
	// The pod subnets are admitted for the OVN provider's health checks, which come from each pod
	// network's network:distributed port; Neutron gives that port an address only on a DHCP subnet.
	for _, want := range PodGroupRules(g.ID, "10.0.0.0/24", []string{"10.244.0.0/16"}) {
		if !hasRule(g.Rules, want) {
			t.Errorf("the pod group lacks %+v", want)
		}
	}
	if !nn.Subnet.EnableDHCP || m.C.ServiceSubnet.EnableDHCP {
		t.Errorf("DHCP on the pod subnet %v, on the service subnet %v: want on, off (clusterIPs use every service address)",
			nn.Subnet.EnableDHCP, m.C.ServiceSubnet.EnableDHCP)
	}
	p, _, err := m.EnsurePort(ctx, PodRef{UID: "u1", Namespace: "ns", Name: "p", Node: "node-a"}, nn, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.SecurityGroups) != 1 || p.SecurityGroups[0] != g.ID {
		t.Fatalf("the pod port has groups %v, want the cluster pod group and not the project default", p.SecurityGroups)
	}
	// A rule someone removed comes back; nothing else is written.
	n.Lock()
	g.Rules = g.Rules[:len(g.Rules)-1]
	n.Unlock()
	writes := n.Wrote()
	if _, err := EnsureCluster(ctx, n, "c1", config.Neutron{ExternalNetwork: "public", PodSubnetPoolCIDR: "10.244.0.0/16",
		PodSubnetPrefixLength: 24, ServiceSubnetCIDR: "10.0.0.0/24"}, true); err != nil {
		t.Fatal(err)
	}
	if n.Wrote() != writes+1 {
		t.Fatalf("%d writes to restore one rule, want 1", n.Wrote()-writes)
	}
}

func TestAPortNeutronCreatedWithoutItsTagsIsTaggedOrDeleted(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name       string
		batcher    bool
		tagFails   bool
		wantTagged int
	}{
		{name: "a single create that lost its tags is tagged again", wantTagged: 1},
		{name: "a bulk create that lost its tags is tagged again", batcher: true, wantTagged: 1},
		{name: "a port that lost its tags and cannot be tagged is deleted, and the error returned", tagFails: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := fake.NewNeutron()
			m, nn := setupNamespace(t, n)
			if tc.batcher {
				m.B = &Batcher{N: n, Max: 10, InFlight: 1}
			}
			n.DropTags = 1
			if tc.tagFails {
				n.Fail("ReplaceTags", 1, serverError)
			}
			_, _, err := m.EnsurePort(ctx, PodRef{UID: "u1", Namespace: "ns", Name: "p", Node: "node-a"}, nn, "")
			if tc.tagFails != (err != nil) {
				t.Fatalf("EnsurePort error %v", err)
			}
			n.Lock()
			defer n.Unlock()
			tagged := 0
			for _, p := range n.Ports {
				if !ownership.Owns("c1", p.Tags) {
					t.Fatalf("port %s is left without tags: nobody's", p.ID)
				}
				tagged++
			}
			if tagged != tc.wantTagged {
				t.Fatalf("%d tagged ports, want %d", tagged, tc.wantTagged)
			}
		})
	}
}

func TestAdoptMarkedTagsOnlyThisClustersMarkedPorts(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	mine := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: "u1", Name: "ns/p"}
	other := ownership.Owner{Cluster: "c2", Kind: ownership.KindPod, UID: "u2", Name: "ns/q"}
	mk := func(descr string) string {
		n.DropTags = 1 // Neutron lost the tags of the request
		p, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: nn.Network.ID, DeviceOwner: DeviceOwner, Description: descr, Tags: mine.Tags()})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	lost, foreign, plain := mk(Marker(mine.Tags())), mk(Marker(other.Tags())), mk("a port someone made")
	got, err := m.AdoptMarked(ctx)
	if err != nil || got != 1 {
		t.Fatalf("AdoptMarked = %d, %v; want 1", got, err)
	}
	n.Lock()
	defer n.Unlock()
	if o, _ := ownership.Parse(n.Ports[lost].Tags); o != mine {
		t.Fatalf("the port that lost its tags has %v, want the pod's tags", n.Ports[lost].Tags)
	}
	if len(n.Ports[foreign].Tags) != 0 || len(n.Ports[plain].Tags) != 0 {
		t.Fatal("a port of another cluster, or without the marker, was tagged")
	}
}

func TestTagPortsOnCreateCanBeForced(t *testing.T) {
	for _, tc := range []struct {
		setting   string
		advertise bool
		want      bool
	}{
		{"auto", true, true}, {"auto", false, false}, {"", false, false}, {"true", false, true}, {"false", true, false},
	} {
		n := fake.NewNeutron()
		n.Caps.TagsOnPortCreate = tc.advertise
		c, err := EnsureCluster(context.Background(), n, "c1", config.Neutron{ExternalNetwork: "public", PodSubnetPoolCIDR: "10.244.0.0/16",
			PodSubnetPrefixLength: 24, TagPortsOnCreate: tc.setting}, false)
		if err != nil {
			t.Fatal(err)
		}
		if c.Caps.TagsOnPortCreate != tc.want {
			t.Errorf("tagPortsOnCreate %q with the extension listed %v: %v, want %v", tc.setting, tc.advertise, c.Caps.TagsOnPortCreate, tc.want)
		}
	}
}
