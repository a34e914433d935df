package neutron

import (
	"testing"

	"github.com/raven-net/raven/internal/openstack"
)

func TestSubnetHolding(t *testing.T) {
	x := NewIndex()
	put := func(uid, id, cidr string) {
		x.SetNetwork(NamespaceNet{NamespaceUID: uid, Network: openstack.Network{ID: "net-" + id}, Subnet: &openstack.Subnet{ID: id, CIDR: cidr}})
	}
	put("a", "s24", "10.244.1.0/24")
	put("b", "s16", "10.245.0.0/16")
	put("c", "s26", "10.245.7.64/26")
	cases := []struct{ ip, want string }{
		{"10.244.1.7", "s24"},
		{"10.244.2.7", ""},
		{"10.245.3.1", "s16"},
		{"10.245.7.70", "s26"}, // the most specific subnet
		{"not an address", ""},
	}
	for _, tc := range cases {
		if got := x.SubnetHolding(tc.ip); got != tc.want {
			t.Errorf("SubnetHolding(%s) = %q, want %q", tc.ip, got, tc.want)
		}
	}
	x.DropNetwork("a")
	if got := x.SubnetHolding("10.244.1.7"); got != "" {
		t.Errorf("after its namespace went: %q, want none", got)
	}
	put("d", "s24b", "10.244.1.0/24")
	if got := x.SubnetHolding("10.244.1.7"); got != "s24b" {
		t.Errorf("after a new namespace took the range: %q, want s24b", got)
	}
}
