package sim

import (
	"github.com/raven-net/raven/internal/openstack"
)

func (s *Sim) trunkRoutes(rs routes) {
	rs["GET trunks"] = route{h: s.listTrunks, list: true}
	rs["POST trunks"] = route{h: s.createTrunk}
	rs["GET trunks/{id}"] = route{h: s.getTrunk}
	rs["DELETE trunks/{id}"] = route{h: s.deleteTrunk}
	rs["PUT trunks/{id}/add_subports"] = route{h: s.addSubports}
	rs["PUT trunks/{id}/remove_subports"] = route{h: s.removeSubports}
}

func (s *Sim) listTrunks(c *call) (reply, error) {
	q, err := parseQuery(c.query, "port_id")
	if err != nil {
		return reply{}, err
	}
	p, err := s.Networking.TrunksPage(q.Query)
	if err != nil {
		return reply{}, err
	}
	return c.page("trunks", views(p.Items, trunkOut), len(p.Items), p.More, lastID(p.Items, func(x openstack.Trunk) string { return x.ID })), nil
}

func (s *Sim) getTrunk(c *call) (reply, error) {
	t, err := s.Networking.GetTrunk(c.r.Context(), c.ids[0])
	if err != nil {
		return reply{}, err
	}
	return ok(map[string]any{"trunk": trunkOut(*t)}), nil
}

type trunkIn struct {
	PortID       string `json:"port_id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	AdminStateUp *bool  `json:"admin_state_up"`
}

// createTrunk makes a trunk on a parent port, without subports (add_subports adds them).
func (s *Sim) createTrunk(c *call) (reply, error) {
	var in trunkIn
	if err := c.decode("trunk", &in); err != nil {
		return reply{}, err
	}
	if in.PortID == "" {
		return reply{}, bad("Failed to parse request. Required attribute 'port_id' not specified")
	}
	c.items = 1
	t, err := s.Networking.CreateTrunk(c.r.Context(), in.PortID)
	if err != nil {
		return reply{}, err
	}
	v := trunkOut(*t)
	v.Name, v.Description = in.Name, in.Description
	return created(map[string]any{"trunk": v}), nil
}

func (s *Sim) deleteTrunk(c *call) (reply, error) {
	return noContent(), s.Networking.DeleteTrunk(c.r.Context(), c.ids[0])
}

// subportsIn is the body of add_subports and remove_subports.
type subportsIn struct {
	Subports []openstack.Subport `json:"sub_ports"`
}

func (s *Sim) addSubports(c *call) (reply, error) {
	var in subportsIn
	m, err := c.fields("sub_ports")
	if err != nil {
		return reply{}, err
	}
	if err := strict(m["sub_ports"], &in.Subports); err != nil || len(in.Subports) == 0 {
		return reply{}, bad("Invalid input: sub_ports must be a non-empty list")
	}
	for _, sp := range in.Subports {
		if sp.SegmentationType != openstack.SegmentationVLAN {
			return reply{}, bad("Invalid input: segmentation_type '%s' is not supported (vlan only)", sp.SegmentationType)
		}
	}
	c.items = len(in.Subports)
	if err := s.Networking.AddSubports(c.r.Context(), c.ids[0], in.Subports); err != nil {
		return reply{}, err
	}
	return s.trunkAnswer(c)
}

func (s *Sim) removeSubports(c *call) (reply, error) {
	var in subportsIn
	m, err := c.fields("sub_ports")
	if err != nil {
		return reply{}, err
	}
	if err := strict(m["sub_ports"], &in.Subports); err != nil || len(in.Subports) == 0 {
		return reply{}, bad("Invalid input: sub_ports must be a non-empty list")
	}
	ids := make([]string, 0, len(in.Subports))
	for _, sp := range in.Subports {
		ids = append(ids, sp.PortID)
	}
	c.items = len(ids)
	if err := s.Networking.RemoveSubports(c.r.Context(), c.ids[0], ids); err != nil {
		return reply{}, err
	}
	return s.trunkAnswer(c)
}

// trunkAnswer is the answer of add_subports and remove_subports: the trunk, not wrapped, as Neutron gives it.
func (s *Sim) trunkAnswer(c *call) (reply, error) {
	t, err := s.Networking.GetTrunk(c.r.Context(), c.ids[0])
	if err != nil {
		return reply{}, err
	}
	return ok(trunkOut(*t)), nil
}
