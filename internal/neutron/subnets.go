package neutron

import (
	"net/netip"
	"slices"
)

// subnetTable finds the namespace subnet that holds an address with one map lookup per prefix length in use
// (namespace subnets come from one pool, mostly of one length), instead of a scan of every namespace: a
// Service's members are looked up one by one, and a cluster has thousands of namespaces.
type subnetTable struct {
	lengths []int
	ids     map[netip.Prefix]string
}

func newSubnetTable(nets map[string]*NamespaceNet) *subnetTable {
	t := &subnetTable{ids: map[netip.Prefix]string{}}
	for _, nn := range nets {
		if nn.Subnet == nil {
			continue
		}
		p, err := netip.ParsePrefix(nn.Subnet.CIDR)
		if err != nil {
			continue
		}
		p = p.Masked()
		t.ids[p] = nn.Subnet.ID
		if !slices.Contains(t.lengths, p.Bits()) {
			t.lengths = append(t.lengths, p.Bits())
		}
	}
	// The longest prefix first: the most specific subnet wins, as a scan that met it first would have it.
	slices.SortFunc(t.lengths, func(a, b int) int { return b - a })
	return t
}

func (t *subnetTable) lookup(addr netip.Addr) string {
	for _, bits := range t.lengths {
		if p, err := addr.Prefix(bits); err == nil {
			if id, ok := t.ids[p]; ok {
				return id
			}
		}
	}
	return ""
}

// SubnetHolding returns the ID of the namespace subnet that holds ip ("" when none does, or ip is no address).
func (x *Index) SubnetHolding(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	x.mu.RLock()
	t := x.subnets
	x.mu.RUnlock()
	if t == nil {
		x.mu.Lock()
		if x.subnets == nil {
			x.subnets = newSubnetTable(x.nets)
		}
		t = x.subnets
		x.mu.Unlock()
	}
	return t.lookup(addr)
}
