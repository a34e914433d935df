package fake

import (
	"slices"
	"strings"

	"github.com/raven-net/raven/internal/openstack"
)

// octIndex is what an indexed Octavia keeps beside its load balancers, so that it serves thousands of them
// without looking at each: their IDs in order, and the load balancer of every listener, pool and health monitor.
type octIndex struct {
	lbs ordered
	// tags: the load balancers by tag (set at create, never changed).
	tags  sets
	owner map[string]string
	// counts are each load balancer's children as last counted (after its last change), total their sum.
	counts map[string]OctaviaCounts
	total  OctaviaCounts
}

// Index makes o keep its load balancers in ID order and the load balancer of each child by the child's ID, built
// from what it holds now, so that no call looks at every load balancer.
func (o *Octavia) Index() {
	o.mu.Lock()
	defer o.mu.Unlock()
	ix := &octIndex{tags: sets{}, owner: map[string]string{}, counts: map[string]OctaviaCounts{}}
	for _, s := range o.lbs {
		ix.addLB(s)
		ix.recount(s)
	}
	o.ix = ix
}

// addLB indexes a load balancer with its children.
func (ix *octIndex) addLB(s *lbState) {
	if ix == nil {
		return
	}
	ix.lbs.add(s.lb.ID)
	ix.tags.tag(s.lb.ID, s.lb.Tags, false)
	for _, l := range s.listeners {
		ix.owner[l.ID] = s.lb.ID
	}
	for _, p := range s.pools {
		ix.owner[p.ID] = s.lb.ID
		if p.MonitorID != "" {
			ix.owner[p.MonitorID] = s.lb.ID
		}
	}
}

// removeLB forgets a deleted load balancer with its children.
func (ix *octIndex) removeLB(s *lbState) {
	if ix == nil {
		return
	}
	ix.lbs.remove(s.lb.ID)
	ix.tags.tag(s.lb.ID, s.lb.Tags, true)
	ix.total = ix.total.minus(ix.counts[s.lb.ID])
	delete(ix.counts, s.lb.ID)
	for _, l := range s.listeners {
		delete(ix.owner, l.ID)
	}
	for _, p := range s.pools {
		delete(ix.owner, p.ID)
		delete(ix.owner, p.MonitorID)
	}
}

// own records the load balancer of a new child.
func (ix *octIndex) own(child, lbID string) {
	if ix != nil {
		ix.owner[child] = lbID
	}
}

// disown forgets deleted children.
func (ix *octIndex) disown(children ...string) {
	if ix == nil {
		return
	}
	for _, c := range children {
		delete(ix.owner, c)
	}
}

// holdersOf are the load balancers that may hold the child: its own when indexed, else all.
func (o *Octavia) holdersOf(child string) []*lbState {
	if o.ix == nil {
		out := make([]*lbState, 0, len(o.lbs))
		for _, s := range o.lbs {
			out = append(out, s)
		}
		return out
	}
	if s, ok := o.lbs[o.ix.owner[child]]; ok {
		return []*lbState{s}
	}
	return nil
}

// findMonitor finds the pool whose health monitor this is, with its load balancer.
func (o *Octavia) findMonitor(id string) (*lbState, *openstack.Pool) {
	for _, s := range o.holdersOf(id) {
		for _, p := range s.pools {
			if p.MonitorID == id {
				return s, p
			}
		}
	}
	return nil, nil
}

// LoadBalancersPage lists a page of load balancers with everything under them; q selects by tags, name and
// description. Each listed load balancer counts as a read of it (see PendingReads).
func (o *Octavia) LoadBalancersPage(q Query) (Page[LoadBalancerState], error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("ListLoadBalancers", false); err != nil {
		return Page[LoadBalancerState]{}, err
	}
	var out Page[LoadBalancerState]
	for _, id := range o.idsAfter(q.Marker, q.Tags) {
		s, ok := o.lbs[id]
		if !ok || !matchQuery(q, obj{tags: s.lb.Tags, name: s.lb.Name, descr: s.lb.Description}) {
			continue
		}
		if q.Limit > 0 && len(out.Items) == q.Limit {
			out.More = true
			break
		}
		if o.read(s) {
			out.Items = append(out.Items, s.state())
		}
	}
	return out, nil
}

// idsAfter are the IDs after marker, in order, of the load balancers that may carry the tags (when indexed,
// some may be gone or lack a tag).
func (o *Octavia) idsAfter(marker string, tags []string) []string {
	if o.ix != nil && len(tags) > 0 {
		return o.ix.tags.smallest(tags).after(marker)
	}
	if o.ix != nil {
		return o.ix.lbs.after(marker)
	}
	ids := make([]string, 0, len(o.lbs))
	for id := range o.lbs {
		if id > marker {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// LoadBalancer returns one load balancer with everything under it, without counting a call or a read.
func (o *Octavia) LoadBalancer(id string) (LoadBalancerState, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.lbs[id]
	if !ok {
		return LoadBalancerState{}, false
	}
	return s.state(), true
}

// OctaviaCounts are the numbers of objects an Octavia holds.
type OctaviaCounts struct {
	LoadBalancers, Listeners, Pools, Members, Monitors int
	// Pending are the load balancers whose last change has not completed (PENDING_*).
	Pending int
}

// Count counts the objects o holds, without counting a call. Indexed, it costs nothing: each change of a
// load balancer recounts that load balancer.
func (o *Octavia) Count() OctaviaCounts {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ix != nil {
		return o.ix.total
	}
	var c OctaviaCounts
	for _, s := range o.lbs {
		c = c.plus(countOf(s))
	}
	return c
}

// countOf counts one load balancer and its children.
func countOf(s *lbState) OctaviaCounts {
	c := OctaviaCounts{LoadBalancers: 1, Listeners: len(s.listeners), Pools: len(s.pools), Monitors: len(s.monitors)}
	for _, p := range s.pools { // a pool's members go with it: members holds no other
		c.Members += len(s.members[p.ID])
	}
	if strings.HasPrefix(s.lb.ProvisioningStatus, "PENDING_") {
		c.Pending = 1
	}
	return c
}

// recount counts a load balancer again after a change.
func (ix *octIndex) recount(s *lbState) {
	if ix == nil {
		return
	}
	c := countOf(s)
	ix.total = ix.total.plus(c).minus(ix.counts[s.lb.ID])
	ix.counts[s.lb.ID] = c
}

func (c OctaviaCounts) plus(d OctaviaCounts) OctaviaCounts {
	return OctaviaCounts{LoadBalancers: c.LoadBalancers + d.LoadBalancers, Listeners: c.Listeners + d.Listeners, Pools: c.Pools + d.Pools,
		Members: c.Members + d.Members, Monitors: c.Monitors + d.Monitors, Pending: c.Pending + d.Pending}
}

func (c OctaviaCounts) minus(d OctaviaCounts) OctaviaCounts {
	return c.plus(OctaviaCounts{LoadBalancers: -d.LoadBalancers, Listeners: -d.Listeners, Pools: -d.Pools, Members: -d.Members,
		Monitors: -d.Monitors, Pending: -d.Pending})
}

// Owner is the load balancer a listener, pool or health monitor is on.
func (o *Octavia) Owner(child string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.holdersOf(child) {
		for _, l := range s.listeners {
			if l.ID == child {
				return s.lb.ID, true
			}
		}
		for _, p := range s.pools {
			if p.ID == child || p.MonitorID == child {
				return s.lb.ID, true
			}
		}
	}
	return "", false
}
