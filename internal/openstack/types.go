package openstack

import (
	"fmt"
	"time"
)

// FixedIP is one address of a port.
type FixedIP struct {
	SubnetID  string `json:"subnet_id"`
	IPAddress string `json:"ip_address"`
}

// Port is a Neutron port. A listed port carries the attributes of PortListFields only; one read alone
// (GetPort) carries every attribute.
type Port struct {
	ID                  string        `json:"id"`
	Name                string        `json:"name"`
	NetworkID           string        `json:"network_id"`
	ProjectID           string        `json:"project_id"`
	MACAddress          string        `json:"mac_address"`
	FixedIPs            []FixedIP     `json:"fixed_ips"`
	Status              string        `json:"status"`
	AdminStateUp        bool          `json:"admin_state_up"`
	DeviceOwner         string        `json:"device_owner"`
	DeviceID            string        `json:"device_id"`
	SecurityGroups      []string      `json:"security_groups"`
	AllowedAddressPairs []AddressPair `json:"allowed_address_pairs"`
	Tags                []string      `json:"tags"`
	Description         string        `json:"description"`
	RevisionNumber      int           `json:"revision_number"`
	CreatedAt           time.Time     `json:"created_at"`
	UpdatedAt           time.Time     `json:"updated_at"`
	// HostID is the node the port is bound to (binding:host_id), empty while unbound.
	HostID     string         `json:"binding:host_id"`
	VIFType    string         `json:"binding:vif_type"`
	VIFDetails map[string]any `json:"binding:vif_details"`
	// Profile is binding:profile, which only an admin (or the service role) reads: on a subport, ML2/OVN's
	// trunk driver writes the parent port's ID there (parent_name) and its VLAN (tag).
	Profile map[string]any `json:"binding:profile,omitempty"`
	Extra   map[string]any `json:"-"`
}

// AddressPair is an allowed address pair of a port.
type AddressPair struct {
	IPAddress  string `json:"ip_address"`
	MACAddress string `json:"mac_address,omitempty"`
}

// PortSpec is what Raven asks Neutron to create.
type PortSpec struct {
	Name        string
	NetworkID   string
	SubnetID    string
	IPAddress   string // optional fixed IP
	DeviceOwner string
	DeviceID    string
	Description string
	Tags        []string
	// HostID binds the port to a node at once (binding:host_id); empty leaves it unbound.
	HostID string
	// SecurityGroups replace the project's default group when set.
	SecurityGroups []string
	// MACAddress is the port's MAC; empty lets Neutron choose one. A port made again for a running pod asks
	// for the MAC (and IPAddress) its former port had, so that the pod's interface stays right.
	MACAddress string
}

// PortUpdate changes the mutable fields Raven uses; nil fields are left alone.
type PortUpdate struct {
	Name           *string
	DeviceID       *string
	HostID         *string
	SecurityGroups *[]string
}

// Filter selects objects by network, device, name, description and tags. Tags must all match.
type Filter struct {
	NetworkID string
	// NetworkIDs, when not nil, keeps the ports on one of these networks (ports only): an empty, non-nil
	// list selects none, without a request.
	NetworkIDs []string
	// ID keeps the object of that ID (subnet pools only).
	ID string
	// ProjectID keeps the objects of that project (networks, subnets, subnet pools, routers, ports, floating
	// IPs, security groups): Raven's own project, for the lookups of objects that may not carry its tags yet.
	ProjectID string
	// External keeps the external networks (router:external=true; networks only).
	External    bool
	DeviceID    string
	DeviceOwner string // ports only
	Name        string
	Description string
	Tags        []string
	// NotTagsAny excludes objects carrying any of these tags (ports only).
	NotTagsAny []string
}

// NetworkSpec describes a network to create.
type NetworkSpec struct {
	Name        string
	Description string
}

// SubnetPoolSpec describes a subnet pool to create.
type SubnetPoolSpec struct {
	Name         string
	Description  string
	Prefixes     []string
	PrefixLength int
}

// RouterSpec describes a router to create; GatewayNetworkID is optional.
type RouterSpec struct {
	Name             string
	Description      string
	GatewayNetworkID string
}

// Network is a Neutron network.
type Network struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	ProjectID   string    `json:"project_id"`
	Status      string    `json:"status"`
	Subnets     []string  `json:"subnets"`
	External    bool      `json:"router:external"`
	MTU         int       `json:"mtu"`
	Description string    `json:"description"`
	Tags        []string  `json:"tags"`
	CreatedAt   time.Time `json:"created_at"`
}

// AllocationPool is a range of addresses Neutron hands out.
type AllocationPool struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// Subnet is a Neutron subnet.
type Subnet struct {
	ID              string           `json:"id"`
	Name            string           `json:"name"`
	NetworkID       string           `json:"network_id"`
	ProjectID       string           `json:"project_id"`
	CIDR            string           `json:"cidr"`
	GatewayIP       string           `json:"gateway_ip"`
	IPVersion       int              `json:"ip_version"`
	AllocationPools []AllocationPool `json:"allocation_pools"`
	DNSNameservers  []string         `json:"dns_nameservers"`
	HostRoutes      []HostRoute      `json:"host_routes"`
	EnableDHCP      bool             `json:"enable_dhcp"`
	SubnetPoolID    string           `json:"subnetpool_id"`
	Description     string           `json:"description"`
	Tags            []string         `json:"tags"`
	CreatedAt       time.Time        `json:"created_at"`
}

// HostRoute is a static route a subnet announces.
type HostRoute struct {
	Destination string `json:"destination"`
	NextHop     string `json:"nexthop"`
}

// SubnetSpec describes a subnet to create: either CIDR, or SubnetPoolID with PrefixLength.
type SubnetSpec struct {
	Name            string
	NetworkID       string
	CIDR            string
	SubnetPoolID    string
	PrefixLength    int
	GatewayIP       string
	AllocationPools []AllocationPool
	Description     string
	// EnableDHCP: under ML2/OVN with metadata on, Neutron then gives the network's network:distributed
	// (metadata) port an address on the subnet, the source of the OVN provider's health checks. The
	// address comes from the allocation pool, so a subnet whose every address is someone's (the service
	// subnet: clusterIPs) keeps it off.
	EnableDHCP bool
}

// SubnetPool is a Neutron subnet pool.
type SubnetPool struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	ProjectID   string   `json:"project_id"`
	Prefixes    []string `json:"prefixes"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
}

// Router is a Neutron router.
type Router struct {
	ID               string   `json:"id"`
	Name             string   `json:"name"`
	ProjectID        string   `json:"project_id"`
	GatewayNetworkID string   `json:"gateway_network_id"`
	Description      string   `json:"description"`
	Tags             []string `json:"tags"`
}

// FloatingIP is a Neutron floating IP.
type FloatingIP struct {
	ID                string    `json:"id"`
	FloatingIP        string    `json:"floating_ip_address"`
	FloatingNetworkID string    `json:"floating_network_id"`
	PortID            string    `json:"port_id"`
	FixedIP           string    `json:"fixed_ip_address"`
	ProjectID         string    `json:"project_id"`
	Status            string    `json:"status"`
	Description       string    `json:"description"`
	Tags              []string  `json:"tags"`
	CreatedAt         time.Time `json:"created_at"`
}

// FloatingIPSpec describes a floating IP to create.
type FloatingIPSpec struct {
	FloatingNetworkID string
	FloatingIP        string // optional: a specific address
	PortID            string
	Description       string
}

// LoadBalancer is an Octavia load balancer.
type LoadBalancer struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	Description        string   `json:"description"`
	VipAddress         string   `json:"vip_address"`
	VipPortID          string   `json:"vip_port_id"`
	VipSubnetID        string   `json:"vip_subnet_id"`
	ProvisioningStatus string   `json:"provisioning_status"`
	OperatingStatus    string   `json:"operating_status"`
	Provider           string   `json:"provider"`
	Tags               []string `json:"tags"`
	CreatedAt          Time     `json:"created_at"`
	UpdatedAt          Time     `json:"updated_at"`
}

// LoadBalancerSpec describes a load balancer: on a VIP port the caller owns (VipPortID), or on an address of
// a subnet, for a provider that makes the VIP port itself (VipSubnetID and VipAddress). Provider empty is
// Octavia's default provider. Listeners, when given, are created with the load balancer in one request
// (Octavia's fully populated create), each with its pool and members.
type LoadBalancerSpec struct {
	Name, Description                  string
	VipPortID, VipSubnetID, VipAddress string
	Provider                           string
	Listeners                          []ListenerGraph
	Tags                               []string
}

// ListenerGraph is a listener created with its load balancer, with its default pool and the pool's members.
// The IDs that link them (LoadBalancerID, ListenerID) are left empty: Octavia makes them.
type ListenerGraph struct {
	Listener ListenerSpec
	Pool     PoolSpec
	Members  []MemberSpec
}

// Listener is an Octavia listener.
type Listener struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	Protocol           string   `json:"protocol"`
	ProtocolPort       int      `json:"protocol_port"`
	DefaultPoolID      string   `json:"default_pool_id"`
	ProvisioningStatus string   `json:"provisioning_status"`
	Tags               []string `json:"tags"`
	// LoadBalancers holds the listener's load balancer.
	LoadBalancers []IDRef `json:"loadbalancers"`
}

// ListenerSpec describes a listener.
type ListenerSpec struct {
	LoadBalancerID string
	Name           string
	Protocol       string
	ProtocolPort   int
	Tags           []string
}

// Pool is an Octavia pool.
type Pool struct {
	ID                 string              `json:"id"`
	Name               string              `json:"name"`
	Protocol           string              `json:"protocol"`
	LBAlgorithm        string              `json:"lb_algorithm"`
	SessionPersistence *SessionPersistence `json:"session_persistence"`
	ListenerID         string              `json:"-"`
	Listeners          []struct {
		ID string `json:"id"`
	} `json:"listeners"`
	// MonitorID is the pool's health monitor, "" when it has none.
	MonitorID          string   `json:"healthmonitor_id"`
	ProvisioningStatus string   `json:"provisioning_status"`
	Tags               []string `json:"tags"`
	// LoadBalancers holds the pool's load balancer.
	LoadBalancers []IDRef `json:"loadbalancers"`
}

// MonitorSpec describes a pool's health monitor: Type (TCP, UDP-CONNECT, SCTP) probes every member each
// Delay seconds, waiting Timeout seconds for an answer; MaxRetriesDown failures take a member out of the
// rotation, MaxRetries successes bring it back.
type MonitorSpec struct {
	PoolID                                     string
	Name, Type                                 string
	Delay, Timeout, MaxRetries, MaxRetriesDown int
	Tags                                       []string
}

// MonitorStatus is a health monitor as a load balancer's status tree shows it.
type MonitorStatus struct {
	ID                 string `json:"id"`
	Type               string `json:"type"`
	ProvisioningStatus string `json:"provisioning_status"`
	OperatingStatus    string `json:"operating_status"`
}

// StatusTree is what one read of a load balancer's status tree tells, by pool ID: the members of every pool
// on a listener (without their SubnetID) and the pools' health monitors.
type StatusTree struct {
	// Listeners are the IDs of the load balancer's listeners.
	Listeners []string
	// Members and Monitors are by pool ID, for every pool on a listener (a pool without a listener is not in
	// the tree).
	Members  map[string][]Member
	Monitors map[string]MonitorStatus
}

// IDRef names an object by its ID, as Octavia lists an object's parents and children.
type IDRef struct {
	ID string `json:"id"`
}

// SessionPersistence is a pool's stickiness.
type SessionPersistence struct {
	Type string `json:"type"`
}

// PoolSpec describes a pool attached to one listener.
type PoolSpec struct {
	ListenerID  string
	Name        string
	Protocol    string
	LBAlgorithm string
	SourceIP    bool
	Tags        []string
}

// Member is a pool member.
type Member struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Address            string `json:"address"`
	ProtocolPort       int    `json:"protocol_port"`
	SubnetID           string `json:"subnet_id"`
	ProvisioningStatus string `json:"provisioning_status"`
}

// MemberSpec is a desired member.
type MemberSpec struct {
	Name         string
	Address      string
	ProtocolPort int
	SubnetID     string
}

// Time reads OpenStack timestamps, which come with or without a zone (Octavia leaves it out; it is UTC).
type Time struct{ time.Time }

// UnmarshalJSON accepts RFC 3339 and zone-less timestamps.
func (t *Time) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" || s == `""` {
		return nil
	}
	s = s[1 : len(s)-1]
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05"} {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v.UTC()
			return nil
		}
	}
	return fmt.Errorf("unreadable timestamp %s", b)
}

// SecurityGroup is a Neutron security group.
type SecurityGroup struct {
	ID          string              `json:"id"`
	Name        string              `json:"name"`
	ProjectID   string              `json:"project_id"`
	Description string              `json:"description"`
	Rules       []SecurityGroupRule `json:"security_group_rules"`
	Tags        []string            `json:"tags"`
}

// SecurityGroupRule is one rule of a security group; empty fields match anything.
type SecurityGroupRule struct {
	ID              string `json:"id,omitempty"`
	SecurityGroupID string `json:"security_group_id"`
	Direction       string `json:"direction"` // ingress or egress
	EtherType       string `json:"ethertype"` // IPv4 or IPv6
	Protocol        string `json:"protocol,omitempty"`
	PortRangeMin    int    `json:"port_range_min,omitempty"`
	PortRangeMax    int    `json:"port_range_max,omitempty"`
	RemoteIPPrefix  string `json:"remote_ip_prefix,omitempty"`
	RemoteGroupID   string `json:"remote_group_id,omitempty"`
	Description     string `json:"description,omitempty"`
}

// SecurityGroupSpec describes a security group to create.
type SecurityGroupSpec struct {
	Name        string
	Description string
}
