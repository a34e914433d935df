package sim

import (
	"encoding/json"
	"net/http"

	"github.com/raven-net/raven/internal/openstack"
)

func (s *Sim) securityRoutes(rs routes) {
	rs["GET security-groups"] = route{h: s.listGroups, list: true}
	rs["POST security-groups"] = route{h: s.createGroup}
	rs["GET security-groups/{id}"] = route{h: s.getGroup}
	rs["PUT security-groups/{id}"] = route{h: s.updateGroup}
	rs["DELETE security-groups/{id}"] = route{h: s.deleteGroup}
	rs["POST security-group-rules"] = route{h: s.createRules}
	rs["DELETE security-group-rules/{id}"] = route{h: s.deleteRule}
}

func (s *Sim) listGroups(c *call) (reply, error) {
	q, err := parseQuery(c.query, append([]string{"project_id", "name", "description"}, tagKeys...)...)
	if err != nil {
		return reply{}, err
	}
	p, err := s.Networking.SecurityGroupsPage(q.Query)
	if err != nil {
		return reply{}, err
	}
	return c.page("security_groups", views(p.Items, groupOut), len(p.Items), p.More,
		lastID(p.Items, func(x openstack.SecurityGroup) string { return x.ID })), nil
}

type groupIn struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
	Stateful    *bool   `json:"stateful"`
}

func (s *Sim) createGroup(c *call) (reply, error) {
	var in groupIn
	if err := c.decode("security_group", &in); err != nil {
		return reply{}, err
	}
	if in.Stateful != nil && !*in.Stateful {
		return reply{}, bad("the simulator makes stateful security groups only")
	}
	spec := openstack.SecurityGroupSpec{}
	if in.Name != nil {
		spec.Name = *in.Name
	}
	if in.Description != nil {
		spec.Description = *in.Description
	}
	c.items = 1
	g, err := s.Networking.CreateSecurityGroup(c.r.Context(), spec)
	if err != nil {
		return reply{}, err
	}
	return created(map[string]any{"security_group": groupOut(*g)}), nil
}

func (s *Sim) getGroup(c *call) (reply, error) {
	g, err := s.Networking.GetSecurityGroup(c.ids[0])
	if err != nil {
		return reply{}, err
	}
	return ok(map[string]any{"security_group": groupOut(*g)}), nil
}

// updateGroup renames a group and sets its description; an attribute left out stays as it is.
func (s *Sim) updateGroup(c *call) (reply, error) {
	var in groupIn
	if err := c.decode("security_group", &in); err != nil {
		return reply{}, err
	}
	if in.Stateful != nil {
		return reply{}, bad("the simulator does not change a group's statefulness")
	}
	g, err := s.Networking.GetSecurityGroup(c.ids[0])
	if err != nil {
		return reply{}, err
	}
	if in.Name != nil {
		g.Name = *in.Name
	}
	if in.Description != nil {
		g.Description = *in.Description
	}
	if err := s.Networking.UpdateSecurityGroup(c.r.Context(), g.ID, openstack.SecurityGroupSpec{Name: g.Name, Description: g.Description}); err != nil {
		return reply{}, err
	}
	return ok(map[string]any{"security_group": groupOut(*g)}), nil
}

func (s *Sim) deleteGroup(c *call) (reply, error) {
	return noContent(), s.Networking.DeleteSecurityGroup(c.r.Context(), c.ids[0])
}

// ruleIn is a rule in a create request.
type ruleIn struct {
	SecurityGroupID string  `json:"security_group_id"`
	Direction       string  `json:"direction"`
	EtherType       string  `json:"ethertype"`
	Protocol        *string `json:"protocol"`
	PortRangeMin    *int    `json:"port_range_min"`
	PortRangeMax    *int    `json:"port_range_max"`
	RemoteIPPrefix  *string `json:"remote_ip_prefix"`
	RemoteGroupID   *string `json:"remote_group_id"`
	Description     *string `json:"description"`
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// rule checks a rule as Neutron does and makes it.
func (in ruleIn) rule() (openstack.SecurityGroupRule, error) {
	r := openstack.SecurityGroupRule{SecurityGroupID: in.SecurityGroupID, Direction: in.Direction, EtherType: in.EtherType,
		Protocol: deref(in.Protocol), PortRangeMin: deref(in.PortRangeMin), PortRangeMax: deref(in.PortRangeMax),
		RemoteIPPrefix: deref(in.RemoteIPPrefix), RemoteGroupID: deref(in.RemoteGroupID), Description: deref(in.Description)}
	if r.EtherType == "" {
		r.EtherType = "IPv4"
	}
	switch {
	case r.SecurityGroupID == "":
		return r, bad("Failed to parse request. Required attribute 'security_group_id' not specified")
	case r.Direction != "ingress" && r.Direction != "egress":
		return r, bad("Invalid input for direction. Reason: '%s' is not in ['ingress', 'egress']", r.Direction)
	case r.EtherType != "IPv4" && r.EtherType != "IPv6":
		return r, bad("Invalid input for ethertype. Reason: '%s' is not in ['IPv4', 'IPv6']", r.EtherType)
	case r.RemoteIPPrefix != "" && r.RemoteGroupID != "":
		return r, bad("Only remote_ip_prefix or remote_group_id may be provided.")
	case (r.PortRangeMin > 0 || r.PortRangeMax > 0) && r.Protocol == "":
		return r, bad("Must also specify protocol if port range is given.")
	case r.PortRangeMin > r.PortRangeMax || r.PortRangeMax > 65535:
		return r, bad("For TCP/UDP protocols, port_range_min must be <= port_range_max")
	}
	return r, nil
}

// createRules serves a rule create, one ({"security_group_rule": …}) or bulk ({"security_group_rules": […]}).
func (s *Sim) createRules(c *call) (reply, error) {
	m, err := c.fields("security_group_rule", "security_group_rules")
	if err != nil {
		return reply{}, err
	}
	if len(m) != 1 {
		return reply{}, bad("Resource body required: one of security_group_rule, security_group_rules")
	}
	if raw, single := m["security_group_rule"]; single {
		var in ruleIn
		if err := strict(raw, &in); err != nil {
			return reply{}, err
		}
		r, err := in.rule()
		if err != nil {
			return reply{}, err
		}
		c.items = 1
		out, err := s.Networking.CreateSecurityGroupRule(c.r.Context(), r)
		if err != nil {
			return reply{}, err
		}
		return created(map[string]any{"security_group_rule": ruleOut(*out)}), nil
	}
	rs, err := bulkRules(m["security_group_rules"])
	if err != nil {
		return reply{}, err
	}
	c.items = len(rs)
	out, err := s.Networking.CreateSecurityGroupRules(c.r.Context(), rs)
	if err != nil {
		return reply{}, err
	}
	return created(map[string]any{"security_group_rules": views(out, ruleOut)}), nil
}

func bulkRules(raw json.RawMessage) ([]openstack.SecurityGroupRule, error) {
	var ins []json.RawMessage
	if err := json.Unmarshal(raw, &ins); err != nil || len(ins) == 0 {
		return nil, bad("Resource body required: a list of security group rules")
	}
	out := make([]openstack.SecurityGroupRule, 0, len(ins))
	for _, x := range ins {
		var in ruleIn
		if err := strict(x, &in); err != nil {
			return nil, err
		}
		r, err := in.rule()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (s *Sim) deleteRule(c *call) (reply, error) {
	return noContent(), s.Networking.DeleteSecurityGroupRule(c.r.Context(), c.ids[0])
}

// replaceTags serves PUT /<resource>/<id>/tags.
func (s *Sim) replaceTags(r openstack.Resource) handler {
	return func(c *call) (reply, error) {
		var in struct {
			Tags []string `json:"tags"`
		}
		m, err := c.fields("tags")
		if err != nil {
			return reply{}, err
		}
		if err := strict(m["tags"], &in.Tags); err != nil || in.Tags == nil {
			return reply{}, bad("Invalid input: a list of tags is required")
		}
		if err := checkTags(in.Tags); err != nil {
			return reply{}, err
		}
		if err := s.Networking.ReplaceTags(c.r.Context(), r, c.ids[0], in.Tags); err != nil {
			return reply{}, err
		}
		return reply{status: http.StatusOK, body: map[string]any{"tags": in.Tags}}, nil
	}
}
