package octavia

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

// Owned lists the load balancers that carry tags, oldest first.
func Owned(ctx context.Context, lbc openstack.LoadBalancing, tags []string) ([]openstack.LoadBalancer, error) {
	lbs, err := lbc.ListLoadBalancers(ctx, tags)
	slices.SortFunc(lbs, func(a, b openstack.LoadBalancer) int { return a.CreatedAt.Compare(b.CreatedAt.Time) })
	return lbs, err
}

// Read returns what Octavia holds for a load balancer in three reads, however many ports it serves: its
// listeners, its pools, and the members and health monitors of all its pools (the status tree).
func Read(ctx context.Context, lbc openstack.LoadBalancing, lbID string) (Current, error) {
	var cur Current
	var err error
	if cur.Listeners, err = lbc.ListListeners(ctx, lbID); err != nil {
		return cur, err
	}
	if cur.Pools, err = lbc.ListPools(ctx, lbID); err != nil {
		return cur, err
	}
	tree, err := lbc.LoadBalancerStatus(ctx, lbID)
	cur.Members, cur.Monitors = tree.Members, tree.Monitors
	return cur, err
}

// Layout is the listeners and pools of one load balancer, as a listing of every load balancer's held them.
type Layout struct {
	Listeners []openstack.Listener
	Pools     []openstack.Pool
}

// Layouts lists the listeners and pools that carry tags, of every load balancer, by load balancer ID: two
// paginated lists, where Read makes one of each per load balancer.
func Layouts(ctx context.Context, lbc openstack.LoadBalancing, tags []string) (map[string]Layout, error) {
	ls, err := lbc.ListTaggedListeners(ctx, tags)
	if err != nil {
		return nil, err
	}
	ps, err := lbc.ListTaggedPools(ctx, tags)
	if err != nil {
		return nil, err
	}
	out := map[string]Layout{}
	for _, l := range ls {
		for _, ref := range l.LoadBalancers {
			lay := out[ref.ID]
			lay.Listeners = append(lay.Listeners, l)
			out[ref.ID] = lay
		}
	}
	for _, p := range ps {
		for _, ref := range p.LoadBalancers {
			lay := out[ref.ID]
			lay.Pools = append(lay.Pools, p)
			out[ref.ID] = lay
		}
	}
	return out, nil
}

// ReadWith is Read for a load balancer whose listeners and pools a listing held (Layouts): one read, its status
// tree, where Read makes three. The tree is read now, and the layout stands only where the tree shows the same
// listeners and the same pools on them; otherwise (a change since the listing, or a listener or pool without
// the tags) the listeners and pools are read as Read does.
func ReadWith(ctx context.Context, lbc openstack.LoadBalancing, lbID string, l Layout) (Current, error) {
	tree, err := lbc.LoadBalancerStatus(ctx, lbID)
	if err != nil {
		return Current{}, err
	}
	if !l.matches(tree) {
		return Read(ctx, lbc, lbID)
	}
	return Current{Listeners: l.Listeners, Pools: l.Pools, Members: tree.Members, Monitors: tree.Monitors}, nil
}

// matches says whether the layout has the tree's listeners, and the tree's pools as its pools on a listener.
func (l Layout) matches(tree openstack.StatusTree) bool {
	listeners := make([]string, 0, len(l.Listeners))
	for _, x := range l.Listeners {
		listeners = append(listeners, x.ID)
	}
	var pools []string
	for _, p := range l.Pools {
		if p.ListenerID != "" {
			pools = append(pools, p.ID)
		}
	}
	slices.Sort(listeners)
	slices.Sort(pools)
	return slices.Equal(listeners, slices.Sorted(slices.Values(tree.Listeners))) &&
		slices.Equal(pools, slices.Sorted(maps.Keys(tree.Members)))
}

// Apply makes one step of a plan on the load balancer lbID; what it creates carries tags.
func Apply(ctx context.Context, lbc openstack.LoadBalancing, lbID string, s Step, tags []string) error {
	switch s.Kind {
	case DeletePool:
		return openstack.IgnoreNotFound(lbc.DeletePool(ctx, s.ID))
	case DeleteListener:
		return openstack.IgnoreNotFound(lbc.DeleteListener(ctx, s.ID))
	case CreateListener:
		_, err := lbc.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lbID, Name: s.Listener.Name,
			Protocol: s.Listener.Protocol, ProtocolPort: s.Listener.Port, Tags: tags})
		return err
	case CreatePool:
		_, err := lbc.CreatePool(ctx, openstack.PoolSpec{ListenerID: s.ID, Name: s.Listener.PoolName(), Protocol: s.Listener.Protocol,
			LBAlgorithm: s.Listener.Algorithm, Tags: tags})
		return err
	case ReplaceMembers:
		return lbc.ReplaceMembers(ctx, s.ID, s.Listener.Members)
	case DeleteMember:
		return openstack.IgnoreNotFound(lbc.DeleteMember(ctx, s.ID, s.Member.ID))
	case AddMembers:
		return addMembers(ctx, lbc, s.ID, s.Add)
	case CreateMonitor:
		m := *s.Listener.Monitor
		m.PoolID, m.Name, m.Tags = s.ID, s.Listener.Name, tags
		return lbc.CreateMonitor(ctx, m)
	case DeleteMonitor:
		return openstack.IgnoreNotFound(lbc.DeleteMonitor(ctx, s.ID))
	}
	return nil
}

// Create creates a load balancer: with its whole graph (want) in one request when the provider builds one,
// else bare (Plan then adds listeners, pools and members one step at a time). When Octavia refuses the
// graph (a port it cannot serve, a quota), the load balancer is created bare, so that the plan builds what
// Octavia accepts; refused is that refusal. spec.Tags go on every object of the graph.
func Create(ctx context.Context, lbc openstack.LoadBalancing, prov Provider, spec openstack.LoadBalancerSpec, want []Listener) (lb *openstack.LoadBalancer, refused, err error) {
	spec.Provider = prov.Name
	if prov.FullyPopulated && len(want) > 0 {
		full := spec
		full.Listeners = Graph(want, spec.Tags)
		lb, err := lbc.CreateLoadBalancer(ctx, full)
		if err == nil || !openstack.Rejected(err) {
			return lb, nil, err
		}
		refused = err
	}
	lb, err = lbc.CreateLoadBalancer(ctx, spec)
	return lb, refused, err
}

// monitoredFirstLimit is the most monitored pools a load balancer may have for their members to go before it
// (one request each); one with more is deleted whole at once, and takes the risk MembersFirst describes.
const monitoredFirstLimit = 8

// Delete takes a load balancer one step towards gone: with everything on it, in one request. Before that, while
// the load balancer is ACTIVE: on a provider with MonitorsFirst, its health monitors go, one per call; on one
// with MembersFirst instead, a load balancer with a few monitored pools loses those pools' members, one pool
// per call (one in ERROR goes whole). While Octavia applies a step (PENDING_*) nothing is asked; gone already is
// fine, and so is busy: the caller asks again until the load balancer is gone. The load balancer's own delete is
// sent again only after DeleteResend (see Deletes).
func Delete(ctx context.Context, lbc openstack.LoadBalancing, prov Provider, lb openstack.LoadBalancer, deletes *Deletes) error {
	if strings.HasPrefix(lb.ProvisioningStatus, "PENDING_") {
		return nil // Octavia is applying the last step; the caller looks again
	}
	progress := ""
	if (prov.MembersFirst || prov.MonitorsFirst) && lb.ProvisioningStatus == "ACTIVE" {
		tree, err := lbc.LoadBalancerStatus(ctx, lb.ID)
		if err != nil {
			return openstack.IgnoreNotFound(err)
		}
		progress = membersLeft(tree)
		if prov.MonitorsFirst && !prov.MembersFirst && len(tree.Monitors) > 0 {
			pool := slices.Sorted(maps.Keys(tree.Monitors))[0]
			// 8.0.0 shows a monitor whose delete it has queued as ACTIVE again, and a second delete of it left its
			// pool PENDING_UPDATE for good (the provider never answered it), and with it the load balancer and the
			// Service's namespace (make test, 2026-11-28).
			return deleteOnce(ctx, lbc.DeleteMonitor, tree.Monitors[pool].ID, false, deletes, "")
		}
		if pool, ok := monitoredWithMembers(tree); ok && prov.MembersFirst {
			return ignoreGoneOrBusy(lbc.ReplaceMembers(ctx, pool, nil))
		}
	}
	// In ERROR, the provider is done with an earlier delete, and failed: it is sent again at once.
	return deleteOnce(ctx, lbc.DeleteLoadBalancer, lb.ID, lb.ProvisioningStatus == "ERROR", deletes, progress)
}

// membersLeft describes how many members the load balancer's pools still have: the progress of its delete.
func membersLeft(tree openstack.StatusTree) string {
	n := 0
	for _, ms := range tree.Members {
		n += len(ms)
	}
	return strconv.Itoa(n)
}

// deleteOnce sends the delete of the object id unless one was sent, or made progress, within DeleteResend (see
// Deletes), or now is set; gone already and busy are fine.
func deleteOnce(ctx context.Context, del func(context.Context, string) error, id string, now bool, deletes *Deletes, progress string) error {
	at := time.Now()
	if !now && !deletes.Due(id, at, progress) {
		return nil // the provider has it in its queue
	}
	err := del(ctx, id)
	if err == nil {
		deletes.Sent(id, at, progress)
	}
	return ignoreGoneOrBusy(err)
}

// monitoredWithMembers names the first monitored pool that still has members, when the load balancer has no
// more than monitoredFirstLimit monitored pools.
func monitoredWithMembers(tree openstack.StatusTree) (string, bool) {
	if len(tree.Monitors) > monitoredFirstLimit {
		return "", false
	}
	for _, pool := range slices.Sorted(maps.Keys(tree.Monitors)) {
		if len(tree.Members[pool]) > 0 {
			return pool, true
		}
	}
	return "", false
}

// ignoreGoneOrBusy drops the errors of an object already gone or busy with another change.
func ignoreGoneOrBusy(err error) error {
	if err = openstack.IgnoreNotFound(err); err != nil && openstack.KindOf(err) != openstack.KindImmutable {
		return err
	}
	return nil
}

// addMembers sends pool's members as Octavia lists them, with their subnets (the status tree Plan reads has none,
// and the OVN provider refuses a member without one outside the VIP's subnet), and add: a batch update that
// removes none.
func addMembers(ctx context.Context, lbc openstack.LoadBalancing, pool string, add []openstack.MemberSpec) error {
	have, err := lbc.ListMembers(ctx, pool)
	if err != nil {
		return err
	}
	_, added := memberDiff(have, add)
	return lbc.ReplaceMembers(ctx, pool, append(specsOf(have), added...))
}
