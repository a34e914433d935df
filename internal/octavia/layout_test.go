package octavia

import (
	"context"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// A load balancer's listeners and pools from a listing of all (Layouts) stand for its own only while its status
// tree, read now, shows the same listeners and pools; otherwise ReadWith reads them as Read does.
func TestReadWithTrustsTheLayoutOnlyWhereTheTreeAgrees(t *testing.T) {
	tags := []string{"raven.cluster=c", "raven.kind=service"}
	cases := []struct {
		name string
		// before runs before the listing, since after it.
		before, since func(t *testing.T, o *fake.Octavia, lbID string)
		wantLists     int // listener and pool lists of the load balancer's own
		wantListeners int
		wantPools     int // a deleted listener's pool stays, without a listener, as in Octavia
	}{
		{name: "in step", wantListeners: 1, wantPools: 1},
		{name: "a listener made since the listing", since: func(t *testing.T, o *fake.Octavia, lbID string) {
			listener(t, o, lbID, 81, tags)
		}, wantLists: 2, wantListeners: 2, wantPools: 2},
		{name: "a listener deleted since the listing", since: func(t *testing.T, o *fake.Octavia, lbID string) {
			ls, err := o.ListListeners(context.Background(), lbID)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.DeleteListener(context.Background(), ls[0].ID); err != nil {
				t.Fatal(err)
			}
			o.Settle()
		}, wantLists: 2, wantListeners: 0, wantPools: 1},
		{name: "a listener without the tags", before: func(t *testing.T, o *fake.Octavia, lbID string) {
			listener(t, o, lbID, 82, nil)
		}, wantLists: 2, wantListeners: 2, wantPools: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			o := fake.NewOctavia()
			lb, err := o.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: "lb", VipSubnetID: "svc-subnet", VipAddress: "10.96.0.10", Tags: tags})
			if err != nil {
				t.Fatal(err)
			}
			o.Settle()
			listener(t, o, lb.ID, 80, tags)
			if tc.before != nil {
				tc.before(t, o, lb.ID)
			}
			layouts, err := Layouts(ctx, o, tags)
			if err != nil {
				t.Fatal(err)
			}
			if tc.since != nil {
				tc.since(t, o, lb.ID)
			}
			o.ResetCalls()
			cur, err := ReadWith(ctx, o, lb.ID, layouts[lb.ID])
			if err != nil {
				t.Fatal(err)
			}
			if got := o.Called("ListListeners", "ListPools"); got != tc.wantLists {
				t.Errorf("%d listener and pool lists, want %d", got, tc.wantLists)
			}
			if got := o.Called("LoadBalancerStatus"); got < 1 {
				t.Errorf("the status tree was not read")
			}
			if len(cur.Listeners) != tc.wantListeners || len(cur.Pools) != tc.wantPools {
				t.Errorf("read %d listeners and %d pools, want %d and %d", len(cur.Listeners), len(cur.Pools), tc.wantListeners, tc.wantPools)
			}
			if len(cur.Members) != tc.wantListeners {
				t.Errorf("members of %d pools, want %d (the pools on a listener)", len(cur.Members), tc.wantListeners)
			}
		})
	}
}

// listener adds a TCP listener on port with its pool to the load balancer, both with tags.
func listener(t *testing.T, o *fake.Octavia, lbID string, port int, tags []string) {
	t.Helper()
	ctx := context.Background()
	l, err := o.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lbID, Name: "l", Protocol: "TCP", ProtocolPort: port, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	o.Settle()
	if _, err := o.CreatePool(ctx, openstack.PoolSpec{ListenerID: l.ID, Name: "p", Protocol: "TCP", LBAlgorithm: "SOURCE_IP_PORT", Tags: tags}); err != nil {
		t.Fatal(err)
	}
	o.Settle()
}
