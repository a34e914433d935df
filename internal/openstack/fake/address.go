package fake

import (
	"net/netip"

	"github.com/raven-net/raven/internal/openstack"
)

// addressTakenLocked answers as Neutron does a create that asks for an address another port of the network
// holds (409 IpAddressAlreadyAllocated, MacAddressInUse), or an IP outside the subnets of the network
// (400 InvalidIpForNetwork).
func (n *Neutron) addressTakenLocked(s openstack.PortSpec) error {
	if s.IPAddress != "" && !n.inSubnetLocked(s.NetworkID, s.IPAddress) {
		return openstack.NewError("fake port create", openstack.KindBadRequest, 400, "InvalidIpForNetwork: IP address "+s.IPAddress+" is not a valid IP for any of the subnets on the specified network")
	}
	if n.ix != nil {
		return n.addressTakenIndexedLocked(s)
	}
	for _, p := range n.Ports {
		if p.NetworkID != s.NetworkID {
			continue
		}
		if s.MACAddress != "" && p.MACAddress == s.MACAddress {
			return openstack.NewError("fake port create", openstack.KindConflict, 409, "MacAddressInUse: Unable to complete operation for network "+s.NetworkID+". The mac address "+s.MACAddress+" is in use.")
		}
		for _, f := range p.FixedIPs {
			if s.IPAddress != "" && f.IPAddress == s.IPAddress {
				return openstack.NewError("fake port create", openstack.KindConflict, 409, "IpAddressAlreadyAllocated: IP address "+s.IPAddress+" already allocated in subnet "+f.SubnetID)
			}
		}
	}
	return nil
}

// addressTakenIndexedLocked is addressTakenLocked by the index.
func (n *Neutron) addressTakenIndexedLocked(s openstack.PortSpec) error {
	if s.MACAddress != "" && n.ix.macs[s.NetworkID+" "+s.MACAddress] > 0 {
		return openstack.NewError("fake port create", openstack.KindConflict, 409, "MacAddressInUse: Unable to complete operation for network "+s.NetworkID+". The mac address "+s.MACAddress+" is in use.")
	}
	if s.IPAddress == "" {
		return nil
	}
	ip, _ := netip.ParseAddr(s.IPAddress) // inSubnetLocked parsed it
	for _, sub := range n.ix.subnets[s.NetworkID] {
		if n.ix.alloc[sub].held(ip) {
			return openstack.NewError("fake port create", openstack.KindConflict, 409, "IpAddressAlreadyAllocated: IP address "+s.IPAddress+" already allocated in subnet "+sub)
		}
	}
	return nil
}

// inSubnetLocked says whether ip is in the CIDR of a subnet of the network.
func (n *Neutron) inSubnetLocked(network, ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	if n.ix != nil {
		return n.subnetOfLocked(network, a) != ""
	}
	for _, sub := range n.Subnets {
		if sub.NetworkID != network {
			continue
		}
		if p, err := netip.ParsePrefix(sub.CIDR); err == nil && p.Contains(a) {
			return true
		}
	}
	return false
}
