package neutron

import (
	"net/netip"
	"testing"
)

func TestUpperHalf(t *testing.T) {
	cases := []struct{ cidr, first, last string }{
		{"10.0.0.0/24", "10.0.0.128", "10.0.0.254"},
		{"10.96.0.0/12", "10.104.0.0", "10.111.255.254"},
		{"10.0.0.7/29", "10.0.0.4", "10.0.0.6"},
	}
	for _, tc := range cases {
		t.Run(tc.cidr, func(t *testing.T) {
			first, last := upperHalf(netip.MustParsePrefix(tc.cidr))
			if first.String() != tc.first || last.String() != tc.last {
				t.Fatalf("upperHalf = %s, %s; want %s, %s", first, last, tc.first, tc.last)
			}
		})
	}
}

// FuzzUpperHalf: for every IPv4 prefix Raven accepts (/1 to /29), the gateway and the allocation pool stay
// inside the prefix and out of its lower half, where the clusterIPs live.
func FuzzUpperHalf(f *testing.F) {
	f.Add("10.0.0.0/24")
	f.Add("0.0.0.0/1")
	f.Add("255.255.255.248/29")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() || p.Bits() < 1 || p.Bits() > 29 {
			return
		}
		first, last := upperHalf(p)
		lower := netip.PrefixFrom(p.Masked().Addr(), p.Bits()+1)
		if !p.Contains(first) || !p.Contains(last) || lower.Contains(first) || lower.Contains(last) || last.Less(first) {
			t.Fatalf("%s: upper half %s..%s", p, first, last)
		}
	})
}
