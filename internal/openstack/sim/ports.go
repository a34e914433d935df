package sim

import (
	"encoding/json"
	"strings"

	"github.com/raven-net/raven/internal/openstack"
)

func (s *Sim) portRoutes(rs routes) {
	rs["GET ports"] = route{h: s.listPorts, list: true}
	rs["POST ports"] = route{h: s.createPorts}
	rs["GET ports/{id}"] = route{h: s.getPort}
	rs["PUT ports/{id}"] = route{h: s.updatePort}
	rs["DELETE ports/{id}"] = route{h: s.deletePort}
}

// portFilters are the filters a port list takes.
var portFilters = append([]string{"project_id", "name", "description", "network_id", "device_id", "device_owner", "fixed_ips"}, tagKeys...)

func (s *Sim) listPorts(c *call) (reply, error) {
	q, err := parseQuery(c.query, portFilters...)
	if err != nil {
		return reply{}, err
	}
	p, err := s.Networking.PortsPage(q.Query)
	if err != nil {
		return reply{}, err
	}
	return c.page("ports", views(p.Items, portOut), len(p.Items), p.More, lastID(p.Items, func(x openstack.Port) string { return x.ID })), nil
}

func (s *Sim) getPort(c *call) (reply, error) {
	p, err := s.Networking.GetPort(c.r.Context(), c.ids[0])
	if err != nil {
		return reply{}, err
	}
	return ok(map[string]any{"port": portOut(*p)}), nil
}

// portIn is a port in a create request.
type portIn struct {
	NetworkID      string                  `json:"network_id"`
	Name           string                  `json:"name"`
	Description    string                  `json:"description"`
	DeviceOwner    string                  `json:"device_owner"`
	DeviceID       string                  `json:"device_id"`
	FixedIPs       []openstack.FixedIP     `json:"fixed_ips"`
	Tags           []string                `json:"tags"`
	HostID         string                  `json:"binding:host_id"`
	MACAddress     string                  `json:"mac_address"`
	SecurityGroups *[]string               `json:"security_groups"`
	AdminStateUp   *bool                   `json:"admin_state_up"`
	Pairs          []openstack.AddressPair `json:"allowed_address_pairs"`
}

func (in portIn) spec() (openstack.PortSpec, error) {
	s := openstack.PortSpec{NetworkID: in.NetworkID, Name: in.Name, Description: in.Description, DeviceOwner: in.DeviceOwner,
		DeviceID: in.DeviceID, Tags: in.Tags, HostID: in.HostID, MACAddress: in.MACAddress}
	switch {
	case in.NetworkID == "":
		return s, bad("Failed to parse request. Required attribute 'network_id' not specified")
	case len(in.FixedIPs) > 1:
		return s, bad("the simulator gives a port one fixed IP, not %d", len(in.FixedIPs))
	case len(in.Pairs) > 0:
		return s, bad("the simulator does not keep allowed_address_pairs")
	case in.AdminStateUp != nil && !*in.AdminStateUp:
		return s, bad("the simulator makes ports with admin_state_up true only")
	}
	if err := checkTags(in.Tags); err != nil {
		return s, err
	}
	if len(in.FixedIPs) == 1 {
		s.SubnetID, s.IPAddress = in.FixedIPs[0].SubnetID, in.FixedIPs[0].IPAddress
	}
	if in.SecurityGroups != nil {
		s.SecurityGroups = *in.SecurityGroups
		if s.SecurityGroups == nil {
			s.SecurityGroups = []string{}
		}
	}
	return s, nil
}

// createPorts serves a port create, one ({"port": …}) or bulk ({"ports": […]}, all or none).
func (s *Sim) createPorts(c *call) (reply, error) {
	m, err := c.fields("port", "ports")
	if err != nil {
		return reply{}, err
	}
	if len(m) != 1 {
		return reply{}, bad("Resource body required: one of port, ports")
	}
	if raw, single := m["port"]; single {
		var in portIn
		if err := strict(raw, &in); err != nil {
			return reply{}, err
		}
		spec, err := in.spec()
		if err != nil {
			return reply{}, err
		}
		c.items = 1
		p, err := s.Networking.CreatePort(c.r.Context(), spec)
		if err != nil {
			return reply{}, err
		}
		return created(map[string]any{"port": portOut(*p)}), nil
	}
	specs, err := bulkPorts(m["ports"])
	if err != nil {
		return reply{}, err
	}
	c.items = len(specs)
	ps, err := s.Networking.CreatePorts(c.r.Context(), specs)
	if err != nil {
		return reply{}, err
	}
	return created(map[string]any{"ports": views(ps, portOut)}), nil
}

func bulkPorts(raw json.RawMessage) ([]openstack.PortSpec, error) {
	var ins []json.RawMessage
	if err := json.Unmarshal(raw, &ins); err != nil || len(ins) == 0 {
		return nil, bad("Resource body required: a list of ports")
	}
	specs := make([]openstack.PortSpec, 0, len(ins))
	for _, r := range ins {
		var in portIn
		if err := strict(r, &in); err != nil {
			return nil, err
		}
		spec, err := in.spec()
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// portUpdate is a port update request: what Raven changes.
type portUpdate struct {
	Name           *string   `json:"name"`
	DeviceID       *string   `json:"device_id"`
	HostID         *string   `json:"binding:host_id"`
	SecurityGroups *[]string `json:"security_groups"`
}

func (s *Sim) updatePort(c *call) (reply, error) {
	var in portUpdate
	if err := c.decode("port", &in); err != nil {
		return reply{}, err
	}
	u := openstack.PortUpdate{Name: in.Name, DeviceID: in.DeviceID, HostID: in.HostID, SecurityGroups: in.SecurityGroups}
	if u.SecurityGroups != nil && *u.SecurityGroups == nil {
		u.SecurityGroups = &[]string{}
	}
	p, err := s.Networking.UpdatePort(c.r.Context(), c.ids[0], u)
	if err != nil {
		return reply{}, err
	}
	return ok(map[string]any{"port": portOut(*p)}), nil
}

func (s *Sim) deletePort(c *call) (reply, error) {
	return noContent(), s.Networking.DeletePort(c.r.Context(), c.ids[0])
}

// maxTagLength is Neutron's limit on a tag.
const maxTagLength = 255

// checkTags refuses tags Neutron refuses: too long, or with a comma.
func checkTags(tags []string) error {
	for _, t := range tags {
		if t == "" || len(t) > maxTagLength || strings.Contains(t, ",") {
			return bad("Invalid input for tags. Reason: '%s' is not a valid tag", t)
		}
	}
	return nil
}
