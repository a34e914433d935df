package sim

import (
	"encoding/json"

	"github.com/raven-net/raven/internal/openstack"
)

func (s *Sim) floatingIPRoutes(rs routes) {
	rs["GET floatingips"] = route{h: s.listFloatingIPs, list: true}
	rs["POST floatingips"] = route{h: s.createFloatingIP}
	rs["PUT floatingips/{id}"] = route{h: s.updateFloatingIP}
	rs["DELETE floatingips/{id}"] = route{h: s.deleteFloatingIP}
}

func (s *Sim) listFloatingIPs(c *call) (reply, error) {
	q, err := parseQuery(c.query, append([]string{"project_id", "description"}, tagKeys...)...)
	if err != nil {
		return reply{}, err
	}
	p, err := s.Networking.FloatingIPsPage(q.Query)
	if err != nil {
		return reply{}, err
	}
	return c.page("floatingips", views(p.Items, floatingIPOut), len(p.Items), p.More,
		lastID(p.Items, func(x openstack.FloatingIP) string { return x.ID })), nil
}

type floatingIPIn struct {
	FloatingNetworkID string `json:"floating_network_id"`
	Description       string `json:"description"`
	FloatingIP        string `json:"floating_ip_address"`
	PortID            string `json:"port_id"`
}

func (s *Sim) createFloatingIP(c *call) (reply, error) {
	var in floatingIPIn
	if err := c.decode("floatingip", &in); err != nil {
		return reply{}, err
	}
	if in.FloatingNetworkID == "" {
		return reply{}, bad("Failed to parse request. Required attribute 'floating_network_id' not specified")
	}
	c.items = 1
	f, err := s.Networking.CreateFloatingIP(c.r.Context(), openstack.FloatingIPSpec{FloatingNetworkID: in.FloatingNetworkID,
		FloatingIP: in.FloatingIP, PortID: in.PortID, Description: in.Description})
	if err != nil {
		return reply{}, err
	}
	return created(map[string]any{"floatingip": floatingIPOut(*f)}), nil
}

// updateFloatingIP associates a floating IP with a port, or with none (port_id null).
func (s *Sim) updateFloatingIP(c *call) (reply, error) {
	m, err := c.fields("floatingip")
	if err != nil {
		return reply{}, err
	}
	var in map[string]json.RawMessage
	if err := strict(m["floatingip"], &in); err != nil {
		return reply{}, err
	}
	raw, has := in["port_id"]
	if !has || len(in) != 1 {
		return reply{}, bad("the simulator updates a floating IP's port_id only")
	}
	var port *string
	if err := strict(raw, &port); err != nil {
		return reply{}, err
	}
	f, err := s.Networking.UpdateFloatingIPPort(c.r.Context(), c.ids[0], deref(port))
	if err != nil {
		return reply{}, err
	}
	return ok(map[string]any{"floatingip": floatingIPOut(*f)}), nil
}

func (s *Sim) deleteFloatingIP(c *call) (reply, error) {
	return noContent(), s.Networking.DeleteFloatingIP(c.r.Context(), c.ids[0])
}
