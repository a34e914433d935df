package sim_test

import (
	"slices"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/sim"
)

// service is a load balancer made whole in one request, as Raven makes a Service's on a fully populating
// provider: two listeners, each with its pool and members.
func (e *env) service(t *testing.T, name string, tags ...string) *openstack.LoadBalancer {
	t.Helper()
	graph := []openstack.ListenerGraph{
		{Listener: openstack.ListenerSpec{Name: name + "-80", Protocol: "TCP", ProtocolPort: 80, Tags: tags},
			Pool:    openstack.PoolSpec{Name: name + "-80", Protocol: "TCP", LBAlgorithm: "SOURCE_IP_PORT", Tags: tags},
			Members: []openstack.MemberSpec{{Name: "a", Address: "10.1.0.2", ProtocolPort: 8080, SubnetID: "s"}, {Name: "b", Address: "10.1.0.3", ProtocolPort: 8080, SubnetID: "s"}}},
		{Listener: openstack.ListenerSpec{Name: name + "-53", Protocol: "UDP", ProtocolPort: 53, Tags: tags},
			Pool: openstack.PoolSpec{Name: name + "-53", Protocol: "UDP", LBAlgorithm: "SOURCE_IP_PORT", SourceIP: true, Tags: tags}},
	}
	lb := must(e.lb.CreateLoadBalancer(t.Context(), openstack.LoadBalancerSpec{Name: name, VipPortID: "vip-" + name, VipAddress: "10.0.0.10",
		Provider: "ovn", Listeners: graph, Tags: tags}))(t)
	return lb
}

func TestLoadBalancerGraph(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	tags := []string{"raven.cluster=c", "raven.kind=service"}
	lb := e.service(t, "web", tags...)
	expect(t, "created", []any{lb.ProvisioningStatus, lb.Provider, lb.Tags, lb.CreatedAt.IsZero()}, []any{"ACTIVE", "ovn", tags, false})
	got := must(e.lb.GetLoadBalancer(ctx, lb.ID))(t)
	expect(t, "got", []string{got.ID, got.VipAddress}, []string{lb.ID, "10.0.0.10"})
	e.service(t, "other", "raven.cluster=x")
	listed := must(e.lb.ListLoadBalancers(ctx, tags))(t)
	expect(t, "listed by tags", ids(listed, func(x openstack.LoadBalancer) string { return x.ID }), []string{lb.ID})
	ls := must(e.lb.ListListeners(ctx, lb.ID))(t)
	ps := must(e.lb.ListPools(ctx, lb.ID))(t)
	expect(t, "listeners and pools", []int{len(ls), len(ps)}, []int{2, 2})
	for _, p := range ps {
		l := ls[slices.IndexFunc(ls, func(l openstack.Listener) bool { return l.DefaultPoolID == p.ID })]
		expect(t, "the pool's listener and name", []string{p.ListenerID, p.Name}, []string{l.ID, l.Name})
	}
	expect(t, "listeners of all load balancers", len(must(e.lb.ListListeners(ctx, ""))(t)), 4)
	web80 := ps[slices.IndexFunc(ps, func(p openstack.Pool) bool { return p.Name == "web-80" })]
	ms := must(e.lb.ListMembers(ctx, web80.ID))(t)
	expect(t, "members", []any{len(ms), ms[0].SubnetID, ms[0].ProvisioningStatus}, []any{2, "s", "ACTIVE"})
	steps(t, func() error { return e.lb.DeleteLoadBalancer(ctx, lb.ID) })
	_, err := e.lb.GetLoadBalancer(ctx, lb.ID)
	wantKind(t, "a deleted load balancer", err, openstack.KindNotFound)
}

// webPool is the pool of the web load balancer's port 80.
func (e *env) webPool(t *testing.T) (*openstack.LoadBalancer, openstack.Pool) {
	t.Helper()
	lb := e.service(t, "web")
	pools := must(e.lb.ListPools(t.Context(), lb.ID))(t)
	return lb, pools[slices.IndexFunc(pools, func(p openstack.Pool) bool { return p.Name == "web-80" })]
}

func TestReplaceMembers(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	_, pool := e.webPool(t)
	want := []openstack.MemberSpec{{Name: "b", Address: "10.1.0.3", ProtocolPort: 8080, SubnetID: "s"}, {Name: "c", Address: "10.1.0.4", ProtocolPort: 8080, SubnetID: "s"}}
	before := must(e.lb.ListMembers(ctx, pool.ID))(t)
	steps(t, func() error { return e.lb.ReplaceMembers(ctx, pool.ID, want) })
	after := must(e.lb.ListMembers(ctx, pool.ID))(t)
	keep := before[slices.IndexFunc(before, func(m openstack.Member) bool { return m.Address == "10.1.0.3" })]
	expect(t, "members after the batch update", []string{after[0].ID, after[0].Name, after[1].Address, after[1].Name}, []string{keep.ID, "b", "10.1.0.4", "c"})
	expect(t, "members", len(after), 2)
	wantKind(t, "a member without a subnet on OVN", e.lb.ReplaceMembers(ctx, pool.ID, []openstack.MemberSpec{{Address: "10.1.0.9", ProtocolPort: 1}}),
		openstack.KindUnsupported)
}

func TestMembersAndStatusTree(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	lb, pool := e.webPool(t)
	steps(t, func() error {
		return e.lb.CreateMember(ctx, pool.ID, openstack.MemberSpec{Name: "d", Address: "10.1.0.5", ProtocolPort: 8080})
	},
		func() error {
			return e.lb.CreateMonitor(ctx, openstack.MonitorSpec{PoolID: pool.ID, Name: "web", Type: "TCP", Delay: 5, Timeout: 3, MaxRetries: 3})
		})
	wantKind(t, "a member twice", e.lb.CreateMember(ctx, pool.ID, openstack.MemberSpec{Address: "10.1.0.5", ProtocolPort: 8080}), openstack.KindConflict)
	tree := must(e.lb.LoadBalancerStatus(ctx, lb.ID))(t)
	ms := tree.Members[pool.ID]
	expect(t, "status tree members", []any{len(tree.Members), len(ms), ms[2].Address, ms[0].SubnetID}, []any{2, 3, "10.1.0.5", ""})
	hm := tree.Monitors[pool.ID]
	expect(t, "status tree monitor", []string{hm.Type, hm.ProvisioningStatus}, []string{"TCP", "ACTIVE"})
	steps(t, func() error { return e.lb.DeleteMember(ctx, pool.ID, ms[2].ID) })
	wantKind(t, "a member deleted twice", e.lb.DeleteMember(ctx, pool.ID, ms[2].ID), openstack.KindNotFound)
	steps(t, func() error { return e.lb.DeleteMonitor(ctx, hm.ID) })
	tree = must(e.lb.LoadBalancerStatus(ctx, lb.ID))(t)
	expect(t, "status tree after the deletes", []int{len(tree.Members[pool.ID]), len(tree.Monitors)}, []int{2, 0})
	_, err := e.lb.LoadBalancerStatus(ctx, "00000000-0000-4000-8000-000000000000")
	wantKind(t, "the tree of nothing", err, openstack.KindNotFound)
}

func TestListenersAndPoolsOneByOne(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	lb := must(e.lb.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: "bare", VipSubnetID: "s", VipAddress: "10.0.0.5", Provider: "ovn"}))(t)
	if lb.VipPortID == "" {
		t.Fatal("a load balancer on a subnet got no VIP port")
	}
	l := must(e.lb.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lb.ID, Name: "l", Protocol: "TCP", ProtocolPort: 443}))(t)
	for _, tc := range []struct {
		name string
		spec openstack.ListenerSpec
		kind openstack.Kind
	}{
		{"the same port", openstack.ListenerSpec{LoadBalancerID: lb.ID, Protocol: "TCP", ProtocolPort: 443}, openstack.KindConflict},
		{"a port out of range", openstack.ListenerSpec{LoadBalancerID: lb.ID, Protocol: "TCP", ProtocolPort: 70000}, openstack.KindBadRequest},
		{"no load balancer", openstack.ListenerSpec{LoadBalancerID: "00000000-0000-4000-8000-000000000000", Protocol: "TCP", ProtocolPort: 1}, openstack.KindNotFound},
	} {
		_, err := e.lb.CreateListener(ctx, tc.spec)
		wantKind(t, tc.name, err, tc.kind)
	}
	_, err := e.lb.CreatePool(ctx, openstack.PoolSpec{ListenerID: l.ID, Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN"})
	wantKind(t, "an algorithm OVN lacks", err, openstack.KindBadRequest)
	if !openstack.Rejected(err) {
		t.Fatalf("%v is not a refusal", err)
	}
	p := must(e.lb.CreatePool(ctx, openstack.PoolSpec{ListenerID: l.ID, Name: "p", Protocol: "TCP", LBAlgorithm: "SOURCE_IP_PORT", SourceIP: true}))(t)
	if p.ListenerID != l.ID || p.SessionPersistence == nil || p.SessionPersistence.Type != "SOURCE_IP" {
		t.Fatalf("pool %+v", p)
	}
	if err := e.lb.DeletePool(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.lb.DeleteListener(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	if ls := must(e.lb.ListListeners(ctx, lb.ID))(t); len(ls) != 0 {
		t.Fatalf("listeners left: %+v", ls)
	}
	wantKind(t, "a listener deleted twice", e.lb.DeleteListener(ctx, l.ID), openstack.KindNotFound)
	wantKind(t, "a monitor of nothing", e.lb.DeleteMonitor(ctx, "00000000-0000-4000-8000-000000000000"), openstack.KindNotFound)
}
