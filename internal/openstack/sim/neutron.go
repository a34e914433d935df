package sim

import (
	"net/http"
	"strings"

	"github.com/raven-net/raven/internal/openstack"
)

// neutronRoutes are the Neutron requests the simulator serves.
func (s *Sim) neutronRoutes() routes {
	rs := routes{
		"GET extensions":      {h: s.listExtensions, list: true},
		"GET extensions/{id}": {h: s.getExtension},

		"GET networks":         {h: s.listNetworks, list: true},
		"POST networks":        {h: s.createNetwork},
		"GET networks/{id}":    {h: s.getNetwork},
		"DELETE networks/{id}": {h: s.deleteNetwork},

		"GET subnets":         {h: s.listSubnets, list: true},
		"POST subnets":        {h: s.createSubnet},
		"DELETE subnets/{id}": {h: s.deleteSubnet},

		"GET subnetpools":         {h: s.listSubnetPools, list: true},
		"POST subnetpools":        {h: s.createSubnetPool},
		"DELETE subnetpools/{id}": {h: s.deleteSubnetPool},

		"GET routers":                              {h: s.listRouters, list: true},
		"POST routers":                             {h: s.createRouter},
		"DELETE routers/{id}":                      {h: s.deleteRouter},
		"PUT routers/{id}/add_router_interface":    {h: s.routerInterface(true)},
		"PUT routers/{id}/remove_router_interface": {h: s.routerInterface(false)},
	}
	s.portRoutes(rs)
	s.securityRoutes(rs)
	s.floatingIPRoutes(rs)
	s.trunkRoutes(rs)
	for _, r := range []openstack.Resource{openstack.ResourceNetworks, openstack.ResourceSubnets, openstack.ResourcePorts, openstack.ResourceRouters,
		openstack.ResourceSubnetPools, openstack.ResourceFloatingIPs, openstack.ResourceSecurityGroups} {
		rs["PUT "+string(r)+"/{id}/tags"] = route{h: s.replaceTags(r)}
	}
	return rs
}

// neutronFault is Neutron's error body; a message "Type: text" gives the type, else the status does.
func neutronFault(status int, msg string) any {
	typ := map[int]string{http.StatusBadRequest: "HTTPBadRequest", http.StatusNotFound: "HTTPNotFound", http.StatusConflict: "Conflict",
		http.StatusMethodNotAllowed: "HTTPMethodNotAllowed", http.StatusInternalServerError: "HTTPInternalServerError"}[status]
	if t, rest, ok := strings.Cut(msg, ": "); ok && t != "" && !strings.ContainsAny(t, " .") {
		typ, msg = t, rest
	} else if !strings.Contains(msg, " ") && msg != "" {
		typ = msg // a bare type, as "SubnetAllocationError"
	}
	if typ == "" {
		typ = http.StatusText(status)
	}
	return map[string]any{"NeutronError": map[string]string{"type": typ, "message": msg, "detail": ""}}
}

// extensions are the Neutron extensions whose requests the simulator serves.
var extensions = []string{"binding", "external-net", "filter-validation", "pagination", "router", "security-group",
	"standard-attr-tag", "subnet_allocation", "trunk"}

// tagsOnCreate is the extension by which ports take tags in their create request.
const tagsOnCreate = "tag-ports-during-bulk-creation"

type extensionView struct {
	Alias       string `json:"alias"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Updated     string `json:"updated"`
	Links       []any  `json:"links"`
}

func (s *Sim) aliases(c *call) ([]string, error) {
	caps, err := s.Networking.Capabilities(c.r.Context())
	if err != nil {
		return nil, err
	}
	out := extensions
	if caps.TagsOnPortCreate {
		out = append(out[:len(out):len(out)], tagsOnCreate)
	}
	return out, nil
}

func extensionOut(alias string) extensionView {
	return extensionView{Alias: alias, Name: alias, Description: "served by the Raven OpenStack simulator", Updated: "2024-01-01T00:00:00-00:00", Links: []any{}}
}

func (s *Sim) listExtensions(c *call) (reply, error) {
	all, err := s.aliases(c)
	if err != nil {
		return reply{}, err
	}
	c.items = len(all)
	return ok(map[string]any{"extensions": views(all, extensionOut)}), nil
}

func (s *Sim) getExtension(c *call) (reply, error) {
	all, err := s.aliases(c)
	if err != nil {
		return reply{}, err
	}
	for _, a := range all {
		if a == c.ids[0] {
			return ok(map[string]any{"extension": extensionOut(a)}), nil
		}
	}
	return reply{}, fail(http.StatusNotFound, "Extension with alias %s does not exist", c.ids[0])
}

func (s *Sim) listNetworks(c *call) (reply, error) {
	q, err := parseQuery(c.query, append([]string{"project_id", "name", "description", "router:external"}, tagKeys...)...)
	if err != nil {
		return reply{}, err
	}
	p, err := s.Networking.NetworksPage(q.Query)
	if err != nil {
		return reply{}, err
	}
	return c.page("networks", views(p.Items, networkOut), len(p.Items), p.More, lastID(p.Items, func(x openstack.Network) string { return x.ID })), nil
}

// lastID is the ID of the last item, "" for none.
func lastID[T any](items []T, id func(T) string) string {
	if len(items) == 0 {
		return ""
	}
	return id(items[len(items)-1])
}

type networkIn struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	AdminStateUp *bool  `json:"admin_state_up"`
}

func (s *Sim) createNetwork(c *call) (reply, error) {
	var in networkIn
	if err := c.decode("network", &in); err != nil {
		return reply{}, err
	}
	c.items = 1
	n, err := s.Networking.CreateNetwork(c.r.Context(), openstack.NetworkSpec{Name: in.Name, Description: in.Description})
	if err != nil {
		return reply{}, err
	}
	return created(map[string]any{"network": networkOut(*n)}), nil
}

func (s *Sim) getNetwork(c *call) (reply, error) {
	n, err := s.Networking.GetNetwork(c.r.Context(), c.ids[0])
	if err != nil {
		return reply{}, err
	}
	return ok(map[string]any{"network": networkOut(*n)}), nil
}

func (s *Sim) deleteNetwork(c *call) (reply, error) {
	return noContent(), s.Networking.DeleteNetwork(c.r.Context(), c.ids[0])
}
