package octavia

import (
	"slices"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
)

func listed(addrs ...string) Current {
	var ms []openstack.Member
	for _, a := range addrs {
		ms = append(ms, openstack.Member{Address: a, ProvisioningStatus: "ACTIVE"})
	}
	return Current{Members: map[string][]openstack.Member{"pool": ms}}
}

func TestBackends(t *testing.T) {
	type op struct {
		service string
		forget  bool
		cur     Current
	}
	tests := []struct {
		name string
		ops  []op
		held []string
		free []string
	}{
		{name: "nothing observed", free: []string{"10.0.0.1"}},
		{name: "a member is held", ops: []op{{service: "a", cur: listed("10.0.0.1", "10.0.0.2")}},
			held: []string{"10.0.0.1", "10.0.0.2"}, free: []string{"10.0.0.3"}},
		{name: "a member Octavia no longer lists is free", ops: []op{
			{service: "a", cur: listed("10.0.0.1", "10.0.0.2")}, {service: "a", cur: listed("10.0.0.2")}},
			held: []string{"10.0.0.2"}, free: []string{"10.0.0.1"}},
		{name: "a member of two Services is held until both let go", ops: []op{
			{service: "a", cur: listed("10.0.0.1")}, {service: "b", cur: listed("10.0.0.1")}, {service: "a", forget: true}},
			held: []string{"10.0.0.1"}},
		{name: "both let go", ops: []op{
			{service: "a", cur: listed("10.0.0.1")}, {service: "b", cur: listed("10.0.0.1")}, {service: "a", forget: true},
			{service: "b", cur: listed()}},
			free: []string{"10.0.0.1"}},
		{name: "a pending delete still holds", ops: []op{{service: "a", cur: Current{Members: map[string][]openstack.Member{
			"pool": {{Address: "10.0.0.1", ProvisioningStatus: "PENDING_DELETE"}}}}}},
			held: []string{"10.0.0.1"}},
		{name: "forgetting an unknown Service", ops: []op{{service: "x", forget: true}}, free: []string{"10.0.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Backends
			for _, o := range tt.ops {
				if o.forget {
					b.Forget(o.service)
				} else {
					b.Observe(o.service, o.cur)
				}
			}
			for _, a := range tt.held {
				if !b.Holds(a) {
					t.Errorf("%s is not held", a)
				}
			}
			for _, a := range tt.free {
				if b.Holds(a) {
					t.Errorf("%s is held", a)
				}
			}
		})
	}
	var none *Backends
	none.Observe("a", listed("10.0.0.1"))
	if none.Holds("10.0.0.1") {
		t.Error("a nil Backends holds an address")
	}
}

// served is a load balancer with an HTTP listener on 80 whose pool sends to addrs on 8080, and a pool without a
// listener (being built) that sends to 10.0.9.9.
func served(addrs ...string) Current {
	cur := listed(addrs...)
	for i := range cur.Members["pool"] {
		cur.Members["pool"][i].ProtocolPort = 8080
	}
	cur.Listeners = []openstack.Listener{{ID: "l80", Protocol: "TCP", ProtocolPort: 80, DefaultPoolID: "pool"}}
	cur.Pools = []openstack.Pool{{ID: "pool", ListenerID: "l80"}, {ID: "orphan"}}
	cur.Members["orphan"] = []openstack.Member{{Address: "10.0.9.9", ProtocolPort: 8080}}
	return cur
}

func TestBackendsKeepWhatEachLoadBalancerServes(t *testing.T) {
	member := func(addr string) ListenerMember {
		return ListenerMember{Protocol: "tcp", Port: 80, Address: addr, MemberPort: 8080}
	}
	var b Backends
	b.Changed() // a reader listens from here on
	b.Observe("a", served("10.0.0.2", "10.0.0.1"))
	if got, want := b.Members("a"), []ListenerMember{member("10.0.0.1"), member("10.0.0.2")}; !slices.Equal(got, want) {
		t.Fatalf("members %+v, want %+v (by listener, sorted, none of a pool without a listener)", got, want)
	}
	if !changed(&b) {
		t.Fatal("new members did not say Changed")
	}
	b.Observe("a", served("10.0.0.1", "10.0.0.2"))
	if changed(&b) {
		t.Fatal("the same members read again said Changed")
	}
	b.Observe("a", served("10.0.0.1"))
	if got := b.Members("a"); !slices.Equal(got, []ListenerMember{member("10.0.0.1")}) || !changed(&b) {
		t.Fatalf("after a member left: %+v (or no Changed)", got)
	}
	b.Forget("a")
	if len(b.Members("a")) != 0 || !changed(&b) {
		t.Fatalf("a forgotten Service keeps members %+v (or no Changed)", b.Members("a"))
	}
}

// changed says b's Changed channel was signalled since the last call.
func changed(b *Backends) bool {
	select {
	case <-b.Changed():
		return true
	default:
		return false
	}
}

func TestBackendsKeepTheFloatingIPsRavenMade(t *testing.T) {
	var b Backends
	b.Changed() // a reader listens from here on
	b.ObserveFloatingIPs("a", []string{"172.24.4.5"})
	if got := b.FloatingIPs("a"); !slices.Equal(got, []string{"172.24.4.5"}) || !changed(&b) {
		t.Fatalf("floating IPs %v (or no Changed), want 172.24.4.5", got)
	}
	b.ObserveFloatingIPs("a", []string{"172.24.4.5"})
	if changed(&b) {
		t.Fatal("the same floating IP said Changed")
	}
	b.Forget("a")
	if len(b.FloatingIPs("a")) != 0 || !changed(&b) {
		t.Fatalf("a forgotten Service keeps floating IPs %v (or no Changed)", b.FloatingIPs("a"))
	}
	var none *Backends
	none.ObserveFloatingIPs("a", []string{"172.24.4.5"})
	if none.Members("a") != nil || none.FloatingIPs("a") != nil || none.Changed() != nil {
		t.Fatal("a nil Backends holds something")
	}
}
