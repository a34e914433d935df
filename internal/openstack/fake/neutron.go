package fake

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

// Neutron is an in-memory openstack.Networking.
type Neutron struct {
	mu      sync.Mutex
	seq     int
	Caps    openstack.Capabilities
	Nets    map[string]*openstack.Network
	Subnets map[string]*openstack.Subnet
	Pools   map[string]*openstack.SubnetPool
	Routers map[string]*openstack.Router
	Ports   map[string]*openstack.Port
	FIPs    map[string]*openstack.FloatingIP
	SGs     map[string]*openstack.SecurityGroup
	// Trunks are the VLAN-aware VMs' trunks, by ID (AddTrunk makes one).
	Trunks map[string]*openstack.Trunk
	// Interfaces maps router ID to attached subnet IDs.
	Interfaces map[string][]string
	// Calls counts calls by method name (read it with Called while Raven runs); writes counts the ones that
	// change something (Wrote reads it).
	Calls  map[string]int
	writes int
	// Faults makes the named method fail with the error, Times times (forever when Times < 0).
	Faults map[string]*Fault
	// Now is the clock for created_at.
	Now func() time.Time
	// DropTags makes this many port creates ignore the tags of their request (as a create Neutron retried
	// after a database deadlock was seen to do).
	DropTags int
	// Delay makes every write take this long, one at a time, as a busy Neutron does.
	Delay time.Duration
	// NoDefaultEgress gives new security groups no rule, as a cloud whose default security group rules
	// (Neutron 2023.2 and later: an admin edits them) hold no egress rule; else they get Neutron's legacy two
	// egress rules, IPv4 and IPv6 to anywhere.
	NoDefaultEgress bool
	// UUIDs makes new IDs UUID-shaped (8-4-4-4-12 hex digits, as Neutron's are, so that openstack.Operation
	// reads them as IDs); otherwise they read prefix-NNNN-0000-0000-0000-000000000000.
	UUIDs bool
	// Project is the project of Raven's token (ProjectID), which every object the fake creates belongs to;
	// "" is a Neutron without Keystone, whose objects belong to no project.
	Project string
	// nextPoolPrefix hands out subnet pool prefixes.
	nextPoolPrefix map[string]int
	// ix is nil until Index.
	ix *index
	// lists records every listing (Unscoped reads it).
	lists listings
}

// Fault is an injected failure.
type Fault struct {
	Err   error
	Times int
	// Applied makes the call take effect and still fail, as a 500 after Neutron committed or a client
	// timeout after Neutron acted do. UpdatePort honours it.
	Applied bool
}

// NewNeutron returns an empty Neutron with an external network "public".
func NewNeutron() *Neutron {
	n := &Neutron{
		Caps: openstack.Capabilities{TagsOnPortCreate: true},
		Nets: map[string]*openstack.Network{}, Subnets: map[string]*openstack.Subnet{}, Pools: map[string]*openstack.SubnetPool{},
		Routers: map[string]*openstack.Router{}, Ports: map[string]*openstack.Port{}, FIPs: map[string]*openstack.FloatingIP{}, SGs: map[string]*openstack.SecurityGroup{},
		Interfaces: map[string][]string{}, Calls: map[string]int{}, Faults: map[string]*Fault{}, Now: time.Now,
		nextPoolPrefix: map[string]int{},
	}
	n.Nets["public"] = &openstack.Network{ID: "public", Name: "public", External: true, Status: "ACTIVE"}
	return n
}

// Lock and Unlock guard the exported maps for tests that read them while Raven runs.
func (n *Neutron) Lock() { n.mu.Lock() }

// Unlock releases Lock.
func (n *Neutron) Unlock() { n.mu.Unlock() }

// Fail makes method fail times times with err.
func (n *Neutron) Fail(method string, times int, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.Faults[method] = &Fault{Err: err, Times: times}
}

// FailApplied makes the next times calls of method take effect and then return err (see Fault.Applied).
func (n *Neutron) FailApplied(method string, times int, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.Faults[method] = &Fault{Err: err, Times: times, Applied: true}
}

// Called is how many calls of the methods n has had, read under n's lock: a test may read it while Raven's
// background workers call n.
func (n *Neutron) Called(methods ...string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return called(n.Calls, methods)
}

// Wrote is the number of calls so far that changed something, read under the lock.
func (n *Neutron) Wrote() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.writes
}

func called(calls map[string]int, methods []string) int {
	total := 0
	for _, m := range methods {
		total += calls[m]
	}
	return total
}

func (n *Neutron) enter(method string, write bool) error {
	n.Calls[method]++
	if write {
		n.writes++
		time.Sleep(n.Delay)
	}
	if f := n.Faults[method]; f != nil && f.Times != 0 {
		if f.Times > 0 {
			f.Times--
		}
		return f.Err
	}
	return nil
}

func (n *Neutron) id(prefix string) string {
	n.seq++
	return newID(n.UUIDs, prefix, n.seq)
}

func notFound(what string) error {
	return openstack.NewError("fake "+what, openstack.KindNotFound, 404, what+" not found")
}

// obj is what a filter can look at.
type obj struct {
	tags                                             []string
	id, network, device, owner, name, descr, project string
	external                                         bool
}

// match says o passes every part of f that is set.
func match(f openstack.Filter, o obj) bool {
	return matchTags(f, o.tags) && matchFields(f, o)
}

// matchTags: o carries every tag of f.Tags and none of f.NotTagsAny.
func matchTags(f openstack.Filter, tags []string) bool {
	for _, t := range f.Tags {
		if !slices.Contains(tags, t) {
			return false
		}
	}
	for _, t := range f.NotTagsAny {
		if slices.Contains(tags, t) {
			return false
		}
	}
	return true
}

// matchFields: o has every field value f names.
func matchFields(f openstack.Filter, o obj) bool {
	if f.NetworkIDs != nil && !slices.Contains(f.NetworkIDs, o.network) || f.External && !o.external {
		return false
	}
	for _, c := range [][2]string{{f.DeviceOwner, o.owner}, {f.ID, o.id}, {f.ProjectID, o.project}, {f.NetworkID, o.network},
		{f.DeviceID, o.device}, {f.Name, o.name}, {f.Description, o.descr}} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	return true
}

// ProjectID implements openstack.Networking.
func (n *Neutron) ProjectID() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Project
}

// Capabilities implements openstack.Networking.
func (n *Neutron) Capabilities(context.Context) (openstack.Capabilities, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Caps, n.enter("Capabilities", false)
}

// ListNetworks implements openstack.Networking.
func (n *Neutron) ListNetworks(_ context.Context, f openstack.Filter) ([]openstack.Network, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listed("ListNetworks", f)
	if err := n.enter("ListNetworks", false); err != nil {
		return nil, err
	}
	var out []openstack.Network
	for _, x := range n.Nets {
		if match(f, obj{tags: x.Tags, name: x.Name, descr: x.Description, project: x.ProjectID, external: x.External}) {
			out = append(out, *x)
		}
	}
	return out, nil
}

// GetNetwork implements openstack.Networking.
func (n *Neutron) GetNetwork(_ context.Context, id string) (*openstack.Network, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("GetNetwork", false); err != nil {
		return nil, err
	}
	if x, ok := n.Nets[id]; ok {
		c := *x
		return &c, nil
	}
	return nil, notFound("network")
}

// CreateNetwork implements openstack.Networking.
func (n *Neutron) CreateNetwork(_ context.Context, s openstack.NetworkSpec) (*openstack.Network, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreateNetwork", true); err != nil {
		return nil, err
	}
	x := &openstack.Network{ID: n.id("net"), ProjectID: n.Project, Name: s.Name, Description: s.Description, Status: "ACTIVE", MTU: 1442, CreatedAt: n.Now()}
	n.Nets[x.ID] = x
	c := *x
	return &c, nil
}

// DeleteNetwork implements openstack.Networking: it fails with a conflict while ports remain.
func (n *Neutron) DeleteNetwork(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("DeleteNetwork", true); err != nil {
		return err
	}
	if _, ok := n.Nets[id]; !ok {
		return notFound("network")
	}
	if n.networkInUseLocked(id) {
		return openstack.NewError("fake network delete", openstack.KindConflict, 409, "NetworkInUse: Unable to complete operation on network "+id+". There are one or more ports still in use on the network.")
	}
	for sid, s := range n.Subnets {
		if s.NetworkID == id {
			delete(n.Subnets, sid)
			n.ix.removeSubnet(s)
			n.ix.untag(openstack.ResourceSubnets, sid, s.Tags)
		}
	}
	n.ix.untag(openstack.ResourceNetworks, id, n.Nets[id].Tags)
	delete(n.Nets, id)
	return nil
}

// ListSubnets implements openstack.Networking.
func (n *Neutron) ListSubnets(_ context.Context, f openstack.Filter) ([]openstack.Subnet, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listed("ListSubnets", f)
	if err := n.enter("ListSubnets", false); err != nil {
		return nil, err
	}
	var out []openstack.Subnet
	for _, x := range n.Subnets {
		if match(f, obj{tags: x.Tags, network: x.NetworkID, name: x.Name, descr: x.Description, project: x.ProjectID}) {
			out = append(out, *x)
		}
	}
	return out, nil
}

// CreateSubnet implements openstack.Networking, allocating from a subnet pool when asked.
func (n *Neutron) CreateSubnet(_ context.Context, s openstack.SubnetSpec) (*openstack.Subnet, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreateSubnet", true); err != nil {
		return nil, err
	}
	cidr := s.CIDR
	if s.SubnetPoolID != "" {
		pool, ok := n.Pools[s.SubnetPoolID]
		if !ok {
			return nil, notFound("subnetpool")
		}
		base := netip.MustParsePrefix(pool.Prefixes[0])
		if s.PrefixLength < base.Bits() || s.PrefixLength > 32 {
			return nil, openstack.NewError("fake subnet create", openstack.KindBadRequest, 400, fmt.Sprintf("Invalid input: prefixlen %d for subnet pool %s", s.PrefixLength, pool.ID))
		}
		i := n.nextPoolPrefix[pool.ID]
		if s.PrefixLength-base.Bits() < 31 && i >= 1<<(s.PrefixLength-base.Bits()) {
			return nil, openstack.NewError("fake subnet create", openstack.KindExhausted, 409, "SubnetAllocationError")
		}
		n.nextPoolPrefix[pool.ID] = i + 1
		a := base.Addr().As4()
		v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		v += uint32(i) << (32 - s.PrefixLength)
		cidr = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), s.PrefixLength).String()
	}
	p := netip.MustParsePrefix(cidr)
	gw := p.Addr().Next()
	x := &openstack.Subnet{ID: n.id("sub"), ProjectID: n.Project, Name: s.Name, NetworkID: s.NetworkID, CIDR: cidr, GatewayIP: gw.String(), IPVersion: 4,
		AllocationPools: []openstack.AllocationPool{{Start: gw.Next().String(), End: lastAddr(p).Prev().String()}},
		SubnetPoolID:    s.SubnetPoolID, Description: s.Description, EnableDHCP: s.EnableDHCP, CreatedAt: n.Now()}
	if s.GatewayIP != "" {
		x.GatewayIP = s.GatewayIP
	}
	if n.ix != nil && len(s.AllocationPools) > 0 {
		x.AllocationPools = slices.Clone(s.AllocationPools)
	}
	n.Subnets[x.ID] = x
	n.ix.addSubnet(x)
	if net := n.Nets[x.NetworkID]; n.ix != nil && net != nil {
		net.Subnets = append(slices.Clip(net.Subnets), x.ID)
	}
	c := *x
	return &c, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= (1 << (32 - p.Bits())) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// DeleteSubnet implements openstack.Networking.
func (n *Neutron) DeleteSubnet(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("DeleteSubnet", true); err != nil {
		return err
	}
	x, ok := n.Subnets[id]
	if !ok {
		return notFound("subnet")
	}
	for _, subs := range n.Interfaces {
		if slices.Contains(subs, id) {
			return openstack.NewError("fake subnet delete", openstack.KindConflict, 409, "SubnetInUse")
		}
	}
	delete(n.Subnets, id)
	n.ix.removeSubnet(x)
	n.ix.untag(openstack.ResourceSubnets, id, x.Tags)
	if net := n.Nets[x.NetworkID]; n.ix != nil && net != nil {
		net.Subnets = slices.DeleteFunc(slices.Clone(net.Subnets), func(s string) bool { return s == id })
	}
	return nil
}

// ListSubnetPools implements openstack.Networking.
func (n *Neutron) ListSubnetPools(_ context.Context, f openstack.Filter) ([]openstack.SubnetPool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listed("ListSubnetPools", f)
	if err := n.enter("ListSubnetPools", false); err != nil {
		return nil, err
	}
	var out []openstack.SubnetPool
	for _, x := range n.Pools {
		if match(f, obj{tags: x.Tags, id: x.ID, name: x.Name, descr: x.Description, project: x.ProjectID}) {
			out = append(out, *x)
		}
	}
	return out, nil
}

// CreateSubnetPool implements openstack.Networking.
func (n *Neutron) CreateSubnetPool(_ context.Context, s openstack.SubnetPoolSpec) (*openstack.SubnetPool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreateSubnetPool", true); err != nil {
		return nil, err
	}
	x := &openstack.SubnetPool{ID: n.id("pool"), ProjectID: n.Project, Name: s.Name, Description: s.Description, Prefixes: s.Prefixes}
	n.Pools[x.ID] = x
	c := *x
	return &c, nil
}

// DeleteSubnetPool implements openstack.Networking: it fails with a conflict while subnets use the pool.
func (n *Neutron) DeleteSubnetPool(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("DeleteSubnetPool", true); err != nil {
		return err
	}
	if _, ok := n.Pools[id]; !ok {
		return notFound("subnetpool")
	}
	for _, s := range n.Subnets {
		if s.SubnetPoolID == id {
			return openstack.NewError("fake subnetpool delete", openstack.KindConflict, 409, "SubnetPoolInUse")
		}
	}
	n.ix.untag(openstack.ResourceSubnetPools, id, n.Pools[id].Tags)
	delete(n.Pools, id)
	return nil
}

// ListRouters implements openstack.Networking.
func (n *Neutron) ListRouters(_ context.Context, f openstack.Filter) ([]openstack.Router, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listed("ListRouters", f)
	if err := n.enter("ListRouters", false); err != nil {
		return nil, err
	}
	var out []openstack.Router
	for _, x := range n.Routers {
		if match(f, obj{tags: x.Tags, name: x.Name, descr: x.Description, project: x.ProjectID}) {
			out = append(out, *x)
		}
	}
	return out, nil
}

// CreateRouter implements openstack.Networking.
func (n *Neutron) CreateRouter(_ context.Context, s openstack.RouterSpec) (*openstack.Router, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreateRouter", true); err != nil {
		return nil, err
	}
	x := &openstack.Router{ID: n.id("router"), ProjectID: n.Project, Name: s.Name, Description: s.Description, GatewayNetworkID: s.GatewayNetworkID}
	n.Routers[x.ID] = x
	c := *x
	return &c, nil
}

// DeleteRouter implements openstack.Networking.
func (n *Neutron) DeleteRouter(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("DeleteRouter", true); err != nil {
		return err
	}
	if x, ok := n.Routers[id]; ok {
		n.ix.untag(openstack.ResourceRouters, id, x.Tags)
	}
	delete(n.Routers, id)
	return nil
}

// AddRouterInterface implements openstack.Networking; a second attach is a 400 as in Neutron.
func (n *Neutron) AddRouterInterface(_ context.Context, routerID, subnetID string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("AddRouterInterface", true); err != nil {
		return err
	}
	if err := n.interfaceEndsLocked(routerID, subnetID); err != nil {
		return err
	}
	if slices.Contains(n.Interfaces[routerID], subnetID) {
		return openstack.NewError("fake add interface", openstack.KindBadRequest, 400, "Router already has a port on subnet")
	}
	n.Interfaces[routerID] = append(n.Interfaces[routerID], subnetID)
	return nil
}

// RemoveRouterInterface implements openstack.Networking.
func (n *Neutron) RemoveRouterInterface(_ context.Context, routerID, subnetID string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("RemoveRouterInterface", true); err != nil {
		return err
	}
	if !slices.Contains(n.Interfaces[routerID], subnetID) {
		return notFound("router interface")
	}
	n.Interfaces[routerID] = slices.DeleteFunc(n.Interfaces[routerID], func(s string) bool { return s == subnetID })
	return nil
}

// ListPorts implements openstack.Networking. Router interfaces are listed as ports with the router as device.
func (n *Neutron) ListPorts(_ context.Context, f openstack.Filter) ([]openstack.Port, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listed("ListPorts", f)
	if err := n.enter("ListPorts", false); err != nil {
		return nil, err
	}
	var out []openstack.Port
	for _, x := range n.Ports {
		if match(f, obj{tags: x.Tags, network: x.NetworkID, device: x.DeviceID, owner: x.DeviceOwner, name: x.Name, descr: x.Description, project: x.ProjectID}) {
			out = append(out, *x)
		}
	}
	if f.DeviceID != "" {
		for _, sid := range n.Interfaces[f.DeviceID] {
			out = append(out, openstack.Port{ID: "if-" + sid, DeviceID: f.DeviceID, DeviceOwner: "network:router_interface",
				FixedIPs: []openstack.FixedIP{{SubnetID: sid}}})
		}
	}
	return out, nil
}

// EachPortPage implements openstack.Networking: the ports ListPorts returns, in pages of openstack.PortPageSize.
func (n *Neutron) EachPortPage(ctx context.Context, f openstack.Filter, fn func([]openstack.Port)) error {
	all, err := n.ListPorts(ctx, f)
	if err != nil {
		return err
	}
	for page := range slices.Chunk(all, openstack.PortPageSize) {
		fn(page)
	}
	return nil
}

// GetPort implements openstack.Networking.
func (n *Neutron) GetPort(_ context.Context, id string) (*openstack.Port, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("GetPort", false); err != nil {
		return nil, err
	}
	if x, ok := n.Ports[id]; ok {
		c := *x
		return &c, nil
	}
	return nil, notFound("port")
}

// freeIPLocked returns the first address of the subnet's first allocation pool that no port holds, or "".
func (n *Neutron) freeIPLocked(sub *openstack.Subnet) string {
	if n.ix != nil {
		if ip, ok := n.ix.alloc[sub.ID].allocate(); ok {
			return ip.String()
		}
		return ""
	}
	used := map[string]bool{}
	for _, p := range n.Ports {
		for _, f := range p.FixedIPs {
			used[f.IPAddress] = true
		}
	}
	pool := sub.AllocationPools[0]
	end := netip.MustParseAddr(pool.End)
	for a := netip.MustParseAddr(pool.Start); a.Compare(end) <= 0; a = a.Next() {
		if !used[a.String()] {
			return a.String()
		}
	}
	return ""
}

func (n *Neutron) createPortLocked(s openstack.PortSpec) (*openstack.Port, error) {
	if _, ok := n.Nets[s.NetworkID]; !ok {
		return nil, notFound("network")
	}
	sub, err := n.portSubnetLocked(s)
	if err != nil {
		return nil, err
	}
	if err := n.addressTakenLocked(s); err != nil {
		return nil, err
	}
	var ips []openstack.FixedIP
	if sub != nil {
		ip := s.IPAddress
		if ip == "" {
			ip = n.freeIPLocked(sub)
			if ip == "" {
				return nil, openstack.NewError("fake port create", openstack.KindExhausted, 409, "IpAddressGenerationFailure")
			}
		}
		ips = []openstack.FixedIP{{SubnetID: sub.ID, IPAddress: ip}}
	}
	n.seq++
	x := &openstack.Port{ID: n.id("port"), ProjectID: n.Project, Name: s.Name, NetworkID: s.NetworkID, MACAddress: fmt.Sprintf("fa:16:3e:%02x:%02x:%02x", n.seq>>16&0xff, n.seq>>8&0xff, n.seq&0xff),
		FixedIPs: ips, Status: "DOWN", AdminStateUp: true, DeviceOwner: s.DeviceOwner, DeviceID: s.DeviceID, Description: s.Description,
		SecurityGroups: []string{"default"}, CreatedAt: n.Now()}
	if s.MACAddress != "" {
		x.MACAddress = s.MACAddress
	}
	if s.SecurityGroups != nil {
		x.SecurityGroups = slices.Clone(s.SecurityGroups)
	}
	bind(x, s.HostID)
	n.ix.compact(x, n.Nets[s.NetworkID].ID)
	if n.Caps.TagsOnPortCreate && n.DropTags == 0 {
		x.Tags = slices.Clone(s.Tags)
	} else if n.DropTags > 0 {
		n.DropTags--
	}
	n.Ports[x.ID] = x
	n.ix.addPort(x)
	c := *x
	return &c, nil
}

// CreatePort implements openstack.Networking.
func (n *Neutron) CreatePort(_ context.Context, s openstack.PortSpec) (*openstack.Port, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreatePort", true); err != nil {
		return nil, err
	}
	return n.createPortLocked(s)
}

// CreatePorts implements openstack.Networking: all or nothing.
func (n *Neutron) CreatePorts(_ context.Context, specs []openstack.PortSpec) ([]openstack.Port, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreatePorts", true); err != nil {
		return nil, err
	}
	var out []openstack.Port
	for _, s := range specs {
		p, err := n.createPortLocked(s)
		if err != nil {
			for _, made := range out {
				n.dropPortLocked(made.ID)
			}
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

// UpdatePort implements openstack.Networking.
func (n *Neutron) UpdatePort(_ context.Context, id string, u openstack.PortUpdate) (*openstack.Port, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	applied := n.Faults["UpdatePort"] != nil && n.Faults["UpdatePort"].Applied
	fault := n.enter("UpdatePort", true)
	if fault != nil && !applied {
		return nil, fault
	}
	x, ok := n.Ports[id]
	if !ok {
		return nil, notFound("port")
	}
	n.ix.unfield(x)
	defer n.ix.field(x)
	if u.Name != nil {
		x.Name = *u.Name
	}
	if u.DeviceID != nil {
		x.DeviceID = *u.DeviceID
	}
	if u.HostID != nil {
		bind(x, *u.HostID)
		n.ix.compact(x, x.NetworkID)
	}
	if u.SecurityGroups != nil {
		x.SecurityGroups = slices.Clone(*u.SecurityGroups)
	}
	x.UpdatedAt = n.Now()
	if fault != nil {
		return nil, fault
	}
	c := *x
	return &c, nil
}

// bind binds a port to a host as ML2/OVN does: vif_type ovs on a host, unbound without one.
func bind(p *openstack.Port, host string) {
	p.HostID = host
	if host == "" {
		p.VIFType, p.VIFDetails = "unbound", nil
		return
	}
	p.VIFType, p.VIFDetails = "ovs", map[string]any{"port_filter": true, "connectivity": "l2"}
}

// DeletePort implements openstack.Networking.
func (n *Neutron) DeletePort(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("DeletePort", true); err != nil {
		return err
	}
	if _, ok := n.Ports[id]; !ok {
		return notFound("port")
	}
	if t := n.subportOf(id); t != nil { // Neutron's PortInUseAsSubPort
		return conflict("Port " + id + " is currently a subport of trunk " + t.ID)
	}
	n.dropPortLocked(id)
	return nil
}

// ListFloatingIPs implements openstack.Networking.
func (n *Neutron) ListFloatingIPs(_ context.Context, f openstack.Filter) ([]openstack.FloatingIP, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listed("ListFloatingIPs", f)
	if err := n.enter("ListFloatingIPs", false); err != nil {
		return nil, err
	}
	var out []openstack.FloatingIP
	for _, x := range n.FIPs {
		if match(f, obj{tags: x.Tags, descr: x.Description, project: x.ProjectID}) {
			out = append(out, *x)
		}
	}
	return out, nil
}

// CreateFloatingIP implements openstack.Networking.
func (n *Neutron) CreateFloatingIP(_ context.Context, s openstack.FloatingIPSpec) (*openstack.FloatingIP, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreateFloatingIP", true); err != nil {
		return nil, err
	}
	for _, f := range n.FIPs {
		if s.PortID != "" && f.PortID == s.PortID {
			return nil, openstack.NewError("fake floatingip create", openstack.KindConflict, 409, "FloatingIPPortAlreadyAssociated")
		}
	}
	addr, err := n.floatingAddressLocked(s)
	if err != nil {
		return nil, err
	}
	x := &openstack.FloatingIP{ID: n.id("fip"), ProjectID: n.Project, FloatingIP: addr, FloatingNetworkID: s.FloatingNetworkID, PortID: s.PortID,
		Description: s.Description, CreatedAt: n.Now()}
	if p, ok := n.Ports[s.PortID]; ok && len(p.FixedIPs) > 0 {
		x.FixedIP = p.FixedIPs[0].IPAddress
	}
	n.FIPs[x.ID] = x
	c := *x
	return &c, nil
}

// UpdateFloatingIPPort implements openstack.Networking.
func (n *Neutron) UpdateFloatingIPPort(_ context.Context, id, portID string) (*openstack.FloatingIP, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("UpdateFloatingIPPort", true); err != nil {
		return nil, err
	}
	x, ok := n.FIPs[id]
	if !ok {
		return nil, notFound("floatingip")
	}
	if err := n.associateLocked(x, portID); err != nil {
		return nil, err
	}
	x.PortID = portID
	c := *x
	return &c, nil
}

// DeleteFloatingIP implements openstack.Networking.
func (n *Neutron) DeleteFloatingIP(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("DeleteFloatingIP", true); err != nil {
		return err
	}
	x, ok := n.FIPs[id]
	if !ok {
		return notFound("floatingip")
	}
	delete(n.FIPs, id)
	n.ix.untag(openstack.ResourceFloatingIPs, id, x.Tags)
	n.releaseFloatingLocked(x)
	return nil
}

// ReplaceTags implements openstack.Networking.
func (n *Neutron) ReplaceTags(_ context.Context, r openstack.Resource, id string, tags []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ReplaceTags", true); err != nil {
		return err
	}
	t := n.tagsOf(r, id)
	if t == nil {
		return notFound(string(r))
	}
	var port *openstack.Port // reindexed by its new tags
	if r == openstack.ResourcePorts {
		port = n.Ports[id]
	}
	n.ix.unfield(port)
	n.ix.retag(r, id, *t, tags)
	*t = slices.Clone(tags)
	n.ix.field(port)
	return nil
}

// tagsOf returns the tags of the object of kind r with this ID, or nil when there is none. n.mu is held.
func (n *Neutron) tagsOf(r openstack.Resource, id string) *[]string {
	switch r {
	case openstack.ResourcePorts:
		if x, ok := n.Ports[id]; ok {
			return &x.Tags
		}
	case openstack.ResourceNetworks:
		if x, ok := n.Nets[id]; ok {
			return &x.Tags
		}
	case openstack.ResourceSubnets:
		if x, ok := n.Subnets[id]; ok {
			return &x.Tags
		}
	case openstack.ResourceSubnetPools:
		if x, ok := n.Pools[id]; ok {
			return &x.Tags
		}
	case openstack.ResourceRouters:
		if x, ok := n.Routers[id]; ok {
			return &x.Tags
		}
	case openstack.ResourceFloatingIPs:
		if x, ok := n.FIPs[id]; ok {
			return &x.Tags
		}
	case openstack.ResourceSecurityGroups:
		if x, ok := n.SGs[id]; ok {
			return &x.Tags
		}
	}
	return nil
}

// ListSecurityGroups implements openstack.Networking.
func (n *Neutron) ListSecurityGroups(_ context.Context, f openstack.Filter) ([]openstack.SecurityGroup, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listed("ListSecurityGroups", f)
	if err := n.enter("ListSecurityGroups", false); err != nil {
		return nil, err
	}
	var out []openstack.SecurityGroup
	for _, x := range n.SGs {
		if match(f, obj{tags: x.Tags, name: x.Name, descr: x.Description, project: x.ProjectID}) {
			c := *x
			c.Rules = slices.Clone(x.Rules)
			out = append(out, c)
		}
	}
	return out, nil
}

// CreateSecurityGroup implements openstack.Networking: the group starts with Neutron's two egress rules.
func (n *Neutron) CreateSecurityGroup(_ context.Context, s openstack.SecurityGroupSpec) (*openstack.SecurityGroup, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreateSecurityGroup", true); err != nil {
		return nil, err
	}
	x := &openstack.SecurityGroup{ID: n.id("sg"), ProjectID: n.Project, Name: s.Name, Description: s.Description}
	for _, et := range []string{"IPv4", "IPv6"} {
		if n.NoDefaultEgress {
			break
		}
		x.Rules = append(x.Rules, openstack.SecurityGroupRule{ID: n.id("rule"), SecurityGroupID: x.ID, Direction: "egress", EtherType: et})
		n.ix.rule(x.Rules[len(x.Rules)-1])
	}
	n.SGs[x.ID] = x
	c := *x
	c.Rules = slices.Clone(x.Rules)
	return &c, nil
}

// UpdateSecurityGroup implements openstack.Networking.
func (n *Neutron) UpdateSecurityGroup(_ context.Context, id string, s openstack.SecurityGroupSpec) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("UpdateSecurityGroup", true); err != nil {
		return err
	}
	sg, ok := n.SGs[id]
	if !ok {
		return notFound("security group")
	}
	sg.Name, sg.Description = s.Name, s.Description
	return nil
}

// DeleteSecurityGroup implements openstack.Networking: it fails with a conflict while a port uses the group.
func (n *Neutron) DeleteSecurityGroup(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("DeleteSecurityGroup", true); err != nil {
		return err
	}
	g, ok := n.SGs[id]
	if !ok {
		return notFound("security group")
	}
	if n.groupInUseLocked(id) {
		return openstack.NewError("fake security group delete", openstack.KindConflict, 409, "SecurityGroupInUse: Security Group "+id+" in use.")
	}
	delete(n.SGs, id)
	n.ix.untag(openstack.ResourceSecurityGroups, id, g.Tags)
	for _, r := range g.Rules {
		n.ix.forgetRule(r.ID)
	}
	return nil
}

// CreateSecurityGroupRule implements openstack.Networking: a rule equal to one the group has is a 409.
func (n *Neutron) CreateSecurityGroupRule(_ context.Context, r openstack.SecurityGroupRule) (*openstack.SecurityGroupRule, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreateSecurityGroupRule", true); err != nil {
		return nil, err
	}
	g, ok := n.SGs[r.SecurityGroupID]
	if !ok {
		return nil, notFound("security group")
	}
	for _, x := range g.Rules {
		x.ID = ""
		if x == r {
			return nil, openstack.NewError("fake security group rule create", openstack.KindConflict, 409, "SecurityGroupRuleExists")
		}
	}
	r.ID = n.id("rule")
	g.Rules = append(g.Rules, r)
	n.ix.rule(r)
	return &r, nil
}

// CreateSecurityGroupRules implements openstack.Networking: the bulk create, all or none.
func (n *Neutron) CreateSecurityGroupRules(_ context.Context, rs []openstack.SecurityGroupRule) ([]openstack.SecurityGroupRule, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreateSecurityGroupRules", true); err != nil {
		return nil, err
	}
	for i, r := range rs {
		g, ok := n.SGs[r.SecurityGroupID]
		if !ok {
			return nil, notFound("security group")
		}
		if r.RemoteGroupID != "" && n.SGs[r.RemoteGroupID] == nil {
			return nil, notFound("remote security group")
		}
		dup := slices.ContainsFunc(rs[:i], func(x openstack.SecurityGroupRule) bool { return x == r })
		for _, x := range g.Rules {
			x.ID = ""
			dup = dup || x == r
		}
		if dup {
			return nil, openstack.NewError("fake security group rule create", openstack.KindConflict, 409, "SecurityGroupRuleExists")
		}
	}
	out := make([]openstack.SecurityGroupRule, 0, len(rs))
	for _, r := range rs {
		r.ID = n.id("rule")
		n.SGs[r.SecurityGroupID].Rules = append(n.SGs[r.SecurityGroupID].Rules, r)
		n.ix.rule(r)
		out = append(out, r)
	}
	return out, nil
}

// DeleteSecurityGroupRule implements openstack.Networking.
func (n *Neutron) DeleteSecurityGroupRule(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("DeleteSecurityGroupRule", true); err != nil {
		return err
	}
	for _, g := range n.groupsOfRuleLocked(id) {
		for i, x := range g.Rules {
			if x.ID == id {
				g.Rules = slices.Delete(g.Rules, i, i+1)
				n.ix.forgetRule(id)
				return nil
			}
		}
	}
	return notFound("security group rule")
}

var _ openstack.Networking = (*Neutron)(nil)
