package fake

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/raven-net/raven/internal/openstack"
)

// The port fields an indexed Neutron finds ports by.
const (
	byNetwork = "network_id"
	byDevice  = "device_id"
	byOwner   = "device_owner"
	byTag     = "tags"
	byIP      = "ip_address"
)

// index is what an indexed Neutron keeps beside its maps, so that it serves as many ports as a large cluster
// has (150,000) without looking at every port: for a list by network, device, owner, tag or address, for a
// create's address and MAC checks, for a network's, group's or trunk's delete.
type index struct {
	ports ordered
	// fields: field → value → the IDs of the ports that have it.
	fields map[string]sets
	// tags: the other tag-able resources' IDs by tag (their tags change only by ReplaceTags).
	tags map[openstack.Resource]sets
	// subnets: network ID → its subnets' IDs, oldest first.
	subnets map[string][]string
	// alloc: subnet ID → the subnet's addresses in use.
	alloc map[string]*allocator
	// macs: network ID + " " + MAC → the ports of the network that have it.
	macs map[string]int
	// groupUse: security group ID → the ports in it.
	groupUse map[string]int
	// carrier: port ID → the trunk that carries it as a subport.
	carrier map[string]string
	// ruleGroup: security group rule ID → its group.
	ruleGroup map[string]string
	// strs holds one copy of the strings many ports share (owners, hosts), so that each port does not keep its
	// own.
	strs map[string]string
	// byPrefix: tag prefix → the value after it of each port's first such tag ("" for none) → the ports that
	// have it; kept for the prefixes PortsByTag was asked for.
	byPrefix map[string]map[string]int
}

func newIndex() *index {
	return &index{fields: map[string]sets{byNetwork: {}, byDevice: {}, byOwner: {}, byTag: {}, byIP: {}}, tags: map[openstack.Resource]sets{},
		subnets: map[string][]string{}, alloc: map[string]*allocator{}, macs: map[string]int{}, groupUse: map[string]int{},
		carrier: map[string]string{}, ruleGroup: map[string]string{}, byPrefix: map[string]map[string]int{},
		strs: map[string]string{}}
}

// Index makes n keep indexes of its ports, subnets, addresses, subports, rules and tags, built from what it
// holds now, so that no call looks at every port. An indexed Neutron is also closer to Neutron where tests
// need not care: it honours a subnet's allocation pools, lists a network's subnets in it, gives floating IPs
// addresses of the floating network's subnet and a fixed address when associated, and refuses a port on a
// subnet of another network (400), a router interface of a router or subnet that does not exist and a
// floating IP on a network or port that does not exist (404). After Index, the maps must be changed through
// n's methods only.
func (n *Neutron) Index() {
	n.mu.Lock()
	defer n.mu.Unlock()
	ix := newIndex()
	for _, id := range sortedKeys(n.Subnets) {
		ix.addSubnet(n.Subnets[id])
	}
	for _, p := range n.Ports {
		ix.addPort(p)
	}
	for _, t := range n.Trunks {
		for _, s := range t.Subports {
			ix.carrier[s.PortID] = t.ID
		}
	}
	for _, g := range n.SGs {
		for _, r := range g.Rules {
			ix.ruleGroup[r.ID] = g.ID
		}
	}
	n.ix = ix
	for _, r := range []openstack.Resource{openstack.ResourceNetworks, openstack.ResourceSubnets, openstack.ResourceSubnetPools,
		openstack.ResourceRouters, openstack.ResourceFloatingIPs, openstack.ResourceSecurityGroups} {
		n.eachTaggedLocked(r, func(id string, tags []string) { ix.retag(r, id, nil, tags) })
	}
}

// eachTaggedLocked calls fn with the ID and tags of every object of a resource other than ports.
func (n *Neutron) eachTaggedLocked(r openstack.Resource, fn func(id string, tags []string)) {
	each := func(id string, tags []string) {
		if len(tags) > 0 {
			fn(id, tags)
		}
	}
	switch r {
	case openstack.ResourceNetworks:
		for id, x := range n.Nets {
			each(id, x.Tags)
		}
	case openstack.ResourceSubnets:
		for id, x := range n.Subnets {
			each(id, x.Tags)
		}
	case openstack.ResourceSubnetPools:
		for id, x := range n.Pools {
			each(id, x.Tags)
		}
	case openstack.ResourceRouters:
		for id, x := range n.Routers {
			each(id, x.Tags)
		}
	case openstack.ResourceFloatingIPs:
		for id, x := range n.FIPs {
			each(id, x.Tags)
		}
	case openstack.ResourceSecurityGroups:
		for id, x := range n.SGs {
			each(id, x.Tags)
		}
	}
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// addSubnet indexes a new subnet.
func (ix *index) addSubnet(s *openstack.Subnet) {
	if ix == nil {
		return
	}
	ix.subnets[s.NetworkID] = append(ix.subnets[s.NetworkID], s.ID)
	var start, end string
	if len(s.AllocationPools) > 0 {
		start, end = s.AllocationPools[0].Start, s.AllocationPools[0].End
	}
	ix.alloc[s.ID] = newAllocator(start, end)
}

// removeSubnet forgets a deleted subnet.
func (ix *index) removeSubnet(s *openstack.Subnet) {
	if ix == nil {
		return
	}
	ix.subnets[s.NetworkID] = slices.DeleteFunc(ix.subnets[s.NetworkID], func(id string) bool { return id == s.ID })
	if len(ix.subnets[s.NetworkID]) == 0 {
		delete(ix.subnets, s.NetworkID)
	}
	delete(ix.alloc, s.ID)
}

// addPort indexes a new port: its fields, addresses and MAC.
func (ix *index) addPort(p *openstack.Port) {
	if ix == nil {
		return
	}
	ix.ports.add(p.ID)
	ix.field(p)
	for _, f := range p.FixedIPs {
		if a, ip := ix.allocOf(f); a != nil {
			a.take(ip)
		}
	}
	ix.macs[p.NetworkID+" "+p.MACAddress]++
}

// removePort forgets a deleted port and gives its addresses back.
func (ix *index) removePort(p *openstack.Port) {
	if ix == nil || p == nil {
		return
	}
	ix.ports.remove(p.ID)
	ix.unfield(p)
	for _, f := range p.FixedIPs {
		if a, ip := ix.allocOf(f); a != nil {
			a.release(ip)
		}
	}
	mac := p.NetworkID + " " + p.MACAddress
	if ix.macs[mac]--; ix.macs[mac] <= 0 {
		delete(ix.macs, mac)
	}
	delete(ix.carrier, p.ID)
}

func (ix *index) allocOf(f openstack.FixedIP) (*allocator, netip.Addr) {
	ip, err := netip.ParseAddr(f.IPAddress)
	if err != nil {
		return nil, ip
	}
	return ix.alloc[f.SubnetID], ip
}

// field indexes the fields of p that change (device, owner, tags, security groups) and those that do not.
// A change of a port is unfield, the change, field.
func (ix *index) field(p *openstack.Port) { ix.fieldsOf(p, true) }

// unfield takes p's fields out of the index.
func (ix *index) unfield(p *openstack.Port) { ix.fieldsOf(p, false) }

func (ix *index) fieldsOf(p *openstack.Port, add bool) {
	if ix == nil || p == nil {
		return
	}
	ix.key(byNetwork, p.NetworkID, p.ID, add)
	ix.key(byDevice, p.DeviceID, p.ID, add)
	ix.key(byOwner, p.DeviceOwner, p.ID, add)
	for _, t := range p.Tags {
		ix.key(byTag, t, p.ID, add)
	}
	for _, f := range p.FixedIPs {
		ix.key(byIP, f.IPAddress, p.ID, add)
	}
	d := 1
	if !add {
		d = -1
	}
	for prefix, counts := range ix.byPrefix {
		v := tagValue(p.Tags, prefix)
		if counts[v] += d; counts[v] <= 0 {
			delete(counts, v)
		}
	}
	for _, g := range p.SecurityGroups {
		if ix.groupUse[g] += d; ix.groupUse[g] <= 0 {
			delete(ix.groupUse, g)
		}
	}
}

func (ix *index) key(field, value, id string, add bool) {
	if add {
		ix.fields[field].add(value, id)
	} else {
		ix.fields[field].remove(value, id)
	}
}

// candidates is the smallest set of ports that holds every port q selects: the ports of q's network, device,
// owner, one of its tags or its address, or all of them.
func (ix *index) candidates(q Query) *ordered {
	best := &ix.ports
	for _, c := range []*ordered{
		ix.fields[byNetwork].smallest(nonEmpty(q.NetworkID)),
		ix.fields[byDevice].smallest(nonEmpty(q.DeviceID)),
		ix.fields[byOwner].smallest(nonEmpty(q.DeviceOwner)),
		ix.fields[byTag].smallest(q.Tags),
		ix.fields[byIP].smallest(onlyOne(q.IPAddresses)), // several addresses select any of them
	} {
		if c != nil && (c == none || c.size() < best.size()) {
			best = c
		}
		if best == none {
			break
		}
	}
	return best
}

// nonEmpty is []string{s}, nil for "".
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// onlyOne is values when there is one, else nil.
func onlyOne(values []string) []string {
	if len(values) != 1 {
		return nil
	}
	return values
}

// retag indexes a resource's new tags in place of its old ones (ports are indexed by field).
func (ix *index) retag(r openstack.Resource, id string, old, tags []string) {
	if ix == nil || r == openstack.ResourcePorts {
		return
	}
	if ix.tags[r] == nil {
		ix.tags[r] = sets{}
	}
	ix.tags[r].tag(id, old, true)
	ix.tags[r].tag(id, tags, false)
}

// untag forgets a deleted resource's tags.
func (ix *index) untag(r openstack.Resource, id string, tags []string) {
	if ix != nil && ix.tags[r] != nil {
		ix.tags[r].tag(id, tags, true)
	}
}

// tagged is the smallest set of the resources that carry all the tags, nil when there are no tags or no index.
func (ix *index) tagged(r openstack.Resource, tags []string) *ordered {
	if ix == nil || len(tags) == 0 {
		return nil
	}
	return ix.tags[r].smallest(tags)
}

// subnetOf is the subnet of the network whose CIDR holds ip, or "".
func (n *Neutron) subnetOfLocked(network string, ip netip.Addr) string {
	for _, id := range n.ix.subnets[network] {
		if p, err := netip.ParsePrefix(n.Subnets[id].CIDR); err == nil && p.Contains(ip) {
			return id
		}
	}
	return ""
}

// routerPortPrefix starts the ID of a router interface listed as a port.
const routerPortPrefix = "if-"

// tagValue is the rest of the first tag that starts with prefix, "" when none does.
func tagValue(tags []string, prefix string) string {
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, prefix); ok {
			return v
		}
	}
	return ""
}

// boundDetails are the binding:vif_details of every bound port of an indexed Neutron (ML2/OVN's), one map for
// all: nobody changes it.
var boundDetails = map[string]any{"port_filter": true, "connectivity": "l2"}

// compact makes a port share what it has in common with others: network is the network's own ID string, the
// owner and host strings are shared, and a bound port's details are boundDetails. The port's values stay equal.
func (ix *index) compact(p *openstack.Port, network string) {
	if ix == nil {
		return
	}
	p.NetworkID = network
	p.DeviceOwner, p.HostID = ix.intern(p.DeviceOwner), ix.intern(p.HostID)
	if p.VIFDetails != nil {
		p.VIFDetails = boundDetails
	}
}

// intern is the one copy of s.
func (ix *index) intern(s string) string {
	if s == "" {
		return s
	}
	if c, ok := ix.strs[s]; ok {
		return c
	}
	ix.strs[s] = s
	return s
}
