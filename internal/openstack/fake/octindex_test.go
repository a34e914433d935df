package fake_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// octTwins are an unindexed and an indexed Octavia given the same calls.
type octTwins [2]*fake.Octavia

func same[T any](t *testing.T, o octTwins, call func(*fake.Octavia) (T, error)) T {
	t.Helper()
	a, errA := call(o[0])
	b, errB := call(o[1])
	if !reflect.DeepEqual(a, b) || fmt.Sprint(errA) != fmt.Sprint(errB) {
		t.Fatalf("unindexed: %+v, %v\nindexed: %+v, %v", a, errA, b, errB)
	}
	return b
}

func TestIndexedOctaviaAnswersAsUnindexed(t *testing.T) {
	ctx := context.Background()
	o := octTwins{fake.NewOctavia(), fake.NewOctavia()}
	for _, x := range o {
		x.UUIDs, x.Now = true, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	}
	o[1].Index()
	var lbs []*openstack.LoadBalancer
	for i := range 5 {
		lbs = append(lbs, same(t, o, func(x *fake.Octavia) (*openstack.LoadBalancer, error) {
			return x.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: fmt.Sprint("lb", i), VipPortID: "vip", Tags: []string{fmt.Sprint("t", i%2)},
				Listeners: []openstack.ListenerGraph{{Listener: openstack.ListenerSpec{Protocol: "TCP", ProtocolPort: 80},
					Pool: openstack.PoolSpec{Name: "p", Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN"}, Members: []openstack.MemberSpec{{Address: "10.0.0.1", ProtocolPort: 80}}}}})
		}))
	}
	l := same(t, o, func(x *fake.Octavia) (*openstack.Listener, error) {
		return x.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lbs[1].ID, Protocol: "UDP", ProtocolPort: 53})
	})
	p := same(t, o, func(x *fake.Octavia) (*openstack.Pool, error) {
		return x.CreatePool(ctx, openstack.PoolSpec{ListenerID: l.ID, Protocol: "UDP", LBAlgorithm: "ROUND_ROBIN"})
	})
	calls := []func(*fake.Octavia) error{
		func(x *fake.Octavia) error {
			return x.CreateMonitor(ctx, openstack.MonitorSpec{PoolID: p.ID, Type: "UDP-CONNECT", Delay: 5, Timeout: 3, MaxRetries: 3})
		},
		func(x *fake.Octavia) error {
			return x.CreateMember(ctx, p.ID, openstack.MemberSpec{Address: "10.0.0.2", ProtocolPort: 53})
		},
		func(x *fake.Octavia) error { return x.DeleteLoadBalancer(ctx, lbs[2].ID) },
		func(x *fake.Octavia) error { return x.DeleteListener(ctx, l.ID) },
	}
	for _, call := range calls {
		same(t, o, func(x *fake.Octavia) (struct{}, error) { return struct{}{}, call(x) })
	}
	owner, _ := o[1].Owner(p.ID)
	st, _ := o[1].LoadBalancer(owner)
	hm := st.Monitors[p.ID].ID
	for _, call := range []func(*fake.Octavia) error{
		func(x *fake.Octavia) error { return x.DeleteMonitor(ctx, hm) },
		func(x *fake.Octavia) error { return x.DeleteMonitor(ctx, hm) },
		func(x *fake.Octavia) error { return x.DeletePool(ctx, p.ID) },
		func(x *fake.Octavia) error {
			return x.CreateMember(ctx, p.ID, openstack.MemberSpec{Address: "10.0.0.3", ProtocolPort: 53})
		},
	} {
		same(t, o, func(x *fake.Octavia) (struct{}, error) { return struct{}{}, call(x) })
	}
	if owner != lbs[1].ID {
		t.Fatalf("the pool's load balancer %s, want %s", owner, lbs[1].ID)
	}
	same(t, o, func(x *fake.Octavia) ([]fake.LoadBalancerState, error) { return x.LoadBalancers(), nil })
	same(t, o, func(x *fake.Octavia) (fake.OctaviaCounts, error) { return x.Count(), nil })
	for _, q := range []fake.Query{{}, {Limit: 2}, {Limit: 2, Marker: lbs[1].ID}, {Filter: openstack.Filter{Tags: []string{"t1"}}, Limit: 1}} {
		page := same(t, o, func(x *fake.Octavia) (fake.Page[fake.LoadBalancerState], error) { return x.LoadBalancersPage(q) })
		if q.Limit == 2 && q.Marker == "" && (len(page.Items) != 2 || !page.More) {
			t.Fatalf("first page of 2: %d, more %v", len(page.Items), page.More)
		}
	}
}

func TestIndexedOctaviaCountsPendingChanges(t *testing.T) {
	ctx := context.Background()
	o := octTwins{fake.NewOctavia(), fake.NewOctavia()}
	for _, x := range o {
		x.UUIDs, x.PendingReads, x.Now = true, 1, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	}
	o[1].Index()
	lb := same(t, o, func(x *fake.Octavia) (*openstack.LoadBalancer, error) {
		return x.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{VipPortID: "vip", Listeners: []openstack.ListenerGraph{{
			Listener: openstack.ListenerSpec{Protocol: "TCP", ProtocolPort: 80}, Pool: openstack.PoolSpec{Name: "p", Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN"}}}})
	})
	for _, want := range []fake.OctaviaCounts{
		{LoadBalancers: 1, Listeners: 1, Pools: 1, Pending: 1}, // the first read sees PENDING_CREATE
		{LoadBalancers: 1, Listeners: 1, Pools: 1},             // the second completes the create
	} {
		same(t, o, func(x *fake.Octavia) (*openstack.LoadBalancer, error) { return x.GetLoadBalancer(ctx, lb.ID) })
		if got := same(t, o, func(x *fake.Octavia) (fake.OctaviaCounts, error) { return x.Count(), nil }); got != want {
			t.Fatalf("counted %+v, want %+v", got, want)
		}
	}
	same(t, o, func(x *fake.Octavia) (struct{}, error) { return struct{}{}, x.DeleteLoadBalancer(ctx, lb.ID) })
	for range 2 {
		same(t, o, func(x *fake.Octavia) (*openstack.LoadBalancer, error) { return x.GetLoadBalancer(ctx, lb.ID) })
	}
	if got := same(t, o, func(x *fake.Octavia) (fake.OctaviaCounts, error) { return x.Count(), nil }); got != (fake.OctaviaCounts{}) {
		t.Fatalf("counted %+v after the delete", got)
	}
}
