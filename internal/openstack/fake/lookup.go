package fake

import (
	"context"
	"fmt"
	"hash/crc32"
	"net/netip"
	"slices"

	"github.com/raven-net/raven/internal/openstack"
)

// newID names the seq-th object: prefix-NNNN-0000-0000-0000-000000000000, or with uuid a UUID-shaped ID whose
// first group tells the kind (a hash of prefix) and whose last counts, so that IDs of one kind sort in the
// order they were made.
func newID(uuid bool, prefix string, seq int) string {
	if uuid {
		return fmt.Sprintf("%08x-0000-4000-8000-%012x", crc32.ChecksumIEEE([]byte(prefix)), seq)
	}
	return fmt.Sprintf("%s-%04d-0000-0000-0000-000000000000", prefix, seq)
}

// networkInUseLocked says whether a port is on the network.
func (n *Neutron) networkInUseLocked(id string) bool {
	if n.ix != nil {
		return n.ix.fields[byNetwork].get(id).size() > 0
	}
	for _, p := range n.Ports {
		if p.NetworkID == id {
			return true
		}
	}
	return false
}

// portSubnetLocked is the subnet a new port gets its address on: the one asked for, else one of the network's
// (indexed: the one that holds the address asked for, else the oldest). nil when the network has none.
func (n *Neutron) portSubnetLocked(s openstack.PortSpec) (*openstack.Subnet, error) {
	if n.ix == nil {
		var sub *openstack.Subnet
		for _, x := range n.Subnets {
			if x.NetworkID == s.NetworkID && (s.SubnetID == "" || x.ID == s.SubnetID) {
				sub = x
			}
		}
		return sub, nil
	}
	subs := n.ix.subnets[s.NetworkID]
	switch {
	case s.SubnetID != "":
		if !slices.Contains(subs, s.SubnetID) {
			return nil, openstack.NewError("fake port create", openstack.KindBadRequest, 400, fmt.Sprintf(
				"Invalid input for operation: Failed to create port on network %s, because fixed_ips included invalid subnet %s.", s.NetworkID, s.SubnetID))
		}
		return n.Subnets[s.SubnetID], nil
	case s.IPAddress != "":
		if ip, err := netip.ParseAddr(s.IPAddress); err == nil {
			if id := n.subnetOfLocked(s.NetworkID, ip); id != "" {
				return n.Subnets[id], nil
			}
		}
	}
	if len(subs) == 0 {
		return nil, nil
	}
	return n.Subnets[subs[0]], nil
}

// dropPortLocked deletes a port from the map and the index.
func (n *Neutron) dropPortLocked(id string) {
	p := n.Ports[id]
	delete(n.Ports, id)
	n.ix.removePort(p)
}

// setOwnerLocked changes a port's device_owner, and its index entry.
func (n *Neutron) setOwnerLocked(p *openstack.Port, owner string) {
	n.ix.unfield(p)
	p.DeviceOwner = owner
	n.ix.field(p)
}

// groupInUseLocked says whether a port is in the security group.
func (n *Neutron) groupInUseLocked(id string) bool {
	if n.ix != nil {
		return n.ix.groupUse[id] > 0
	}
	for _, p := range n.Ports {
		if slices.Contains(p.SecurityGroups, id) {
			return true
		}
	}
	return false
}

// rule indexes a new security group rule.
func (ix *index) rule(r openstack.SecurityGroupRule) {
	if ix != nil {
		ix.ruleGroup[r.ID] = r.SecurityGroupID
	}
}

// forgetRule forgets a deleted rule.
func (ix *index) forgetRule(id string) {
	if ix != nil {
		delete(ix.ruleGroup, id)
	}
}

// groupsOfRuleLocked are the security groups that may hold the rule: its own, or all of them unindexed.
func (n *Neutron) groupsOfRuleLocked(ruleID string) []*openstack.SecurityGroup {
	if n.ix != nil {
		if g, ok := n.SGs[n.ix.ruleGroup[ruleID]]; ok {
			return []*openstack.SecurityGroup{g}
		}
		return nil
	}
	out := make([]*openstack.SecurityGroup, 0, len(n.SGs))
	for _, g := range n.SGs {
		out = append(out, g)
	}
	return out
}

// floatingAddressLocked is the address of a new floating IP: the one asked for, or 172.24.4.(100+count).
// Indexed, with a subnet on the floating network, the address is the subnet's: the one asked for, refused
// when held or outside the network's subnets, or the lowest free one.
func (n *Neutron) floatingAddressLocked(s openstack.FloatingIPSpec) (string, error) {
	if n.ix != nil && n.Nets[s.FloatingNetworkID] == nil {
		return "", notFound("network")
	}
	if n.ix != nil && s.PortID != "" && n.Ports[s.PortID] == nil {
		return "", notFound("port")
	}
	if n.ix == nil || len(n.ix.subnets[s.FloatingNetworkID]) == 0 {
		if s.FloatingIP != "" {
			return s.FloatingIP, nil
		}
		return fmt.Sprintf("172.24.4.%d", 100+len(n.FIPs)), nil
	}
	if s.FloatingIP == "" {
		if ip, ok := n.ix.alloc[n.ix.subnets[s.FloatingNetworkID][0]].allocate(); ok {
			return ip.String(), nil
		}
		return "", openstack.NewError("fake floatingip create", openstack.KindExhausted, 409,
			"IpAddressGenerationFailure: No more IP addresses available on network "+s.FloatingNetworkID+".")
	}
	ip, err := netip.ParseAddr(s.FloatingIP)
	sub := ""
	if err == nil {
		sub = n.subnetOfLocked(s.FloatingNetworkID, ip)
	}
	if sub == "" {
		return "", openstack.NewError("fake floatingip create", openstack.KindBadRequest, 400,
			"InvalidIpForNetwork: IP address "+s.FloatingIP+" is not a valid IP for any of the subnets on the specified network")
	}
	if !n.ix.alloc[sub].take(ip) {
		return "", openstack.NewError("fake floatingip create", openstack.KindConflict, 409,
			"IpAddressAlreadyAllocated: IP address "+s.FloatingIP+" already allocated in subnet "+sub)
	}
	return s.FloatingIP, nil
}

// releaseFloatingLocked gives a deleted floating IP's address back to its subnet.
func (n *Neutron) releaseFloatingLocked(f *openstack.FloatingIP) {
	if n.ix == nil {
		return
	}
	ip, err := netip.ParseAddr(f.FloatingIP)
	if err != nil {
		return
	}
	if sub := n.subnetOfLocked(f.FloatingNetworkID, ip); sub != "" {
		n.ix.alloc[sub].release(ip)
	}
}

// AddExternalNetwork makes an external network (router:external) with one subnet of cidr, as a cloud's
// provider network for routers and floating IPs.
func (n *Neutron) AddExternalNetwork(ctx context.Context, name, cidr string) (*openstack.Network, *openstack.Subnet, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return nil, nil, openstack.NewError("fake network create", openstack.KindBadRequest, 400, "invalid external CIDR "+cidr)
	}
	n.mu.Lock()
	x := &openstack.Network{ID: n.id("net"), Name: name, External: true, Status: "ACTIVE", MTU: 1500, CreatedAt: n.Now()}
	n.Nets[x.ID] = x
	n.mu.Unlock()
	sub, err := n.CreateSubnet(ctx, openstack.SubnetSpec{Name: name + "-subnet", NetworkID: x.ID, CIDR: p.Masked().String()})
	if err != nil {
		return nil, nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c := *x
	return &c, sub, nil
}

// interfaceEndsLocked refuses, indexed, a router interface whose router or subnet does not exist (404).
func (n *Neutron) interfaceEndsLocked(routerID, subnetID string) error {
	if n.ix == nil {
		return nil
	}
	if _, ok := n.Routers[routerID]; !ok {
		return notFound("router")
	}
	if _, ok := n.Subnets[subnetID]; !ok {
		return notFound("subnet")
	}
	return nil
}

// associateLocked checks, indexed, the port a floating IP is to be associated with (404 when it does not
// exist) and sets the floating IP's fixed address to the port's first one (none when portID is empty).
func (n *Neutron) associateLocked(f *openstack.FloatingIP, portID string) error {
	if n.ix == nil {
		return nil
	}
	f.FixedIP = ""
	if portID == "" {
		return nil
	}
	p, ok := n.Ports[portID]
	if !ok {
		return notFound("port")
	}
	if len(p.FixedIPs) > 0 {
		f.FixedIP = p.FixedIPs[0].IPAddress
	}
	return nil
}
