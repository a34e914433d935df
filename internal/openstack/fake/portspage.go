package fake

import "github.com/raven-net/raven/internal/openstack"

// PortsPage lists a page of ports. Router interfaces are listed as ports with the router as device, as
// ListPorts does. Indexed, the page costs the ports it looks at from the marker on among the smallest set the
// index has for q (the ports of its network, device, owner, one tag or address), not every port.
func (n *Neutron) PortsPage(q Query) (Page[openstack.Port], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListPorts", false); err != nil {
		return Page[openstack.Port]{}, err
	}
	if n.ix != nil && len(n.Interfaces[q.DeviceID]) == 0 {
		return n.portsInOrderLocked(q), nil
	}
	all := map[string]*openstack.Port{}
	n.eachCandidateLocked(q, func(p *openstack.Port) {
		if matchPort(q, p) {
			all[p.ID] = p
		}
	})
	for _, sid := range n.Interfaces[q.DeviceID] {
		p := &openstack.Port{ID: routerPortPrefix + sid, DeviceID: q.DeviceID, DeviceOwner: "network:router_interface",
			FixedIPs: []openstack.FixedIP{{SubnetID: sid}}}
		if matchPort(q, p) {
			all[p.ID] = p
		}
	}
	return pageOf(all, nil, q, func(*openstack.Port) bool { return true }, shallow), nil
}

// eachCandidateLocked calls fn with every port that may match q.
func (n *Neutron) eachCandidateLocked(q Query, fn func(*openstack.Port)) {
	if n.ix == nil {
		for _, p := range n.Ports {
			fn(p)
		}
		return
	}
	for _, id := range n.ix.candidates(q).after("") {
		if p, ok := n.Ports[id]; ok {
			fn(p)
		}
	}
}

// portsInOrderLocked pages the ports by the index, from the marker on.
func (n *Neutron) portsInOrderLocked(q Query) Page[openstack.Port] {
	var out Page[openstack.Port]
	for _, id := range n.ix.candidates(q).after(q.Marker) {
		p, ok := n.Ports[id]
		if !ok || !matchPort(q, p) {
			continue
		}
		if q.Limit > 0 && len(out.Items) == q.Limit {
			out.More = true
			break
		}
		out.Items = append(out.Items, *p)
	}
	return out
}
