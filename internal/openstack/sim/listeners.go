package sim

import (
	"slices"
	"sort"
	"strings"

	"github.com/raven-net/raven/internal/openstack/fake"
)

// states are the load balancers a child list covers: the one of loadbalancer_id, or all.
func (s *Sim) states(lbID string) []fake.LoadBalancerState {
	if lbID == "" {
		return s.LoadBalancing.LoadBalancers()
	}
	if st, ok := s.LoadBalancing.LoadBalancer(lbID); ok {
		return []fake.LoadBalancerState{st}
	}
	return nil
}

// pageSlice pages items by ID.
func pageSlice[T any](items []T, id func(T) string, q fake.Query) ([]T, bool) {
	slices.SortFunc(items, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	i := sort.Search(len(items), func(i int) bool { return id(items[i]) > q.Marker })
	items = items[i:]
	if q.Limit > 0 && len(items) > q.Limit {
		return items[:q.Limit], true
	}
	return items, false
}

func (s *Sim) listListeners(c *call) (reply, error) {
	q, err := parseQuery(c.query, "loadbalancer_id", "tags")
	if err != nil {
		return reply{}, err
	}
	var all []listenerView
	for _, st := range s.states(q.LoadBalancerID) {
		for _, l := range st.Listeners {
			if !fake.HasTags(l.Tags, q.Tags) {
				continue
			}
			all = append(all, listenerOut(l, st.ID))
		}
	}
	id := func(v listenerView) string { return v.ID }
	page, more := pageSlice(all, id, q.Query)
	return c.page("listeners", orEmpty(page), len(page), more, lastID(page, id)), nil
}

func (s *Sim) createListener(c *call) (reply, error) {
	var in listenerIn
	if err := c.decode("listener", &in); err != nil {
		return reply{}, err
	}
	if in.DefaultPool != nil {
		return reply{}, bad("the simulator makes a listener's default_pool with the load balancer only")
	}
	c.items = 1
	l, err := s.LoadBalancing.CreateListener(c.r.Context(), in.spec())
	if err != nil {
		return reply{}, err
	}
	return created(map[string]any{"listener": listenerOut(*l, in.LoadBalancerID)}), nil
}

func (s *Sim) deleteListener(c *call) (reply, error) {
	return noContent(), s.LoadBalancing.DeleteListener(c.r.Context(), c.ids[0])
}

func (s *Sim) listPools(c *call) (reply, error) {
	q, err := parseQuery(c.query, "loadbalancer_id", "tags")
	if err != nil {
		return reply{}, err
	}
	var all []poolView
	for _, st := range s.states(q.LoadBalancerID) {
		for _, p := range st.Pools {
			if !fake.HasTags(p.Tags, q.Tags) {
				continue
			}
			all = append(all, poolOut(p, st.ID, st.Members[p.ID]))
		}
	}
	id := func(v poolView) string { return v.ID }
	page, more := pageSlice(all, id, q.Query)
	return c.page("pools", orEmpty(page), len(page), more, lastID(page, id)), nil
}

func (s *Sim) createPool(c *call) (reply, error) {
	var in poolIn
	if err := c.decode("pool", &in); err != nil {
		return reply{}, err
	}
	if in.ListenerID == "" || len(in.Members) > 0 {
		return reply{}, bad("the simulator makes a pool on a listener (listener_id), without members")
	}
	spec, err := in.spec()
	if err != nil {
		return reply{}, err
	}
	c.items = 1
	p, err := s.LoadBalancing.CreatePool(c.r.Context(), spec)
	if err != nil {
		return reply{}, err
	}
	lbID, _ := s.LoadBalancing.Owner(p.ID)
	return created(map[string]any{"pool": poolOut(*p, lbID, nil)}), nil
}

func (s *Sim) deletePool(c *call) (reply, error) {
	return noContent(), s.LoadBalancing.DeletePool(c.r.Context(), c.ids[0])
}
