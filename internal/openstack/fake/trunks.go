package fake

import (
	"context"
	"fmt"
	"slices"

	"github.com/raven-net/raven/internal/openstack"
)

func conflict(msg string) error {
	return openstack.NewError("fake trunk", openstack.KindConflict, 409, msg)
}

// AddTrunk makes a trunk whose parent is the port, as Nova's VLAN-aware VM has (for tests).
func (n *Neutron) AddTrunk(parentPortID string) *openstack.Trunk {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addTrunkLocked(parentPortID)
}

func (n *Neutron) addTrunkLocked(parentPortID string) *openstack.Trunk {
	n.seq++
	t := &openstack.Trunk{ID: fmt.Sprintf("trunk-%d", n.seq), PortID: parentPortID, ProjectID: n.Project, Status: "ACTIVE"}
	if n.UUIDs {
		t.ID = newID(true, "trunk", n.seq)
	}
	if n.Trunks == nil {
		n.Trunks = map[string]*openstack.Trunk{}
	}
	n.Trunks[t.ID] = t
	return t
}

// subportOf returns the trunk that carries the port, nil when none does. Caller holds n.mu.
func (n *Neutron) subportOf(portID string) *openstack.Trunk {
	if n.ix != nil {
		return n.Trunks[n.ix.carrier[portID]]
	}
	for _, t := range n.Trunks {
		for _, s := range t.Subports {
			if s.PortID == portID {
				return t
			}
		}
	}
	return nil
}

// PortsWithAddress implements openstack.Networking.
func (n *Neutron) PortsWithAddress(_ context.Context, subnetID, ip string) ([]openstack.Port, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("PortsWithAddress", false); err != nil {
		return nil, err
	}
	n.listed("PortsWithAddress", openstack.Filter{}, subnetID)
	if subnetID == "" {
		return nil, openstack.ErrUnscoped
	}
	var out []openstack.Port
	for _, p := range n.Ports {
		if slices.ContainsFunc(p.FixedIPs, func(f openstack.FixedIP) bool { return f.SubnetID == subnetID && (ip == "" || f.IPAddress == ip) }) {
			out = append(out, *p)
		}
	}
	return out, nil
}

// ListTrunks implements openstack.Networking; like it, it refuses to list without a parent port.
func (n *Neutron) ListTrunks(_ context.Context, parentPortIDs ...string) ([]openstack.Trunk, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListTrunks", false); err != nil {
		return nil, err
	}
	n.listed("ListTrunks", openstack.Filter{}, parentPortIDs...)
	if len(parentPortIDs) == 0 || slices.Contains(parentPortIDs, "") {
		return nil, openstack.ErrUnscoped
	}
	return n.trunksWhere(func(t *openstack.Trunk) bool { return slices.Contains(parentPortIDs, t.PortID) }), nil
}

// trunksWhere copies the trunks keep says. Caller holds n.mu.
func (n *Neutron) trunksWhere(keep func(*openstack.Trunk) bool) []openstack.Trunk {
	var out []openstack.Trunk
	for _, t := range n.Trunks {
		if keep(t) {
			c := *t
			c.Subports = slices.Clone(t.Subports)
			out = append(out, c)
		}
	}
	return out
}

// ListProjectTrunks implements openstack.Networking; like it, it refuses to list without a project.
func (n *Neutron) ListProjectTrunks(_ context.Context, projectID string) ([]openstack.Trunk, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("ListTrunks", false); err != nil {
		return nil, err
	}
	n.listed("ListTrunks", openstack.Filter{ProjectID: projectID})
	if projectID == "" {
		return nil, openstack.ErrUnscoped
	}
	return n.trunksWhere(func(t *openstack.Trunk) bool { return t.ProjectID == projectID }), nil
}

// GetTrunk implements openstack.Networking.
func (n *Neutron) GetTrunk(_ context.Context, id string) (*openstack.Trunk, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("GetTrunk", false); err != nil {
		return nil, err
	}
	t, ok := n.Trunks[id]
	if !ok {
		return nil, notFound("trunk")
	}
	c := *t
	c.Subports = slices.Clone(t.Subports)
	return &c, nil
}

// AddSubports implements openstack.Networking as Neutron does: all or none, refusing a segmentation ID the
// trunk carries, a port that is a subport already and a port with a device_id; an added port's device_owner becomes trunk:subport.
func (n *Neutron) AddSubports(_ context.Context, trunkID string, subs []openstack.Subport) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("AddSubports", true); err != nil {
		return err
	}
	t, ok := n.Trunks[trunkID]
	if !ok {
		return notFound("trunk")
	}
	for i, s := range subs {
		p, ok := n.Ports[s.PortID]
		if !ok {
			return notFound("port")
		}
		if p.DeviceID != "" { // Neutron's PortInUse: a subport has no device of its own
			return conflict(fmt.Sprintf("Unable to complete operation on port %s for network %s. Port already has an attached device %s.", p.ID, p.NetworkID, p.DeviceID))
		}
		if n.subportOf(s.PortID) != nil || slices.ContainsFunc(subs[:i], func(o openstack.Subport) bool { return o.PortID == s.PortID }) {
			return conflict("Port " + s.PortID + " is currently a subport")
		}
		if s.SegmentationID < 1 || s.SegmentationID > 4094 {
			return openstack.NewError("fake trunk", openstack.KindBadRequest, 400, "segmentation ID out of range")
		}
		inUse := func(o openstack.Subport) bool { return o.SegmentationID == s.SegmentationID }
		if slices.ContainsFunc(t.Subports, inUse) || slices.ContainsFunc(subs[:i], inUse) {
			return conflict(fmt.Sprintf("segmentation ID %d is in use on trunk %s", s.SegmentationID, trunkID))
		}
	}
	for _, s := range subs {
		t.Subports = append(t.Subports, s)
		n.setOwnerLocked(n.Ports[s.PortID], openstack.SubportOwner)
		n.Ports[s.PortID].Profile = map[string]any{"parent_name": t.PortID, "tag": s.SegmentationID}
		if n.ix != nil {
			n.ix.carrier[s.PortID] = t.ID
		}
	}
	return nil
}

// RemoveSubports implements openstack.Networking: a port the trunk does not carry is a 404, and a removed
// port's device_owner is emptied, as ML2/OVN's trunk driver does.
func (n *Neutron) RemoveSubports(_ context.Context, trunkID string, portIDs []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("RemoveSubports", true); err != nil {
		return err
	}
	t, ok := n.Trunks[trunkID]
	if !ok {
		return notFound("trunk")
	}
	for _, id := range portIDs {
		if !slices.ContainsFunc(t.Subports, func(s openstack.Subport) bool { return s.PortID == id }) {
			return notFound("subport " + id)
		}
	}
	t.Subports = slices.DeleteFunc(t.Subports, func(s openstack.Subport) bool { return slices.Contains(portIDs, s.PortID) })
	for _, id := range portIDs {
		if p, ok := n.Ports[id]; ok {
			n.setOwnerLocked(p, "")
			p.Profile = nil
		}
		if n.ix != nil {
			delete(n.ix.carrier, id)
		}
	}
	return nil
}

// CreateTrunk makes a trunk whose parent is the port, as Neutron's trunk create does: the port must exist
// (404) and be neither another trunk's parent nor a subport (409).
func (n *Neutron) CreateTrunk(_ context.Context, parentPortID string) (*openstack.Trunk, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("CreateTrunk", true); err != nil {
		return nil, err
	}
	if err := n.trunkParentLocked(parentPortID); err != nil {
		return nil, err
	}
	c := *n.addTrunkLocked(parentPortID)
	return &c, nil
}

func (n *Neutron) trunkParentLocked(portID string) error {
	if _, ok := n.Ports[portID]; !ok {
		return notFound("port")
	}
	for _, t := range n.Trunks {
		if t.PortID == portID {
			return conflict("Port " + portID + " is currently in use and is not eligible for use as a parent port.")
		}
	}
	if n.subportOf(portID) != nil {
		return conflict("Port " + portID + " is currently a subport")
	}
	return nil
}

// DeleteTrunk deletes a trunk; its subports are ports again (device_owner emptied).
func (n *Neutron) DeleteTrunk(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter("DeleteTrunk", true); err != nil {
		return err
	}
	t, ok := n.Trunks[id]
	if !ok {
		return notFound("trunk")
	}
	for _, s := range t.Subports {
		if p, ok := n.Ports[s.PortID]; ok {
			n.setOwnerLocked(p, "")
		}
		if n.ix != nil {
			delete(n.ix.carrier, s.PortID)
		}
	}
	delete(n.Trunks, id)
	return nil
}
