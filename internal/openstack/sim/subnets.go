package sim

import (
	"net/netip"

	"github.com/raven-net/raven/internal/openstack"
)

func (s *Sim) listSubnets(c *call) (reply, error) {
	q, err := parseQuery(c.query, append([]string{"project_id", "name", "description", "network_id"}, tagKeys...)...)
	if err != nil {
		return reply{}, err
	}
	p, err := s.Networking.SubnetsPage(q.Query)
	if err != nil {
		return reply{}, err
	}
	return c.page("subnets", views(p.Items, subnetOut), len(p.Items), p.More, lastID(p.Items, func(x openstack.Subnet) string { return x.ID })), nil
}

type subnetIn struct {
	NetworkID       string                     `json:"network_id"`
	IPVersion       int                        `json:"ip_version"`
	Name            string                     `json:"name"`
	Description     string                     `json:"description"`
	EnableDHCP      bool                       `json:"enable_dhcp"`
	CIDR            string                     `json:"cidr"`
	SubnetPoolID    string                     `json:"subnetpool_id"`
	PrefixLength    int                        `json:"prefixlen"`
	GatewayIP       string                     `json:"gateway_ip"`
	AllocationPools []openstack.AllocationPool `json:"allocation_pools"`
}

func (s *Sim) createSubnet(c *call) (reply, error) {
	var in subnetIn
	if err := c.decode("subnet", &in); err != nil {
		return reply{}, err
	}
	if in.SubnetPoolID != "" && in.PrefixLength == 0 {
		in.PrefixLength = s.prefixLen(in.SubnetPoolID)
	}
	if err := in.check(); err != nil {
		return reply{}, err
	}
	if _, err := s.Networking.GetNetwork(c.r.Context(), in.NetworkID); err != nil {
		return reply{}, err
	}
	c.items = 1
	sub, err := s.Networking.CreateSubnet(c.r.Context(), openstack.SubnetSpec{Name: in.Name, NetworkID: in.NetworkID, CIDR: in.CIDR,
		SubnetPoolID: in.SubnetPoolID, PrefixLength: in.PrefixLength, GatewayIP: in.GatewayIP, AllocationPools: in.AllocationPools,
		Description: in.Description, EnableDHCP: in.EnableDHCP})
	if err != nil {
		return reply{}, err
	}
	return created(map[string]any{"subnet": subnetOut(*sub)}), nil
}

// check refuses what Neutron refuses, and what the simulator does not do (IPv6, tiny subnets).
func (in subnetIn) check() error {
	switch {
	case in.NetworkID == "":
		return bad("Failed to parse request. Required attribute 'network_id' not specified")
	case in.IPVersion != 4:
		return bad("the simulator serves ip_version 4 only, not %d", in.IPVersion)
	case in.CIDR == "" && in.SubnetPoolID == "":
		return bad("Bad subnets request: a cidr must be specified in the absence of a subnet pool")
	case in.SubnetPoolID != "" && (in.PrefixLength < 1 || in.PrefixLength > 30):
		return bad("the simulator needs a prefixlen of 1 to 30 with a subnet pool, not %d", in.PrefixLength)
	}
	return in.checkAddresses()
}

// checkAddresses refuses a CIDR, gateway or allocation pool that is not IPv4.
func (in subnetIn) checkAddresses() error {
	if in.CIDR != "" {
		if p, err := netip.ParsePrefix(in.CIDR); err != nil || !p.Addr().Is4() || p.Bits() > 30 {
			return bad("Invalid input for cidr. Reason: '%s' is not an IPv4 subnet of /30 or larger", in.CIDR)
		}
	}
	for _, a := range append([]string{in.GatewayIP}, poolEnds(in.AllocationPools)...) {
		if ip, err := netip.ParseAddr(a); a != "" && (err != nil || !ip.Is4()) {
			return bad("Invalid input: '%s' is not an IPv4 address", a)
		}
	}
	return nil
}

func poolEnds(pools []openstack.AllocationPool) []string {
	var out []string
	for _, p := range pools {
		out = append(out, p.Start, p.End)
	}
	return out
}

func (s *Sim) deleteSubnet(c *call) (reply, error) {
	return noContent(), s.Networking.DeleteSubnet(c.r.Context(), c.ids[0])
}

func (s *Sim) listSubnetPools(c *call) (reply, error) {
	q, err := parseQuery(c.query, append([]string{"project_id", "id", "name", "description"}, tagKeys...)...)
	if err != nil {
		return reply{}, err
	}
	p, err := s.Networking.SubnetPoolsPage(q.Query)
	if err != nil {
		return reply{}, err
	}
	out := views(p.Items, func(x openstack.SubnetPool) subnetPoolView { return subnetPoolOut(x, s.prefixLen(x.ID)) })
	return c.page("subnetpools", out, len(p.Items), p.More, lastID(p.Items, func(x openstack.SubnetPool) string { return x.ID })), nil
}

type subnetPoolIn struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Prefixes     []string `json:"prefixes"`
	PrefixLength int      `json:"default_prefixlen"`
}

func (s *Sim) createSubnetPool(c *call) (reply, error) {
	var in subnetPoolIn
	if err := c.decode("subnetpool", &in); err != nil {
		return reply{}, err
	}
	if len(in.Prefixes) == 0 {
		return reply{}, bad("Failed to parse request. Required attribute 'prefixes' not specified")
	}
	for _, p := range in.Prefixes {
		if pre, err := netip.ParsePrefix(p); err != nil || !pre.Addr().Is4() {
			return reply{}, bad("Invalid input: '%s' is not an IPv4 prefix", p)
		}
	}
	if in.PrefixLength != 0 && (in.PrefixLength < minPrefixLen || in.PrefixLength > 30) {
		return reply{}, bad("Invalid input: default_prefixlen %d is not within %d and 30", in.PrefixLength, minPrefixLen)
	}
	c.items = 1
	p, err := s.Networking.CreateSubnetPool(c.r.Context(), openstack.SubnetPoolSpec{Name: in.Name, Description: in.Description,
		Prefixes: in.Prefixes, PrefixLength: in.PrefixLength})
	if err != nil {
		return reply{}, err
	}
	s.setPrefixLen(p.ID, in.PrefixLength)
	return created(map[string]any{"subnetpool": subnetPoolOut(*p, in.PrefixLength)}), nil
}

func (s *Sim) deleteSubnetPool(c *call) (reply, error) {
	if err := s.Networking.DeleteSubnetPool(c.r.Context(), c.ids[0]); err != nil {
		return reply{}, err
	}
	s.setPrefixLen(c.ids[0], 0)
	return noContent(), nil
}

// prefixLen is a subnet pool's default prefix length (the fake does not keep it), 0 when not set.
func (s *Sim) prefixLen(pool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.poolPrefix[pool]
}

func (s *Sim) setPrefixLen(pool string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 {
		delete(s.poolPrefix, pool)
		return
	}
	s.poolPrefix[pool] = n
}
