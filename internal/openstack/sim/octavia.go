package sim

import (
	"strconv"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// octaviaRoutes are the Octavia requests the simulator serves.
func (s *Sim) octaviaRoutes() routes {
	return routes{
		"GET loadbalancers":             {h: s.listLoadBalancers, list: true},
		"POST loadbalancers":            {h: s.createLoadBalancer},
		"GET loadbalancers/{id}":        {h: s.getLoadBalancer},
		"DELETE loadbalancers/{id}":     {h: s.deleteLoadBalancer},
		"GET loadbalancers/{id}/status": {h: s.loadBalancerStatus},

		"GET listeners":         {h: s.listListeners, list: true},
		"POST listeners":        {h: s.createListener},
		"DELETE listeners/{id}": {h: s.deleteListener},

		"GET pools":         {h: s.listPools, list: true},
		"POST pools":        {h: s.createPool},
		"DELETE pools/{id}": {h: s.deletePool},

		"GET pools/{id}/members":         {h: s.listMembers, list: true},
		"POST pools/{id}/members":        {h: s.createMember},
		"PUT pools/{id}/members":         {h: s.replaceMembers},
		"DELETE pools/{id}/members/{id}": {h: s.deleteMember},

		"POST healthmonitors":        {h: s.createMonitor},
		"DELETE healthmonitors/{id}": {h: s.deleteMonitor},
	}
}

func (s *Sim) listLoadBalancers(c *call) (reply, error) {
	q, err := parseQuery(c.query, append([]string{"name", "description"}, tagKeys...)...)
	if err != nil {
		return reply{}, err
	}
	p, err := s.LoadBalancing.LoadBalancersPage(q.Query)
	if err != nil {
		return reply{}, err
	}
	return c.page("loadbalancers", views(p.Items, lbOut), len(p.Items), p.More, lastID(p.Items, func(x fake.LoadBalancerState) string { return x.ID })), nil
}

// lbState is a load balancer with its children; a load balancer the fake no longer has is given alone.
func (s *Sim) lbState(lb openstack.LoadBalancer) fake.LoadBalancerState {
	if st, ok := s.LoadBalancing.LoadBalancer(lb.ID); ok {
		st.LoadBalancer = lb
		return st
	}
	return fake.LoadBalancerState{LoadBalancer: lb}
}

func (s *Sim) getLoadBalancer(c *call) (reply, error) {
	lb, err := s.LoadBalancing.GetLoadBalancer(c.r.Context(), c.ids[0])
	if err != nil {
		return reply{}, err
	}
	return ok(map[string]any{"loadbalancer": lbOut(s.lbState(*lb))}), nil
}

// memberIn is a member in a request (create, batch update, or a fully populated create).
type memberIn struct {
	Name         *string  `json:"name"`
	Address      string   `json:"address"`
	ProtocolPort int      `json:"protocol_port"`
	SubnetID     *string  `json:"subnet_id"`
	Weight       *int     `json:"weight"`
	AdminStateUp *bool    `json:"admin_state_up"`
	Tags         []string `json:"tags"`
}

func (m memberIn) spec() openstack.MemberSpec {
	return openstack.MemberSpec{Name: deref(m.Name), Address: m.Address, ProtocolPort: m.ProtocolPort, SubnetID: deref(m.SubnetID)}
}

// poolIn is a pool in a request (create, or a listener's default pool).
type poolIn struct {
	ListenerID         string   `json:"listener_id"`
	Name               string   `json:"name"`
	Description        string   `json:"description"`
	Protocol           string   `json:"protocol"`
	LBAlgorithm        string   `json:"lb_algorithm"`
	Tags               []string `json:"tags"`
	SessionPersistence *struct {
		Type string `json:"type"`
	} `json:"session_persistence"`
	AdminStateUp *bool      `json:"admin_state_up"`
	Members      []memberIn `json:"members"`
}

func (p poolIn) spec() (openstack.PoolSpec, error) {
	spec := openstack.PoolSpec{ListenerID: p.ListenerID, Name: p.Name, Protocol: p.Protocol, LBAlgorithm: p.LBAlgorithm, Tags: p.Tags}
	if sp := p.SessionPersistence; sp != nil {
		if sp.Type != "SOURCE_IP" {
			return spec, bad("the simulator keeps session_persistence SOURCE_IP only, not %q", sp.Type)
		}
		spec.SourceIP = true
	}
	return spec, nil
}

// listenerIn is a listener in a request (create, or a fully populated load balancer create).
type listenerIn struct {
	LoadBalancerID  string   `json:"loadbalancer_id"`
	Name            string   `json:"name"`
	Description     string   `json:"description"`
	Protocol        string   `json:"protocol"`
	ProtocolPort    int      `json:"protocol_port"`
	Tags            []string `json:"tags"`
	AdminStateUp    *bool    `json:"admin_state_up"`
	ConnectionLimit *int     `json:"connection_limit"`
	DefaultPool     *poolIn  `json:"default_pool"`
}

func (l listenerIn) spec() openstack.ListenerSpec {
	return openstack.ListenerSpec{LoadBalancerID: l.LoadBalancerID, Name: l.Name, Protocol: l.Protocol, ProtocolPort: l.ProtocolPort, Tags: l.Tags}
}

type loadBalancerIn struct {
	Name         string       `json:"name"`
	Description  string       `json:"description"`
	VipPortID    string       `json:"vip_port_id"`
	VipSubnetID  string       `json:"vip_subnet_id"`
	VipAddress   string       `json:"vip_address"`
	Provider     string       `json:"provider"`
	Tags         []string     `json:"tags"`
	AdminStateUp *bool        `json:"admin_state_up"`
	ProjectID    string       `json:"project_id"`
	Listeners    []listenerIn `json:"listeners"`
}

// spec is the load balancer a create asks for; listeners come with their default pool and its members.
func (in loadBalancerIn) spec() (openstack.LoadBalancerSpec, error) {
	spec := openstack.LoadBalancerSpec{Name: in.Name, Description: in.Description, VipPortID: in.VipPortID, VipSubnetID: in.VipSubnetID,
		VipAddress: in.VipAddress, Provider: in.Provider, Tags: in.Tags}
	for _, l := range in.Listeners {
		if l.DefaultPool == nil {
			return spec, bad("the simulator makes a fully populated listener with its default_pool only")
		}
		pool, err := l.DefaultPool.spec()
		if err != nil {
			return spec, err
		}
		g := openstack.ListenerGraph{Listener: l.spec(), Pool: pool}
		for _, m := range l.DefaultPool.Members {
			g.Members = append(g.Members, m.spec())
		}
		spec.Listeners = append(spec.Listeners, g)
	}
	return spec, nil
}

func (s *Sim) createLoadBalancer(c *call) (reply, error) {
	var in loadBalancerIn
	if err := c.decode("loadbalancer", &in); err != nil {
		return reply{}, err
	}
	spec, err := in.spec()
	if err != nil {
		return reply{}, err
	}
	c.items = len(spec.Listeners)
	lb, err := s.LoadBalancing.CreateLoadBalancer(c.r.Context(), spec)
	if err != nil {
		return reply{}, err
	}
	return created(map[string]any{"loadbalancer": lbOut(s.lbState(*lb))}), nil
}

// deleteLoadBalancer deletes a load balancer; with children it needs cascade=true, as in Octavia.
func (s *Sim) deleteLoadBalancer(c *call) (reply, error) {
	cascade := false
	for k, v := range c.query {
		if k != "cascade" || len(v) != 1 {
			return reply{}, bad("the simulator takes cascade=true|false only")
		}
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			return reply{}, bad("Invalid input for cascade: %q", v[0])
		}
		cascade = b
	}
	st, found := s.LoadBalancing.LoadBalancer(c.ids[0])
	if found && !cascade && (len(st.Listeners) > 0 || len(st.Pools) > 0) {
		return reply{}, bad("Cannot delete Load Balancer %s - it has children", c.ids[0])
	}
	return noContent(), s.LoadBalancing.DeleteLoadBalancer(c.r.Context(), c.ids[0])
}

func (s *Sim) loadBalancerStatus(c *call) (reply, error) {
	tree, err := s.LoadBalancing.LoadBalancerStatus(c.r.Context(), c.ids[0])
	if err != nil {
		return reply{}, err
	}
	st, _ := s.LoadBalancing.LoadBalancer(c.ids[0])
	return ok(statusOut(st, tree)), nil
}
