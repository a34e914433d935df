package neutron

import (
	"fmt"
	"strings"

	"github.com/raven-net/raven/internal/openstack"
)

// shared holds one copy of each value that many ports repeat: the network, subnet, project, node, owner kind,
// security groups and binding details. Decoded from Neutron, every port carries its own copy of each: at
// 50,000 pods those copies were most of what the index held. Only values whose number grows with networks and
// nodes, never with ports, are kept, and the whole table goes with each full listing (Replace), so that the
// values of deleted networks and nodes do not stay.
type shared struct {
	strs   map[string]string
	groups map[string][]string
	vifs   map[string]map[string]any
}

func newShared() *shared {
	return &shared{strs: map[string]string{}, groups: map[string][]string{}, vifs: map[string]map[string]any{}}
}

func (s *shared) str(v string) string {
	if v == "" {
		return ""
	}
	if c, ok := s.strs[v]; ok {
		return c
	}
	s.strs[v] = v
	return v
}

// sharedTagPrefixes are the tags many ports carry alike; the owner's name and UID are the port's own.
var sharedTagPrefixes = []string{"raven.cluster=", "raven.kind=", "raven.node="}

// port returns p with the values it repeats from other ports replaced by the shared copies. Slices and maps
// that are shared are never changed in place by Raven (it assigns new ones); a shared slice has no spare
// capacity, so that an append copies it.
func (s *shared) port(p openstack.Port) openstack.Port {
	p.NetworkID, p.ProjectID, p.DeviceOwner = s.str(p.NetworkID), s.str(p.ProjectID), s.str(p.DeviceOwner)
	p.HostID, p.Status, p.VIFType = s.str(p.HostID), s.str(p.Status), s.str(p.VIFType)
	if len(p.FixedIPs) > 0 {
		ips := make([]openstack.FixedIP, len(p.FixedIPs))
		for i, ip := range p.FixedIPs {
			ips[i] = openstack.FixedIP{SubnetID: s.str(ip.SubnetID), IPAddress: ip.IPAddress}
		}
		p.FixedIPs = ips
	}
	if len(p.Tags) > 0 {
		tags := make([]string, len(p.Tags))
		for i, t := range p.Tags {
			tags[i] = t
			for _, prefix := range sharedTagPrefixes {
				if strings.HasPrefix(t, prefix) {
					tags[i] = s.str(t)
					break
				}
			}
		}
		p.Tags = tags
	}
	if len(p.SecurityGroups) > 0 {
		key := strings.Join(p.SecurityGroups, ",")
		if g, ok := s.groups[key]; ok {
			p.SecurityGroups = g
		} else {
			g := make([]string, len(p.SecurityGroups)) // its capacity is its length
			for i, id := range p.SecurityGroups {
				g[i] = s.str(id)
			}
			s.groups[key], p.SecurityGroups = g, g
		}
	}
	if len(p.VIFDetails) > 0 {
		key := fmt.Sprint(p.VIFDetails) // fmt prints a map's keys sorted
		if v, ok := s.vifs[key]; ok {
			p.VIFDetails = v
		} else {
			s.vifs[key] = p.VIFDetails
		}
	}
	p.Extra = nil
	return p
}
