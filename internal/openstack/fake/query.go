package fake

import (
	"slices"

	"github.com/raven-net/raven/internal/openstack"
)

// Query asks for one page of a list, as a client does over HTTP: Filter, the filters Filter does not carry,
// and the page.
type Query struct {
	openstack.Filter
	// TagsAny keeps the objects with at least one of these tags; NotTags drops those with all of them.
	TagsAny, NotTags []string
	// IPAddresses and SubnetIDs select ports by address (fixed_ips=ip_address=…, fixed_ips=subnet_id=…): one
	// address of the port must be one of IPAddresses (when given) on one of SubnetIDs (when given).
	IPAddresses, SubnetIDs []string
	// PortIDs select trunks by their parent port (any of them).
	PortIDs []string
	// Marker is the ID the page starts after (the first page: ""); Limit is the most objects it holds (0: all).
	Marker string
	Limit  int
}

// Page is one page of a list: objects in ID order, and whether more follow it.
type Page[T any] struct {
	Items []T
	More  bool
}

// matchQuery says whether an object matches q's filters.
func matchQuery(q Query, o obj) bool {
	if !match(q.Filter, o) {
		return false
	}
	if len(q.TagsAny) > 0 && !slices.ContainsFunc(q.TagsAny, func(t string) bool { return slices.Contains(o.tags, t) }) {
		return false
	}
	return len(q.NotTags) == 0 || !HasTags(o.tags, q.NotTags)
}

// matchPort says whether a port matches q, its addresses included.
func matchPort(q Query, p *openstack.Port) bool {
	o := obj{tags: p.Tags, network: p.NetworkID, device: p.DeviceID, owner: p.DeviceOwner, name: p.Name, descr: p.Description, project: p.ProjectID}
	if !matchQuery(q, o) {
		return false
	}
	if len(q.IPAddresses) == 0 && len(q.SubnetIDs) == 0 {
		return true
	}
	return slices.ContainsFunc(p.FixedIPs, func(f openstack.FixedIP) bool {
		return (len(q.IPAddresses) == 0 || slices.Contains(q.IPAddresses, f.IPAddress)) &&
			(len(q.SubnetIDs) == 0 || slices.Contains(q.SubnetIDs, f.SubnetID))
	})
}

// pageOf pages the objects of m that keep selects, by ID, copying those on the page. cand, when not nil, holds
// every object keep may select (the index's set for a tag), in ID order: only those are looked at.
func pageOf[T any](m map[string]*T, cand *ordered, q Query, keep func(*T) bool, cp func(*T) T) Page[T] {
	var ids []string
	if cand != nil {
		for _, id := range cand.after(q.Marker) {
			if x, ok := m[id]; ok && keep(x) {
				ids = append(ids, id)
				if q.Limit > 0 && len(ids) > q.Limit {
					break
				}
			}
		}
	} else {
		for id, x := range m {
			if id > q.Marker && keep(x) {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
	}
	var out Page[T]
	if q.Limit > 0 && len(ids) > q.Limit {
		ids, out.More = ids[:q.Limit], true
	}
	out.Items = make([]T, 0, len(ids))
	for _, id := range ids {
		out.Items = append(out.Items, cp(m[id]))
	}
	return out
}

func shallow[T any](x *T) T { return *x }

// NetworksPage lists a page of networks.
func (n *Neutron) NetworksPage(q Query) (Page[openstack.Network], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListNetworks", false); err != nil {
		return Page[openstack.Network]{}, err
	}
	return pageOf(n.Nets, n.ix.tagged(openstack.ResourceNetworks, q.Tags), q, func(x *openstack.Network) bool {
		return matchQuery(q, obj{tags: x.Tags, name: x.Name, descr: x.Description, project: x.ProjectID, external: x.External})
	}, shallow), nil
}

// SubnetsPage lists a page of subnets.
func (n *Neutron) SubnetsPage(q Query) (Page[openstack.Subnet], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListSubnets", false); err != nil {
		return Page[openstack.Subnet]{}, err
	}
	return pageOf(n.Subnets, n.ix.tagged(openstack.ResourceSubnets, q.Tags), q, func(x *openstack.Subnet) bool {
		return matchQuery(q, obj{tags: x.Tags, network: x.NetworkID, name: x.Name, descr: x.Description, project: x.ProjectID})
	}, shallow), nil
}

// SubnetPoolsPage lists a page of subnet pools.
func (n *Neutron) SubnetPoolsPage(q Query) (Page[openstack.SubnetPool], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListSubnetPools", false); err != nil {
		return Page[openstack.SubnetPool]{}, err
	}
	return pageOf(n.Pools, n.ix.tagged(openstack.ResourceSubnetPools, q.Tags), q, func(x *openstack.SubnetPool) bool {
		return matchQuery(q, obj{tags: x.Tags, id: x.ID, name: x.Name, descr: x.Description, project: x.ProjectID})
	}, shallow), nil
}

// RoutersPage lists a page of routers.
func (n *Neutron) RoutersPage(q Query) (Page[openstack.Router], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListRouters", false); err != nil {
		return Page[openstack.Router]{}, err
	}
	return pageOf(n.Routers, n.ix.tagged(openstack.ResourceRouters, q.Tags), q, func(x *openstack.Router) bool {
		return matchQuery(q, obj{tags: x.Tags, name: x.Name, descr: x.Description, project: x.ProjectID})
	}, shallow), nil
}

// FloatingIPsPage lists a page of floating IPs.
func (n *Neutron) FloatingIPsPage(q Query) (Page[openstack.FloatingIP], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListFloatingIPs", false); err != nil {
		return Page[openstack.FloatingIP]{}, err
	}
	return pageOf(n.FIPs, n.ix.tagged(openstack.ResourceFloatingIPs, q.Tags), q, func(x *openstack.FloatingIP) bool {
		return matchQuery(q, obj{tags: x.Tags, descr: x.Description, project: x.ProjectID})
	}, shallow), nil
}

// SecurityGroupsPage lists a page of security groups with their rules.
func (n *Neutron) SecurityGroupsPage(q Query) (Page[openstack.SecurityGroup], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListSecurityGroups", false); err != nil {
		return Page[openstack.SecurityGroup]{}, err
	}
	return pageOf(n.SGs, n.ix.tagged(openstack.ResourceSecurityGroups, q.Tags), q, func(x *openstack.SecurityGroup) bool {
		return matchQuery(q, obj{tags: x.Tags, name: x.Name, descr: x.Description, project: x.ProjectID})
	}, copyGroup), nil
}

func copyGroup(x *openstack.SecurityGroup) openstack.SecurityGroup {
	c := *x
	c.Rules = slices.Clone(x.Rules)
	return c
}

// TrunksPage lists a page of trunks, of the parent ports q.PortIDs when set.
func (n *Neutron) TrunksPage(q Query) (Page[openstack.Trunk], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListTrunks", false); err != nil {
		return Page[openstack.Trunk]{}, err
	}
	return pageOf(n.Trunks, nil, q, func(x *openstack.Trunk) bool { return q.PortIDs == nil || slices.Contains(q.PortIDs, x.PortID) }, copyTrunk), nil
}

func copyTrunk(x *openstack.Trunk) openstack.Trunk {
	c := *x
	c.Subports = slices.Clone(x.Subports)
	return c
}

// GetSecurityGroup returns one security group with its rules.
func (n *Neutron) GetSecurityGroup(id string) (*openstack.SecurityGroup, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("GetSecurityGroup", false); err != nil {
		return nil, err
	}
	g, ok := n.SGs[id]
	if !ok {
		return nil, notFound("security group")
	}
	c := copyGroup(g)
	return &c, nil
}
