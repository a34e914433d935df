package fake_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// built is a load balancer with one listener, its pool and two members.
func built(t *testing.T, o *fake.Octavia, tags ...string) (lb *openstack.LoadBalancer, l *openstack.Listener, p *openstack.Pool) {
	t.Helper()
	ctx := context.Background()
	var err error
	if lb, err = o.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: "ns/web", VipPortID: "vip", VipAddress: "10.96.0.10", Tags: tags}); err != nil {
		t.Fatal(err)
	}
	o.Settle()
	if l, err = o.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lb.ID, Protocol: "TCP", ProtocolPort: 80}); err != nil {
		t.Fatal(err)
	}
	o.Settle()
	if p, err = o.CreatePool(ctx, openstack.PoolSpec{ListenerID: l.ID, Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN"}); err != nil {
		t.Fatal(err)
	}
	o.Settle()
	if err = o.ReplaceMembers(ctx, p.ID, []openstack.MemberSpec{{Address: "10.244.0.2", ProtocolPort: 8080}, {Address: "10.244.0.3", ProtocolPort: 8080}}); err != nil {
		t.Fatal(err)
	}
	o.Settle()
	return lb, l, p
}

func TestOctaviaPendingReads(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		reads   int
		pending int // reads that see PENDING_CREATE
	}{
		{"by default a new load balancer is ACTIVE at once", 0, 0},
		{"with PendingReads 2 the first two reads see PENDING_CREATE, the third ACTIVE", 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := fake.NewOctavia()
			o.PendingReads = tc.reads
			lb, err := o.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{VipPortID: "vip"})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.pending {
				got, err := o.GetLoadBalancer(ctx, lb.ID)
				if err != nil || got.ProvisioningStatus != "PENDING_CREATE" {
					t.Fatalf("read %d: %v, %v; want PENDING_CREATE", i+1, got, err)
				}
				if _, err := o.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lb.ID, Protocol: "TCP", ProtocolPort: 80}); openstack.KindOf(err) != openstack.KindImmutable {
					t.Fatalf("a listener on a pending load balancer: %v, want Immutable", err)
				}
			}
			got, err := o.GetLoadBalancer(ctx, lb.ID)
			if err != nil || got.ProvisioningStatus != "ACTIVE" {
				t.Fatalf("after %d reads: %+v, %v; want ACTIVE", tc.pending, got, err)
			}
		})
	}

	t.Run("a negative PendingReads never finishes: the load balancer stays PENDING_UPDATE", func(t *testing.T) {
		o := fake.NewOctavia()
		lb, _, p := built(t, o)
		o.PendingReads = -1
		if err := o.ReplaceMembers(ctx, p.ID, nil); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if got, _ := o.GetLoadBalancer(ctx, lb.ID); got.ProvisioningStatus != "PENDING_UPDATE" {
				t.Fatalf("status %s, want PENDING_UPDATE for good", got.ProvisioningStatus)
			}
		}
	})
}

func TestOctaviaCascadeDelete(t *testing.T) {
	ctx := context.Background()
	o := fake.NewOctavia()
	o.PendingReads = 1
	lb, l, p := built(t, o, "raven.cluster=c1")
	if err := o.DeleteLoadBalancer(ctx, lb.ID); err != nil {
		t.Fatal(err)
	}
	if err := o.DeleteLoadBalancer(ctx, lb.ID); openstack.KindOf(err) != openstack.KindImmutable {
		t.Fatalf("a second delete while PENDING_DELETE: %v, want Immutable", err)
	}
	lbs, _ := o.ListLoadBalancers(ctx, []string{"raven.cluster=c1"})
	if len(lbs) != 1 || lbs[0].ProvisioningStatus != "PENDING_DELETE" {
		t.Fatalf("listed %+v, want the load balancer PENDING_DELETE", lbs)
	}
	if _, err := o.GetLoadBalancer(ctx, lb.ID); !openstack.IsNotFound(err) {
		t.Fatalf("after the delete completed: %v, want NotFound", err)
	}
	if ls, _ := o.ListListeners(ctx, lb.ID); len(ls) != 0 {
		t.Fatalf("listener %s survives its load balancer", l.ID)
	}
	if _, err := o.ListMembers(ctx, p.ID); !openstack.IsNotFound(err) {
		t.Fatalf("members of pool %s: %v, want NotFound", p.ID, err)
	}
	if len(o.LoadBalancers()) != 0 {
		t.Fatalf("%d load balancers left", len(o.LoadBalancers()))
	}
}

func TestOctaviaObjects(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		check func(t *testing.T, o *fake.Octavia, lb *openstack.LoadBalancer, l *openstack.Listener, p *openstack.Pool)
	}{
		{"a list by tags returns only load balancers with every tag", listsByEveryTag},
		{"a second listener on the same protocol and port is a conflict", func(t *testing.T, o *fake.Octavia, lb *openstack.LoadBalancer, _ *openstack.Listener, _ *openstack.Pool) {
			_, err := o.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lb.ID, Protocol: "TCP", ProtocolPort: 80})
			if openstack.KindOf(err) != openstack.KindConflict {
				t.Fatalf("err %v, want Conflict", err)
			}
			if _, err := o.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lb.ID, Protocol: "UDP", ProtocolPort: 80}); err != nil {
				t.Fatalf("UDP next to TCP on one port: %v", err)
			}
		}},
		{"a pool joins its listener, and a second pool on it is a conflict", poolJoinsItsListener},
		{"deleting a listener leaves its pool on the load balancer without a listener", func(t *testing.T, o *fake.Octavia, lb *openstack.LoadBalancer, l *openstack.Listener, _ *openstack.Pool) {
			if err := o.DeleteListener(ctx, l.ID); err != nil {
				t.Fatal(err)
			}
			ps, _ := o.ListPools(ctx, lb.ID)
			if len(ps) != 1 || ps[0].ListenerID != "" || len(ps[0].Listeners) != 0 {
				t.Fatalf("pools %+v, want one without a listener", ps)
			}
		}},
		{"deleting a pool removes its members and frees its listener", deletingAPoolFreesItsListener},
		{"a batch update keeps the IDs of members it keeps and drops the others", batchUpdateKeepsMemberIDs},
		{"an unknown lb_algorithm is a bad request", func(t *testing.T, o *fake.Octavia, lb *openstack.LoadBalancer, _ *openstack.Listener, _ *openstack.Pool) {
			l2, err := o.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lb.ID, Protocol: "TCP", ProtocolPort: 81})
			if err != nil {
				t.Fatal(err)
			}
			_, err = o.CreatePool(ctx, openstack.PoolSpec{ListenerID: l2.ID, Protocol: "TCP", LBAlgorithm: "RANDOM"})
			if !openstack.Rejected(err) {
				t.Fatalf("err %v, want a rejection", err)
			}
		}},
		{"calls are counted by method, writes apart, and failed calls count too", func(t *testing.T, o *fake.Octavia, lb *openstack.LoadBalancer, _ *openstack.Listener, p *openstack.Pool) {
			o.ResetCalls()
			o.FailStatus("ReplaceMembers", 1, 503, "")
			_ = o.ReplaceMembers(ctx, p.ID, nil)
			_ = o.ReplaceMembers(ctx, p.ID, nil)
			_, _ = o.ListListeners(ctx, lb.ID)
			if o.Called("ReplaceMembers") != 2 || o.Called("ListListeners") != 1 || o.Wrote() != 2 {
				t.Fatalf("calls %v, %d writes", o.Calls, o.Wrote())
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := fake.NewOctavia()
			lb, l, p := built(t, o, "raven.cluster=c1", "raven.kind=service")
			tc.check(t, o, lb, l, p)
		})
	}
}

func listsByEveryTag(t *testing.T, o *fake.Octavia, _ *openstack.LoadBalancer, _ *openstack.Listener, _ *openstack.Pool) {
	ctx := context.Background()
	if _, err := o.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{VipPortID: "v2", Tags: []string{"raven.cluster=c2", "raven.kind=service"}}); err != nil {
		t.Fatal(err)
	}
	for tags, want := range map[string]int{"raven.kind=service": 2, "raven.cluster=c1,raven.kind=service": 1, "raven.cluster=c3": 0, "": 2} {
		var filter []string
		if tags != "" {
			filter = strings.Split(tags, ",")
		}
		if got, _ := o.ListLoadBalancers(ctx, filter); len(got) != want {
			t.Errorf("tags %q: %d load balancers, want %d", tags, len(got), want)
		}
	}
}

func poolJoinsItsListener(t *testing.T, o *fake.Octavia, lb *openstack.LoadBalancer, l *openstack.Listener, p *openstack.Pool) {
	ctx := context.Background()
	ls, _ := o.ListListeners(ctx, lb.ID)
	ps, _ := o.ListPools(ctx, lb.ID)
	if len(ls) != 1 || ls[0].DefaultPoolID != p.ID || len(ps) != 1 || ps[0].ListenerID != l.ID || ps[0].Listeners[0].ID != l.ID {
		t.Fatalf("listeners %+v, pools %+v", ls, ps)
	}
	if _, err := o.CreatePool(ctx, openstack.PoolSpec{ListenerID: l.ID, Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN"}); openstack.KindOf(err) != openstack.KindConflict {
		t.Fatalf("err %v, want Conflict", err)
	}
}

func deletingAPoolFreesItsListener(t *testing.T, o *fake.Octavia, lb *openstack.LoadBalancer, l *openstack.Listener, p *openstack.Pool) {
	ctx := context.Background()
	if err := o.DeletePool(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if ls, _ := o.ListListeners(ctx, lb.ID); ls[0].DefaultPoolID != "" {
		t.Fatalf("listener still names pool %s", ls[0].DefaultPoolID)
	}
	if err := o.DeletePool(ctx, p.ID); !openstack.IsNotFound(err) {
		t.Fatalf("a second delete: %v, want NotFound", err)
	}
	if _, err := o.CreatePool(ctx, openstack.PoolSpec{ListenerID: l.ID, Protocol: "TCP", LBAlgorithm: "SOURCE_IP"}); err != nil {
		t.Fatal(err)
	}
}

func batchUpdateKeepsMemberIDs(t *testing.T, o *fake.Octavia, _ *openstack.LoadBalancer, _ *openstack.Listener, p *openstack.Pool) {
	ctx := context.Background()
	before, _ := o.ListMembers(ctx, p.ID)
	if err := o.ReplaceMembers(ctx, p.ID, []openstack.MemberSpec{{Address: "10.244.0.3", ProtocolPort: 8080}, {Address: "10.244.0.4", ProtocolPort: 8080}}); err != nil {
		t.Fatal(err)
	}
	after, _ := o.ListMembers(ctx, p.ID)
	if len(after) != 2 || after[0].ID != before[1].ID || after[1].Address != "10.244.0.4" || after[1].ID == before[0].ID {
		t.Fatalf("members %+v after %+v", after, before)
	}
	if after[0].ProvisioningStatus != "ACTIVE" {
		t.Fatalf("member status %s, want ACTIVE once the change completed", after[0].ProvisioningStatus)
	}
}

func TestOctaviaFaults(t *testing.T) {
	ctx := context.Background()
	o := fake.NewOctavia()
	lb, _, _ := built(t, o)
	t.Run("a fault fails the next N calls of its method only, then the method works again", func(t *testing.T) {
		o.FailStatus("CreateListener", 2, 403, "Quota has been met for resources: Listener")
		for i := range 2 {
			_, err := o.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lb.ID, Protocol: "TCP", ProtocolPort: 90})
			if openstack.KindOf(err) != openstack.KindQuota || !openstack.Rejected(err) {
				t.Fatalf("call %d: %v, want QuotaExceeded", i+1, err)
			}
		}
		if _, err := o.ListListeners(ctx, lb.ID); err != nil {
			t.Fatalf("another method failed: %v", err)
		}
		if _, err := o.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lb.ID, Protocol: "TCP", ProtocolPort: 90}); err != nil {
			t.Fatalf("the third call: %v", err)
		}
	})
	t.Run("a fault with times < 0 fails every call", func(t *testing.T) {
		unavailable := openstack.NewError("octavia loadbalancer list", openstack.KindUnavailable, 0, "connection refused")
		o.Fail("ListLoadBalancers", -1, unavailable)
		for range 3 {
			if _, err := o.ListLoadBalancers(ctx, nil); !errors.Is(err, unavailable) {
				t.Fatalf("err %v, want the injected error", err)
			}
		}
	})
}

// The errors FailStatus injects must be the errors the real client returns for the same answer of Octavia:
// each case is sent through the gophercloud client of internal/openstack to a transport that answers it.
func TestFailStatusClassifiesLikeTheRealClient(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		status  int
		message string
	}{
		{400, "Invalid input for field/attribute protocol. Value: 'SCTP'."},
		{403, "Quota has been met for resources: Listener"},
		{403, "Policy does not allow this request to be performed."},
		{404, "Load Balancer x could not be found."},
		{409, "Load Balancer x is immutable and cannot be updated."},
		{409, "Another Listener on this Load Balancer is already using protocol_port 80"},
		{500, "(sqlite3.OperationalError) database is locked"},
		{501, "Provider 'amphora' does not support a requested option: SCTP"},
		{503, "Service Unavailable"},
	}
	calls := map[string]func(openstack.LoadBalancing) error{
		"CreateListener": func(lb openstack.LoadBalancing) error {
			_, err := lb.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: "lb", Protocol: "TCP", ProtocolPort: 80})
			return err
		},
		"CreatePool": func(lb openstack.LoadBalancing) error {
			_, err := lb.CreatePool(ctx, openstack.PoolSpec{ListenerID: "l", Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN"})
			return err
		},
		"ReplaceMembers": func(lb openstack.LoadBalancing) error {
			return lb.ReplaceMembers(ctx, "pool", []openstack.MemberSpec{{Address: "10.0.0.1", ProtocolPort: 80}})
		},
		"DeleteLoadBalancer": func(lb openstack.LoadBalancing) error { return lb.DeleteLoadBalancer(ctx, "lb") },
		"GetLoadBalancer": func(lb openstack.LoadBalancing) error {
			_, err := lb.GetLoadBalancer(ctx, "lb")
			return err
		},
		"ListLoadBalancers": func(lb openstack.LoadBalancing) error {
			_, err := lb.ListLoadBalancers(ctx, nil)
			return err
		},
	}
	for method, call := range calls {
		for _, tc := range cases {
			t.Run(method+" answered "+http.StatusText(tc.status)+" "+tc.message, func(t *testing.T) {
				body := `{"faultcode": "Client", "faultstring": "` + tc.message + `", "debuginfo": null}`
				real := call(answering(tc.status, body))
				o := fake.NewOctavia()
				o.FailStatus(method, 1, tc.status, tc.message)
				injected := call(o)
				var r, f *openstack.Error
				if !errors.As(real, &r) || !errors.As(injected, &f) {
					t.Fatalf("real %v, injected %v: want two *openstack.Error", real, injected)
				}
				if r.Kind != f.Kind || r.Status != f.Status || r.Op != f.Op || r.Detail != f.Detail || openstack.Rejected(real) != openstack.Rejected(injected) {
					t.Fatalf("real client: %s/%d/%q/%q, fake: %s/%d/%q/%q", r.Kind, r.Status, r.Op, r.Detail, f.Kind, f.Status, f.Op, f.Detail)
				}
			})
		}
	}
}

// answering is the real Octavia client over a transport that answers every request with status and body.
func answering(status int, body string) openstack.LoadBalancing {
	rt := roundTrip(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	})
	pc := &gophercloud.ProviderClient{HTTPClient: http.Client{Transport: rt}}
	return openstack.NewLoadBalancing(&gophercloud.ServiceClient{ProviderClient: pc, Endpoint: "http://octavia/", ResourceBase: "http://octavia/v2/"})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
