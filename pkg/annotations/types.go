package annotations

// FixedIP is one address of a port.
type FixedIP struct {
	SubnetID  string `json:"subnet_id"`
	IPAddress string `json:"ip_address"`
}

// Port is the value of kuryr.org/neutron-port: the pod's port as Neutron returned it.
type Port struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	NetworkID      string    `json:"network_id"`
	TenantID       string    `json:"tenant_id"`
	ProjectID      string    `json:"project_id"`
	MACAddress     string    `json:"mac_address"`
	FixedIPs       []FixedIP `json:"fixed_ips"`
	Status         string    `json:"status"`
	AdminStateUp   bool      `json:"admin_state_up"`
	DeviceOwner    string    `json:"device_owner"`
	DeviceID       string    `json:"device_id"`
	SecurityGroups []string  `json:"security_groups"`

	// Fields beyond the seed format, for the CNI plugin.

	// HostID is the node the port is bound to (Neutron's binding:host_id); the plugin plugs it only there.
	HostID string `json:"binding:host_id,omitempty"`
	// VIFType is Neutron's binding:vif_type ("ovs" under ML2/OVN).
	VIFType string `json:"binding:vif_type,omitempty"`
	// VIFDetails is Neutron's binding:vif_details.
	VIFDetails map[string]any `json:"binding:vif_details,omitempty"`
	// MTU is the MTU of the port's network; the plugin sets it on both ends of the veth.
	MTU int `json:"mtu,omitempty"`
	// PodUID is the UID of the pod the port was made for; the plugin refuses a port announced for another pod.
	PodUID string `json:"pod_uid,omitempty"`
	// Nested is set when the pod's node is a nested node (a Nova VM): the port is a VLAN subport of the VM
	// port's trunk, not bound to the node (HostID is empty), and the node gives the pod an interface that
	// carries VLAN on the VM's NIC.
	Nested *Nested `json:"nested,omitempty"`
}

// Nested says where a nested pod's port is on its node VM's trunk.
type Nested struct {
	// Node is the pod's node, the only one that plugs the port.
	Node string `json:"node"`
	// VLAN is the subport's segmentation ID on the trunk (1-4094, unique on the trunk).
	VLAN         int    `json:"vlan"`
	TrunkID      string `json:"trunk_id"`
	ParentPortID string `json:"parent_port_id"`
}

// HostRoute is one static route of a subnet.
type HostRoute struct {
	Destination string `json:"destination"`
	NextHop     string `json:"nexthop"`
}

// AllocationPool is a range of addresses.
type AllocationPool struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// Subnet is the value of kuryr.org/neutron-subnet on pods and namespaces.
type Subnet struct {
	ID              string           `json:"id"`
	Name            string           `json:"name"`
	NetworkID       string           `json:"network_id"`
	TenantID        string           `json:"tenant_id"`
	CIDR            string           `json:"cidr"`
	GatewayIP       string           `json:"gateway_ip"`
	IPVersion       int              `json:"ip_version"`
	AllocationPools []AllocationPool `json:"allocation_pools"`
	DNSNameservers  []string         `json:"dns_nameservers"`
	HostRoutes      []HostRoute      `json:"host_routes"`
	EnableDHCP      bool             `json:"enable_dhcp"`
	SubnetPoolID    string           `json:"subnetpool_id"`
}

// Network is the value of kuryr.org/neutron-network on namespaces.
type Network struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	TenantID  string `json:"tenant_id"`
	Status    string `json:"status"`
	RouterID  string `json:"router_id,omitempty"`
	ProjectID string `json:"project_id"`
}

// VIP is the value of kuryr.org/neutron-vip on services.
type VIP struct {
	Address            string `json:"address"`
	PortID             string `json:"port_id"`
	SubnetID           string `json:"subnet_id"`
	LoadBalancerID     string `json:"loadbalancer_id"`
	Name               string `json:"name"`
	ProvisioningStatus string `json:"provisioning_status"`
	FloatingIP         string `json:"floating_ip,omitempty"`
	FloatingIPID       string `json:"floating_ip_id,omitempty"`
}

// Pool is one entry of kuryr.org/neutron-pool on services: a listener, its pool and its members.
type Pool struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Protocol     string   `json:"protocol"`
	ProtocolPort int      `json:"protocol_port"`
	LBMethod     string   `json:"lb_method"`
	ListenerID   string   `json:"listener_id"`
	Members      []Member `json:"members"`
}

// Member is one backend of a pool.
type Member struct {
	Address      string `json:"address"`
	ProtocolPort int    `json:"protocol_port"`
	SubnetID     string `json:"subnet_id"`
}
