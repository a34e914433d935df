package sim

import (
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

// The views render the fake's objects as Neutron does: every attribute present, empty lists as [], unset
// optional attributes as null, timestamps to the second in UTC.

// neutronTime is a Neutron timestamp.
func neutronTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// orEmpty is s, or [] for nil.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// nullable is a pointer to s, nil (null) for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type portView struct {
	openstack.Port
	TenantID     string         `json:"tenant_id"`
	VNICType     string         `json:"binding:vnic_type"`
	Profile      map[string]any `json:"binding:profile"`
	PortSecurity bool           `json:"port_security_enabled"`
	CreatedAt    string         `json:"created_at"`
	UpdatedAt    string         `json:"updated_at"`
}

func portOut(p openstack.Port) portView {
	v := portView{Port: p, TenantID: p.ProjectID, VNICType: "normal", Profile: map[string]any{}, PortSecurity: true,
		CreatedAt: neutronTime(p.CreatedAt), UpdatedAt: neutronTime(p.CreatedAt)}
	if !p.UpdatedAt.IsZero() {
		v.UpdatedAt = neutronTime(p.UpdatedAt)
	}
	v.FixedIPs, v.SecurityGroups, v.Tags = orEmpty(p.FixedIPs), orEmpty(p.SecurityGroups), orEmpty(p.Tags)
	v.AllowedAddressPairs = orEmpty(p.AllowedAddressPairs)
	if v.Status == "" {
		v.Status = "DOWN"
	}
	if v.VIFDetails == nil {
		v.VIFDetails = map[string]any{}
	}
	return v
}

type networkView struct {
	openstack.Network
	TenantID     string `json:"tenant_id"`
	AdminStateUp bool   `json:"admin_state_up"`
	Shared       bool   `json:"shared"`
	PortSecurity bool   `json:"port_security_enabled"`
	CreatedAt    string `json:"created_at"`
	UpdatedAt    string `json:"updated_at"`
}

func networkOut(n openstack.Network) networkView {
	v := networkView{Network: n, TenantID: n.ProjectID, AdminStateUp: true, PortSecurity: true,
		CreatedAt: neutronTime(n.CreatedAt), UpdatedAt: neutronTime(n.CreatedAt)}
	v.Subnets, v.Tags = orEmpty(n.Subnets), orEmpty(n.Tags)
	return v
}

type subnetView struct {
	openstack.Subnet
	TenantID     string   `json:"tenant_id"`
	SubnetPoolID *string  `json:"subnetpool_id"`
	ServiceTypes []string `json:"service_types"`
	CreatedAt    string   `json:"created_at"`
	UpdatedAt    string   `json:"updated_at"`
}

func subnetOut(s openstack.Subnet) subnetView {
	v := subnetView{Subnet: s, TenantID: s.ProjectID, SubnetPoolID: nullable(s.SubnetPoolID), ServiceTypes: []string{},
		CreatedAt: neutronTime(s.CreatedAt), UpdatedAt: neutronTime(s.CreatedAt)}
	v.AllocationPools, v.DNSNameservers, v.HostRoutes, v.Tags = orEmpty(s.AllocationPools), orEmpty(s.DNSNameservers), orEmpty(s.HostRoutes), orEmpty(s.Tags)
	return v
}

type subnetPoolView struct {
	openstack.SubnetPool
	IPVersion        int  `json:"ip_version"`
	Shared           bool `json:"shared"`
	IsDefault        bool `json:"is_default"`
	DefaultPrefixLen int  `json:"default_prefixlen"`
	MinPrefixLen     int  `json:"min_prefixlen"`
	MaxPrefixLen     int  `json:"max_prefixlen"`
}

// subnetPoolOut renders a pool whose default prefix length is def (0: Neutron's default, the minimum, 8).
func subnetPoolOut(p openstack.SubnetPool, def int) subnetPoolView {
	v := subnetPoolView{SubnetPool: p, IPVersion: 4, DefaultPrefixLen: def, MinPrefixLen: minPrefixLen, MaxPrefixLen: 32}
	if def == 0 {
		v.DefaultPrefixLen = minPrefixLen
	}
	v.Prefixes, v.Tags = orEmpty(p.Prefixes), orEmpty(p.Tags)
	return v
}

// minPrefixLen is Neutron's smallest IPv4 prefix length a pool hands out by default.
const minPrefixLen = 8

// routerView is a router: Neutron gives its gateway as external_gateway_info.
type routerView struct {
	ID           string       `json:"id"`
	Name         string       `json:"name"`
	Description  string       `json:"description"`
	Status       string       `json:"status"`
	AdminStateUp bool         `json:"admin_state_up"`
	Gateway      *gatewayView `json:"external_gateway_info"`
	Routes       []any        `json:"routes"`
	Tags         []string     `json:"tags"`
}

type gatewayView struct {
	NetworkID  string `json:"network_id"`
	EnableSNAT bool   `json:"enable_snat"`
	FixedIPs   []any  `json:"external_fixed_ips"`
}

func routerOut(r openstack.Router) routerView {
	v := routerView{ID: r.ID, Name: r.Name, Description: r.Description, Status: "ACTIVE", AdminStateUp: true, Routes: []any{}, Tags: orEmpty(r.Tags)}
	if r.GatewayNetworkID != "" {
		v.Gateway = &gatewayView{NetworkID: r.GatewayNetworkID, EnableSNAT: true, FixedIPs: []any{}}
	}
	return v
}

type floatingIPView struct {
	openstack.FloatingIP
	PortID    *string `json:"port_id"`
	FixedIP   *string `json:"fixed_ip_address"`
	RouterID  *string `json:"router_id"`
	CreatedAt string  `json:"created_at"`
}

func floatingIPOut(f openstack.FloatingIP) floatingIPView {
	v := floatingIPView{FloatingIP: f, PortID: nullable(f.PortID), FixedIP: nullable(f.FixedIP), CreatedAt: neutronTime(f.CreatedAt)}
	v.Tags = orEmpty(f.Tags)
	if v.Status == "" {
		v.Status = "DOWN"
		if f.PortID != "" {
			v.Status = "ACTIVE"
		}
	}
	return v
}

type groupView struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Stateful    bool       `json:"stateful"`
	Rules       []ruleView `json:"security_group_rules"`
	Tags        []string   `json:"tags"`
}

func groupOut(g openstack.SecurityGroup) groupView {
	return groupView{ID: g.ID, Name: g.Name, Description: g.Description, Stateful: true, Rules: views(g.Rules, ruleOut), Tags: orEmpty(g.Tags)}
}

// ruleView is a rule as Neutron gives it: the attributes a rule leaves open are null.
type ruleView struct {
	ID              string  `json:"id"`
	SecurityGroupID string  `json:"security_group_id"`
	Direction       string  `json:"direction"`
	EtherType       string  `json:"ethertype"`
	Protocol        *string `json:"protocol"`
	PortRangeMin    *int    `json:"port_range_min"`
	PortRangeMax    *int    `json:"port_range_max"`
	RemoteIPPrefix  *string `json:"remote_ip_prefix"`
	RemoteGroupID   *string `json:"remote_group_id"`
	Description     string  `json:"description"`
}

func ruleOut(r openstack.SecurityGroupRule) ruleView {
	v := ruleView{ID: r.ID, SecurityGroupID: r.SecurityGroupID, Direction: r.Direction, EtherType: r.EtherType,
		Protocol: nullable(r.Protocol), RemoteIPPrefix: nullable(r.RemoteIPPrefix), RemoteGroupID: nullable(r.RemoteGroupID), Description: r.Description}
	if r.PortRangeMin > 0 {
		lo, hi := r.PortRangeMin, r.PortRangeMax
		v.PortRangeMin, v.PortRangeMax = &lo, &hi
	}
	return v
}

type trunkView struct {
	openstack.Trunk
	Name         string `json:"name"`
	Description  string `json:"description"`
	AdminStateUp bool   `json:"admin_state_up"`
}

func trunkOut(t openstack.Trunk) trunkView {
	v := trunkView{Trunk: t, AdminStateUp: true}
	v.Subports = orEmpty(t.Subports)
	return v
}
