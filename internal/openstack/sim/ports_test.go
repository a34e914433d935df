package sim_test

import (
	"slices"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/sim"
)

func TestPortCreateGetUpdateDelete(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	net, sub := e.namespace(t, "ns", "10.1.0.0/24")
	sg := must(e.net.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "pods"}))(t)
	p := must(e.net.CreatePort(ctx, openstack.PortSpec{NetworkID: net.ID, SubnetID: sub.ID, IPAddress: "10.1.0.50", Name: "a",
		DeviceOwner: "compute:kuryr", DeviceID: "pod-a", Tags: []string{"raven.kind=pod"}, HostID: "node-1",
		MACAddress: "fa:16:3e:aa:bb:cc", SecurityGroups: []string{sg.ID}}))(t)
	expect(t, "created", []any{p.FixedIPs, p.MACAddress, p.Tags, p.HostID, p.VIFType, p.SecurityGroups},
		[]any{[]openstack.FixedIP{{SubnetID: sub.ID, IPAddress: "10.1.0.50"}}, "fa:16:3e:aa:bb:cc", []string{"raven.kind=pod"}, "node-1", "ovs", []string{sg.ID}})
	for _, tc := range []struct {
		name string
		spec openstack.PortSpec
		kind openstack.Kind
	}{
		{"the same address", openstack.PortSpec{NetworkID: net.ID, IPAddress: "10.1.0.50"}, openstack.KindConflict},
		{"the same MAC", openstack.PortSpec{NetworkID: net.ID, MACAddress: "fa:16:3e:aa:bb:cc"}, openstack.KindConflict},
		{"an address off the network", openstack.PortSpec{NetworkID: net.ID, IPAddress: "10.9.0.5"}, openstack.KindBadRequest},
		{"a network that does not exist", openstack.PortSpec{NetworkID: "00000000-0000-4000-8000-000000000000"}, openstack.KindNotFound},
		{"no network", openstack.PortSpec{Name: "x"}, openstack.KindBadRequest},
	} {
		_, err := e.net.CreatePort(ctx, tc.spec)
		wantKind(t, tc.name, err, tc.kind)
	}
	name, device, host, groups := "b", "pod-b", "", []string{}
	u := must(e.net.UpdatePort(ctx, p.ID, openstack.PortUpdate{Name: &name, DeviceID: &device, HostID: &host, SecurityGroups: &groups}))(t)
	got := must(e.net.GetPort(ctx, p.ID))(t)
	for _, x := range []*openstack.Port{u, got} {
		expect(t, "updated", []any{x.Name, x.DeviceID, x.HostID, x.VIFType, x.SecurityGroups, x.UpdatedAt.IsZero()},
			[]any{"b", "pod-b", "", "unbound", []string{}, false})
	}
	if found := must(e.net.ListPorts(ctx, openstack.Filter{DeviceID: "pod-a"}))(t); len(found) != 0 {
		t.Fatalf("the port is still listed by its old device: %+v", found)
	}
	if err := e.net.DeletePort(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	_, err := e.net.GetPort(ctx, p.ID)
	wantKind(t, "deleted port", err, openstack.KindNotFound)
	wantKind(t, "deleted twice", e.net.DeletePort(ctx, p.ID), openstack.KindNotFound)
}

func TestBulkCreateIsAllOrNone(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	net, _ := e.namespace(t, "ns", "10.1.0.0/24")
	tags := []string{"raven.cluster=c", "raven.kind=pool"}
	made := e.ports(t, net.ID, 3, tags...)
	for i, p := range made {
		if !slices.Equal(p.Tags, tags) || p.FixedIPs[0].IPAddress != []string{"10.1.0.2", "10.1.0.3", "10.1.0.4"}[i] {
			t.Fatalf("port %d: %+v, want the tags and the lowest free addresses", i, p)
		}
	}
	_, err := e.net.CreatePorts(ctx, []openstack.PortSpec{{NetworkID: net.ID}, {NetworkID: net.ID, IPAddress: "10.1.0.3"}})
	wantKind(t, "a bulk with a taken address", err, openstack.KindConflict)
	if all := must(e.net.ListPorts(ctx, openstack.Filter{NetworkID: net.ID}))(t); len(all) != 3 {
		t.Fatalf("%d ports after the failed bulk, want 3", len(all))
	}
	if err := e.net.DeleteNetwork(ctx, net.ID); openstack.KindOf(err) != openstack.KindConflict {
		t.Fatalf("network delete with ports: %v, want a conflict", err)
	}
}

func TestAddressesRunOut(t *testing.T) {
	e := start(t, sim.Model{})
	net, _ := e.namespace(t, "small", "10.2.0.0/29") // .2 to .6
	e.ports(t, net.ID, 5)
	_, err := e.net.CreatePort(t.Context(), openstack.PortSpec{NetworkID: net.ID})
	wantKind(t, "a port on a full subnet", err, openstack.KindExhausted)
}

func TestPortFilters(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	a, subA := e.namespace(t, "a", "10.1.0.0/24")
	b, _ := e.namespace(t, "b", "10.2.0.0/24")
	pod := must(e.net.CreatePort(ctx, openstack.PortSpec{NetworkID: a.ID, Name: "pod", Description: "d", DeviceOwner: "compute:kuryr",
		DeviceID: "uid-1", Tags: []string{"raven.cluster=c", "raven.kind=pod", "raven.uid=uid-1"}}))(t)
	pool := must(e.net.CreatePort(ctx, openstack.PortSpec{NetworkID: a.ID, DeviceOwner: "compute:kuryr", Tags: []string{"raven.cluster=c", "raven.kind=pool"}}))(t)
	other := must(e.net.CreatePort(ctx, openstack.PortSpec{NetworkID: b.ID, DeviceOwner: "network:distributed"}))(t)
	for _, tc := range []struct {
		name string
		f    openstack.Filter
		want []string
	}{
		{"all", openstack.Filter{}, []string{pod.ID, pool.ID, other.ID}},
		{"network", openstack.Filter{NetworkID: a.ID}, []string{pod.ID, pool.ID}},
		{"device", openstack.Filter{DeviceID: "uid-1"}, []string{pod.ID}},
		{"device and network", openstack.Filter{DeviceID: "uid-1", NetworkID: b.ID}, nil},
		{"owner", openstack.Filter{DeviceOwner: "network:distributed"}, []string{other.ID}},
		{"name", openstack.Filter{Name: "pod"}, []string{pod.ID}},
		{"description", openstack.Filter{Description: "d"}, []string{pod.ID}},
		{"tags", openstack.Filter{Tags: []string{"raven.cluster=c", "raven.uid=uid-1"}}, []string{pod.ID}},
		{"a tag nobody has", openstack.Filter{Tags: []string{"raven.cluster=x"}}, nil},
		{"not-tags-any", openstack.Filter{DeviceOwner: "compute:kuryr", NotTagsAny: []string{"raven.kind=pod"}}, []string{pool.ID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ids(must(e.net.ListPorts(ctx, tc.f))(t), portID)
			if want := ids(tc.want, func(s string) string { return s }); !slices.Equal(got, want) {
				t.Fatalf("listed %v, want %v", got, want)
			}
		})
	}
	t.Run("address", func(t *testing.T) {
		got := must(e.net.PortsWithAddress(ctx, subA.ID, pod.FixedIPs[0].IPAddress))(t)
		if len(got) != 1 || got[0].ID != pod.ID {
			t.Fatalf("ports with %s: %+v, want the pod's", pod.FixedIPs[0].IPAddress, got)
		}
		if got := must(e.net.PortsWithAddress(ctx, "00000000-0000-4000-8000-000000000000", pod.FixedIPs[0].IPAddress))(t); len(got) != 0 {
			t.Fatalf("the address on another subnet: %+v", got)
		}
	})
}

func TestReplaceTags(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	net, sub := e.namespace(t, "ns", "10.1.0.0/24")
	port := e.ports(t, net.ID, 1)[0]
	pool := must(e.net.CreateSubnetPool(ctx, openstack.SubnetPoolSpec{Prefixes: []string{"10.128.0.0/16"}, PrefixLength: 24}))(t)
	router := must(e.net.CreateRouter(ctx, openstack.RouterSpec{Name: "r"}))(t)
	fip := must(e.net.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: e.ext.ID}))(t)
	sg := must(e.net.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "g"}))(t)
	tags := []string{"raven.cluster=c", "raven.kind=namespace"}
	f := openstack.Filter{Tags: tags}
	for _, tc := range []struct {
		r    openstack.Resource
		id   string
		list func() (int, error)
	}{
		{openstack.ResourceNetworks, net.ID, func() (int, error) { x, err := e.net.ListNetworks(ctx, f); return len(x), err }},
		{openstack.ResourceSubnets, sub.ID, func() (int, error) { x, err := e.net.ListSubnets(ctx, f); return len(x), err }},
		{openstack.ResourcePorts, port.ID, func() (int, error) { x, err := e.net.ListPorts(ctx, f); return len(x), err }},
		{openstack.ResourceSubnetPools, pool.ID, func() (int, error) { x, err := e.net.ListSubnetPools(ctx, f); return len(x), err }},
		{openstack.ResourceRouters, router.ID, func() (int, error) { x, err := e.net.ListRouters(ctx, f); return len(x), err }},
		{openstack.ResourceFloatingIPs, fip.ID, func() (int, error) { x, err := e.net.ListFloatingIPs(ctx, f); return len(x), err }},
		{openstack.ResourceSecurityGroups, sg.ID, func() (int, error) { x, err := e.net.ListSecurityGroups(ctx, f); return len(x), err }},
	} {
		t.Run(string(tc.r), func(t *testing.T) {
			if n := must(tc.list())(t); n != 0 {
				t.Fatalf("%d listed by the tags before they are set", n)
			}
			if err := e.net.ReplaceTags(ctx, tc.r, tc.id, tags); err != nil {
				t.Fatal(err)
			}
			if n := must(tc.list())(t); n != 1 {
				t.Fatalf("%d listed by the tags, want 1", n)
			}
			wantKind(t, "tags of nothing", e.net.ReplaceTags(ctx, tc.r, "00000000-0000-4000-8000-000000000000", tags), openstack.KindNotFound)
		})
	}
}

func TestTrunks(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	net, _ := e.namespace(t, "workers", "192.168.0.0/24")
	ps := e.ports(t, net.ID, 4)
	vm, subs := ps[0], ps[1:]
	trunk := e.trunk(t, vm.ID)
	if got := must(e.net.ListTrunks(ctx, vm.ID))(t); len(got) != 1 || got[0].ID != trunk {
		t.Fatalf("trunks of the VM port: %+v", got)
	}
	if got := must(e.net.ListTrunks(ctx, subs[0].ID))(t); len(got) != 0 {
		t.Fatalf("trunks of another port: %+v", got)
	}
	add := []openstack.Subport{{PortID: subs[0].ID, SegmentationType: "vlan", SegmentationID: 10}, {PortID: subs[1].ID, SegmentationType: "vlan", SegmentationID: 11}}
	if err := e.net.AddSubports(ctx, trunk, add); err != nil {
		t.Fatal(err)
	}
	if p := must(e.net.GetPort(ctx, subs[0].ID))(t); p.DeviceOwner != openstack.SubportOwner {
		t.Fatalf("a subport's owner %q", p.DeviceOwner)
	}
	for _, tc := range []struct {
		name string
		subs []openstack.Subport
		kind openstack.Kind
	}{
		{"a segmentation ID in use", []openstack.Subport{{PortID: subs[2].ID, SegmentationType: "vlan", SegmentationID: 10}}, openstack.KindConflict},
		{"a port that is a subport", []openstack.Subport{{PortID: subs[0].ID, SegmentationType: "vlan", SegmentationID: 12}}, openstack.KindConflict},
		{"a VLAN out of range", []openstack.Subport{{PortID: subs[2].ID, SegmentationType: "vlan", SegmentationID: 5000}}, openstack.KindBadRequest},
		{"not vlan", []openstack.Subport{{PortID: subs[2].ID, SegmentationType: "inherit", SegmentationID: 12}}, openstack.KindBadRequest},
	} {
		wantKind(t, tc.name, e.net.AddSubports(ctx, trunk, tc.subs), tc.kind)
	}
	wantKind(t, "delete of a subport", e.net.DeletePort(ctx, subs[0].ID), openstack.KindConflict)
	if err := e.net.RemoveSubports(ctx, trunk, []string{subs[0].ID}); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "remove twice", e.net.RemoveSubports(ctx, trunk, []string{subs[0].ID}), openstack.KindNotFound)
	got := must(e.net.GetTrunk(ctx, trunk))(t)
	if len(got.Subports) != 1 || got.Subports[0].PortID != subs[1].ID || got.PortID != vm.ID {
		t.Fatalf("trunk %+v, want only %s carried", got, subs[1].ID)
	}
	if p := must(e.net.GetPort(ctx, subs[0].ID))(t); p.DeviceOwner != "" {
		t.Fatalf("a removed subport's owner %q", p.DeviceOwner)
	}
	if err := e.net.DeletePort(ctx, subs[0].ID); err != nil {
		t.Fatal(err)
	}
}

// trunk makes a trunk on the port, as Nova's VLAN-aware VM has, over HTTP.
func (e *env) trunk(t *testing.T, port string) string {
	t.Helper()
	status, body := raw(t, "POST", e.neutronURL+"/v2.0/trunks", `{"trunk": {"port_id": "`+port+`", "name": "vm"}}`)
	if status != 201 {
		t.Fatalf("trunk create: %d %v", status, body)
	}
	if status, _ := raw(t, "POST", e.neutronURL+"/v2.0/trunks", `{"trunk": {"port_id": "`+port+`"}}`); status != 409 {
		t.Fatalf("a second trunk on the port: %d, want 409", status)
	}
	return body["trunk"].(map[string]any)["id"].(string)
}

func TestFloatingIPs(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	net, _ := e.namespace(t, "svc", "10.0.0.0/24")
	vip := e.ports(t, net.ID, 1)[0]
	f := must(e.net.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: e.ext.ID, PortID: vip.ID, Description: "svc/a"}))(t)
	if f.FloatingIP != "172.24.4.2" || f.PortID != vip.ID || f.FixedIP != vip.FixedIPs[0].IPAddress || f.Status != "ACTIVE" {
		t.Fatalf("floating IP %+v", f)
	}
	for _, tc := range []struct {
		name string
		spec openstack.FloatingIPSpec
		kind openstack.Kind
	}{
		{"a port that has one", openstack.FloatingIPSpec{FloatingNetworkID: e.ext.ID, PortID: vip.ID}, openstack.KindConflict},
		{"an address in use", openstack.FloatingIPSpec{FloatingNetworkID: e.ext.ID, FloatingIP: "172.24.4.2"}, openstack.KindConflict},
		{"an address off the network", openstack.FloatingIPSpec{FloatingNetworkID: e.ext.ID, FloatingIP: "10.9.9.9"}, openstack.KindBadRequest},
		{"no such network", openstack.FloatingIPSpec{FloatingNetworkID: net.ID + "x"}, openstack.KindNotFound},
	} {
		_, err := e.net.CreateFloatingIP(ctx, tc.spec)
		wantKind(t, tc.name, err, tc.kind)
	}
	asked := must(e.net.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: e.ext.ID, FloatingIP: "172.24.4.200"}))(t)
	if asked.FloatingIP != "172.24.4.200" || asked.Status != "DOWN" {
		t.Fatalf("floating IP asked for: %+v", asked)
	}
	if got := must(e.net.ListFloatingIPs(ctx, openstack.Filter{Description: "svc/a"}))(t); len(got) != 1 || got[0].ID != f.ID {
		t.Fatalf("listed by description: %+v", got)
	}
	moved := must(e.net.UpdateFloatingIPPort(ctx, f.ID, ""))(t)
	if moved.PortID != "" || moved.FixedIP != "" {
		t.Fatalf("disassociated: %+v", moved)
	}
	if err := e.net.DeleteFloatingIP(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	again := must(e.net.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: e.ext.ID}))(t)
	if again.FloatingIP != "172.24.4.2" {
		t.Fatalf("the freed address is not handed out again: %+v", again)
	}
}

func TestSecurityGroups(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	g := must(e.net.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "policy", Description: "ns/p"}))(t)
	if len(g.Rules) != 2 || g.Rules[0].Direction != "egress" {
		t.Fatalf("a new group's rules: %+v, want Neutron's two egress rules", g.Rules)
	}
	if err := e.net.UpdateSecurityGroup(ctx, g.ID, openstack.SecurityGroupSpec{Name: "renamed", Description: ""}); err != nil {
		t.Fatal(err)
	}
	rule := openstack.SecurityGroupRule{SecurityGroupID: g.ID, Direction: "ingress", EtherType: "IPv4", Protocol: "tcp", PortRangeMin: 80, PortRangeMax: 80, RemoteIPPrefix: "10.0.0.0/8"}
	one := must(e.net.CreateSecurityGroupRule(ctx, rule))(t)
	_, err := e.net.CreateSecurityGroupRule(ctx, rule)
	wantKind(t, "the same rule again", err, openstack.KindConflict)
	bulk := []openstack.SecurityGroupRule{
		{SecurityGroupID: g.ID, Direction: "ingress", EtherType: "IPv4", Protocol: "udp", PortRangeMin: 53, PortRangeMax: 53},
		{SecurityGroupID: g.ID, Direction: "ingress", EtherType: "IPv4", RemoteGroupID: g.ID},
	}
	made := must(e.net.CreateSecurityGroupRules(ctx, bulk))(t)
	_, err = e.net.CreateSecurityGroupRules(ctx, []openstack.SecurityGroupRule{{SecurityGroupID: g.ID, Direction: "sideways", EtherType: "IPv4"}})
	wantKind(t, "a bad direction", err, openstack.KindBadRequest)
	if len(made) != 2 || made[0].ID == "" || made[1].RemoteGroupID != g.ID {
		t.Fatalf("bulk made %+v", made)
	}
	if err := e.net.DeleteSecurityGroupRule(ctx, one.ID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "a rule deleted twice", e.net.DeleteSecurityGroupRule(ctx, one.ID), openstack.KindNotFound)
	got := must(e.net.ListSecurityGroups(ctx, openstack.Filter{Name: "renamed"}))(t)
	if len(got) != 1 || got[0].Description != "" || len(got[0].Rules) != 4 {
		t.Fatalf("listed %+v, want the renamed group with 4 rules", got)
	}
	net, _ := e.namespace(t, "ns", "10.1.0.0/24")
	p := must(e.net.CreatePort(ctx, openstack.PortSpec{NetworkID: net.ID, SecurityGroups: []string{g.ID}}))(t)
	wantKind(t, "delete of a group in use", e.net.DeleteSecurityGroup(ctx, g.ID), openstack.KindConflict)
	if err := e.net.DeletePort(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.net.DeleteSecurityGroup(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
}
