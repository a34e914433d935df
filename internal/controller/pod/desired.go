package pod

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// NeedsPort says whether a pod should have a Neutron port now.
func NeedsPort(p *corev1.Pod) bool {
	if p.Spec.HostNetwork {
		return false
	}
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// PortAnnotation renders a port as the kuryr.org/neutron-port value; mtu is its network's.
func PortAnnotation(p openstack.Port, mtu int) annotations.Port {
	ips := make([]annotations.FixedIP, 0, len(p.FixedIPs))
	for _, ip := range p.FixedIPs {
		ips = append(ips, annotations.FixedIP{SubnetID: ip.SubnetID, IPAddress: ip.IPAddress})
	}
	sgs := p.SecurityGroups
	if sgs == nil {
		sgs = []string{}
	}
	podUID := p.DeviceID
	if o, ok := ownership.Parse(p.Tags); ok && podUID == "" {
		podUID = o.UID // a nested pod's subport has no device_id; its tags name the pod
	}
	return annotations.Port{
		ID: p.ID, Name: p.Name, NetworkID: p.NetworkID, TenantID: p.ProjectID, ProjectID: p.ProjectID,
		MACAddress: p.MACAddress, FixedIPs: ips, Status: p.Status, AdminStateUp: p.AdminStateUp,
		DeviceOwner: p.DeviceOwner, DeviceID: p.DeviceID, SecurityGroups: sgs,
		HostID: p.HostID, VIFType: p.VIFType, VIFDetails: p.VIFDetails, MTU: mtu, PodUID: podUID,
	}
}

// SubnetAnnotation renders a subnet as the kuryr.org/neutron-subnet value.
func SubnetAnnotation(s openstack.Subnet) annotations.Subnet {
	pools := make([]annotations.AllocationPool, 0, len(s.AllocationPools))
	for _, p := range s.AllocationPools {
		pools = append(pools, annotations.AllocationPool{Start: p.Start, End: p.End})
	}
	dns := s.DNSNameservers
	if dns == nil {
		dns = []string{}
	}
	routes := make([]annotations.HostRoute, 0, len(s.HostRoutes))
	for _, r := range s.HostRoutes {
		routes = append(routes, annotations.HostRoute{Destination: r.Destination, NextHop: r.NextHop})
	}
	return annotations.Subnet{
		ID: s.ID, Name: s.Name, NetworkID: s.NetworkID, TenantID: s.ProjectID, CIDR: s.CIDR, GatewayIP: s.GatewayIP,
		IPVersion: s.IPVersion, AllocationPools: pools, DNSNameservers: dns, HostRoutes: routes,
		EnableDHCP: s.EnableDHCP, SubnetPoolID: s.SubnetPoolID,
	}
}

// Annotations returns the pod annotations Raven wants: the port (with where it is on a nested node's trunk)
// and subnet, or neither (nil values remove them).
func Annotations(port *openstack.Port, nn *neutron.NamespaceNet, nested *annotations.Nested) (map[string]*string, error) {
	if port == nil || nn == nil || nn.Subnet == nil {
		return map[string]*string{annotations.PodPort: nil, annotations.PodSubnet: nil}, nil
	}
	a := PortAnnotation(*port, nn.Network.MTU)
	a.Nested = nested
	p, err := annotations.Encode(a)
	if err != nil {
		return nil, err
	}
	s, err := annotations.Encode(SubnetAnnotation(*nn.Subnet))
	if err != nil {
		return nil, err
	}
	return map[string]*string{annotations.PodPort: &p, annotations.PodSubnet: &s}, nil
}
