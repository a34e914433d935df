package fake

import (
	"slices"

	"github.com/raven-net/raven/internal/openstack"
)

// Counts are the numbers of objects a Neutron holds.
type Counts struct {
	Networks, Subnets, SubnetPools, Routers, Ports, FloatingIPs int
	SecurityGroups, Rules, Trunks, Subports                     int
}

// Count counts the objects n holds, without counting a call.
func (n *Neutron) Count() Counts {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := Counts{Networks: len(n.Nets), Subnets: len(n.Subnets), SubnetPools: len(n.Pools), Routers: len(n.Routers),
		Ports: len(n.Ports), FloatingIPs: len(n.FIPs), SecurityGroups: len(n.SGs), Trunks: len(n.Trunks)}
	for _, g := range n.SGs {
		c.Rules += len(g.Rules)
	}
	for _, t := range n.Trunks {
		c.Subports += len(t.Subports)
	}
	return c
}

// PortsByTag counts the ports by the rest of their first tag that starts with prefix; those without such a
// tag are counted under "". Indexed, the first call counts every port and later ones none: the index keeps
// the counts from then on.
func (n *Neutron) PortsByTag(prefix string) map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	counts := map[string]int{}
	if n.ix != nil && n.ix.byPrefix[prefix] != nil {
		for k, v := range n.ix.byPrefix[prefix] {
			counts[k] = v
		}
		return counts
	}
	for _, p := range n.Ports {
		counts[tagValue(p.Tags, prefix)]++
	}
	if n.ix != nil {
		kept := make(map[string]int, len(counts))
		for k, v := range counts {
			kept[k] = v
		}
		n.ix.byPrefix[prefix] = kept
	}
	return counts
}

// PortsWithoutDevice counts the ports that carry tag and have no device_id.
func (n *Neutron) PortsWithoutDevice(tag string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	count := 0
	n.eachCandidateLocked(Query{Filter: openstack.Filter{Tags: []string{tag}}}, func(p *openstack.Port) {
		if p.DeviceID == "" && slices.Contains(p.Tags, tag) {
			count++
		}
	})
	return count
}
