package openstack

import "context"

// Resource names Neutron's tag-able collections.
type Resource string

// Neutron resources whose tags Raven writes.
const (
	ResourceNetworks       Resource = "networks"
	ResourceSubnets        Resource = "subnets"
	ResourcePorts          Resource = "ports"
	ResourceRouters        Resource = "routers"
	ResourceSubnetPools    Resource = "subnetpools"
	ResourceFloatingIPs    Resource = "floatingips"
	ResourceSecurityGroups Resource = "security-groups"
)

// Networking is the part of Neutron that Raven uses. Lists return every page. Creates tag nothing, except
// ports whose spec carries tags (Neutron with tag-ports-during-bulk-creation): the caller tags in a second
// call and deals with a failure of that call (see internal/neutron/tagged.go).
type Networking interface {
	// Capabilities tells which optional Neutron extensions are present.
	Capabilities(ctx context.Context) (Capabilities, error)
	// ProjectID is the project of Raven's token, which owns every object Raven makes ("" with a Neutron
	// without Keystone, which has no projects). Lookups of objects that may not carry Raven's tags yet (by
	// the marker in their description, by name) are scoped by it.
	ProjectID() string

	ListNetworks(ctx context.Context, f Filter) ([]Network, error)
	GetNetwork(ctx context.Context, id string) (*Network, error)
	CreateNetwork(ctx context.Context, spec NetworkSpec) (*Network, error)
	DeleteNetwork(ctx context.Context, id string) error

	ListSubnets(ctx context.Context, f Filter) ([]Subnet, error)
	CreateSubnet(ctx context.Context, spec SubnetSpec) (*Subnet, error)
	DeleteSubnet(ctx context.Context, id string) error

	ListSubnetPools(ctx context.Context, f Filter) ([]SubnetPool, error)
	CreateSubnetPool(ctx context.Context, spec SubnetPoolSpec) (*SubnetPool, error)
	DeleteSubnetPool(ctx context.Context, id string) error

	ListRouters(ctx context.Context, f Filter) ([]Router, error)
	CreateRouter(ctx context.Context, spec RouterSpec) (*Router, error)
	DeleteRouter(ctx context.Context, id string) error
	AddRouterInterface(ctx context.Context, routerID, subnetID string) error
	RemoveRouterInterface(ctx context.Context, routerID, subnetID string) error

	ListPorts(ctx context.Context, f Filter) ([]Port, error)
	// EachPortPage lists ports as ListPorts does, but hands each page to fn as it arrives: a caller that keeps
	// less than the whole of each port never holds the whole decoded listing. fn must not keep the slice.
	EachPortPage(ctx context.Context, f Filter, fn func([]Port)) error
	GetPort(ctx context.Context, id string) (*Port, error)
	CreatePort(ctx context.Context, spec PortSpec) (*Port, error)
	// CreatePorts creates many ports in one bulk request; Neutron creates all or none.
	CreatePorts(ctx context.Context, specs []PortSpec) ([]Port, error)
	UpdatePort(ctx context.Context, id string, u PortUpdate) (*Port, error)
	DeletePort(ctx context.Context, id string) error

	ListFloatingIPs(ctx context.Context, f Filter) ([]FloatingIP, error)
	CreateFloatingIP(ctx context.Context, spec FloatingIPSpec) (*FloatingIP, error)
	UpdateFloatingIPPort(ctx context.Context, id, portID string) (*FloatingIP, error)
	DeleteFloatingIP(ctx context.Context, id string) error

	ListSecurityGroups(ctx context.Context, f Filter) ([]SecurityGroup, error)
	// CreateSecurityGroup makes a group; Neutron gives it egress rules that allow everything.
	CreateSecurityGroup(ctx context.Context, spec SecurityGroupSpec) (*SecurityGroup, error)
	DeleteSecurityGroup(ctx context.Context, id string) error
	// UpdateSecurityGroup renames a group and sets its description.
	UpdateSecurityGroup(ctx context.Context, id string, spec SecurityGroupSpec) error
	CreateSecurityGroupRule(ctx context.Context, r SecurityGroupRule) (*SecurityGroupRule, error)
	// CreateSecurityGroupRules creates rules in one request (Neutron's bulk create: all or none).
	CreateSecurityGroupRules(ctx context.Context, rules []SecurityGroupRule) ([]SecurityGroupRule, error)
	DeleteSecurityGroupRule(ctx context.Context, id string) error

	// ReplaceTags sets the tags of one object (Neutron cannot tag networks, subnets, subnet pools, routers and
	// floating IPs in their create request).
	ReplaceTags(ctx context.Context, r Resource, id string, tags []string) error

	// Nested nodes (Nova VMs as Kubernetes nodes): a pod's port is a VLAN subport of the VM port's trunk.

	// PortsWithAddress lists the ports that hold ip on the subnet (a node VM's port, by the node's address),
	// or every port on the subnet when ip is empty.
	PortsWithAddress(ctx context.Context, subnetID, ip string) ([]Port, error)
	// ListTrunks lists the trunks whose parent is one of the ports (none or one each). It refuses (ErrUnscoped)
	// to list without a port, or with an empty one: that would be every trunk of the cloud.
	ListTrunks(ctx context.Context, parentPortIDs ...string) ([]Trunk, error)
	// ListProjectTrunks lists the trunks of one project (Raven's: the node VMs' trunks it attaches to). It
	// refuses (ErrUnscoped) an empty project.
	ListProjectTrunks(ctx context.Context, projectID string) ([]Trunk, error)
	GetTrunk(ctx context.Context, id string) (*Trunk, error)
	// AddSubports adds ports to a trunk; Neutron refuses (409) a segmentation ID the trunk already carries
	// and a port that is a subport already.
	AddSubports(ctx context.Context, trunkID string, subs []Subport) error
	RemoveSubports(ctx context.Context, trunkID string, portIDs []string) error
}

// Capabilities are the optional Neutron extensions Raven adapts to.
type Capabilities struct {
	// TagsOnPortCreate: ports accept "tags" in their create request (tag-ports-during-bulk-creation).
	TagsOnPortCreate bool
}

// LoadBalancing is the part of Octavia that Raven uses. Lists return every page.
type LoadBalancing interface {
	ListLoadBalancers(ctx context.Context, tags []string) ([]LoadBalancer, error)
	GetLoadBalancer(ctx context.Context, id string) (*LoadBalancer, error)
	CreateLoadBalancer(ctx context.Context, spec LoadBalancerSpec) (*LoadBalancer, error)
	// DeleteLoadBalancer removes the load balancer with its listeners, pools and members.
	DeleteLoadBalancer(ctx context.Context, id string) error

	ListListeners(ctx context.Context, loadBalancerID string) ([]Listener, error)
	// ListTaggedListeners lists the listeners of every load balancer that carry all of tags.
	ListTaggedListeners(ctx context.Context, tags []string) ([]Listener, error)
	CreateListener(ctx context.Context, spec ListenerSpec) (*Listener, error)
	DeleteListener(ctx context.Context, id string) error

	ListPools(ctx context.Context, loadBalancerID string) ([]Pool, error)
	// ListTaggedPools lists the pools of every load balancer that carry all of tags.
	ListTaggedPools(ctx context.Context, tags []string) ([]Pool, error)
	CreatePool(ctx context.Context, spec PoolSpec) (*Pool, error)
	DeletePool(ctx context.Context, id string) error

	ListMembers(ctx context.Context, poolID string) ([]Member, error)
	// LoadBalancerStatus reads the members and health monitors of every pool of a load balancer in one
	// request (the status tree).
	LoadBalancerStatus(ctx context.Context, loadBalancerID string) (StatusTree, error)
	// ReplaceMembers sets the whole member list of a pool in one request.
	ReplaceMembers(ctx context.Context, poolID string, members []MemberSpec) error
	// CreateMember adds one member to a pool.
	CreateMember(ctx context.Context, poolID string, member MemberSpec) error
	// DeleteMember removes one member of a pool.
	DeleteMember(ctx context.Context, poolID, memberID string) error

	CreateMonitor(ctx context.Context, spec MonitorSpec) error
	DeleteMonitor(ctx context.Context, id string) error
}
