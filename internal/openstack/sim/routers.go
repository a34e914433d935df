package sim

import (
	"github.com/raven-net/raven/internal/openstack"
)

func (s *Sim) listRouters(c *call) (reply, error) {
	q, err := parseQuery(c.query, append([]string{"project_id", "name", "description"}, tagKeys...)...)
	if err != nil {
		return reply{}, err
	}
	p, err := s.Networking.RoutersPage(q.Query)
	if err != nil {
		return reply{}, err
	}
	return c.page("routers", views(p.Items, routerOut), len(p.Items), p.More, lastID(p.Items, func(x openstack.Router) string { return x.ID })), nil
}

type routerIn struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Gateway     *struct {
		NetworkID string `json:"network_id"`
	} `json:"external_gateway_info"`
	AdminStateUp *bool `json:"admin_state_up"`
}

func (s *Sim) createRouter(c *call) (reply, error) {
	var in routerIn
	if err := c.decode("router", &in); err != nil {
		return reply{}, err
	}
	spec := openstack.RouterSpec{Name: in.Name, Description: in.Description}
	if in.Gateway != nil {
		if _, err := s.Networking.GetNetwork(c.r.Context(), in.Gateway.NetworkID); err != nil {
			return reply{}, err
		}
		spec.GatewayNetworkID = in.Gateway.NetworkID
	}
	c.items = 1
	r, err := s.Networking.CreateRouter(c.r.Context(), spec)
	if err != nil {
		return reply{}, err
	}
	return created(map[string]any{"router": routerOut(*r)}), nil
}

func (s *Sim) deleteRouter(c *call) (reply, error) {
	return noContent(), s.Networking.DeleteRouter(c.r.Context(), c.ids[0])
}

// routerInterface adds (add) or removes a router's interface on a subnet; the answer is Neutron's.
func (s *Sim) routerInterface(add bool) handler {
	return func(c *call) (reply, error) {
		m, err := c.fields("subnet_id", "port_id")
		if err != nil {
			return reply{}, err
		}
		if _, byPort := m["port_id"]; byPort {
			return reply{}, bad("the simulator attaches router interfaces by subnet_id only")
		}
		var subnet string
		if err := strict(m["subnet_id"], &subnet); err != nil || subnet == "" {
			return reply{}, bad("Bad router request: Either subnet_id or port_id must be specified")
		}
		router, ctx := c.ids[0], c.r.Context()
		if add {
			err = s.Networking.AddRouterInterface(ctx, router, subnet)
		} else {
			err = s.Networking.RemoveRouterInterface(ctx, router, subnet)
		}
		if err != nil {
			return reply{}, err
		}
		return ok(map[string]any{"id": router, "subnet_id": subnet, "subnet_ids": []string{subnet}, "port_id": "if-" + subnet,
			"tenant_id": "", "project_id": ""}), nil
	}
}
