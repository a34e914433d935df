package octavia

import (
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
