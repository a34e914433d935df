package networkpolicy

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/internal/policy"
)

// take is a spare group handed to a group of the policies.
type take struct {
	sg    openstack.SecurityGroup
	group policy.Group
}

// spareRefill makes spare groups in the background, one refill at a time.
type spareRefill struct {
	mu      sync.Mutex
	running bool
	wg      sync.WaitGroup
}

// spareCalm is how soon a reconcile that left the spares short comes back to refill them. Spares are made only
// after a calm reconcile (one that moved no port and took no spare): made beside a policy's port updates, they
// would slow them down (Neutron serves both from one worker here).
const spareCalm = 2 * time.Second

// spareShort refills the spares in the background when fewer than SpareGroups are ready and this reconcile was
// calm (work counts its port updates and takes); true when they are short and the refill must wait for
// a calm reconcile.
func (r *Reconciler) spareShort(ctx context.Context, policies bool, ready, work int) bool {
	if !policies || ready >= r.SpareGroups {
		return false
	}
	if work > 0 {
		return true
	}
	r.refillSpares(ctx)
	return false
}

// refillTimeout bounds one refill: a few groups, a few requests each.
const refillTimeout = time.Minute

// splitSpares takes the spare groups out of have. The spares that can be handed out come first, by slot; the
// others (with rules or on a port: a take that failed halfway; any spare while no policy exists or spares are
// off) are to be deleted.
func (r *Reconciler) splitSpares(have map[string]openstack.SecurityGroup, policies bool) (fit, unfit []openstack.SecurityGroup) {
	inUse := r.portGroups()
	for _, key := range slices.Sorted(maps.Keys(have)) {
		if !policy.IsSpare(key) {
			continue
		}
		sg := have[key]
		delete(have, key)
		if policies && r.SpareGroups > 0 && policy.Clean(sg, inUse) {
			fit = append(fit, sg)
			continue
		}
		unfit = append(unfit, sg)
	}
	return fit, unfit
}

// takeSpares writes the tags of the spares taken, a few at a time, then gives them their groups' names; true
// when a tag request failed (the group keeps its rules and ports, and the next reconcile replaces it).
func (r *Reconciler) takeSpares(ctx context.Context, takes []take, byPolicy map[string]*networkingv1.NetworkPolicy) (pending bool) {
	log := klog.FromContext(ctx)
	var mu sync.Mutex
	parallel(takes, func(t take) {
		if err := policy.Take(ctx, r.Neutron.N, r.Neutron.C.ID, t.sg, t.group); err != nil {
			mu.Lock()
			defer mu.Unlock()
			r.warnGroup(ctx, byPolicy, t.group.Key, "PolicyGroupCreate", "tagging spare security group "+t.sg.ID+" as "+t.group.Key, err)
			pending = true
			return
		}
		log.V(2).Info("Took a spare policy group", "group", t.group.Key, "id", t.sg.ID)
		if err := policy.Rename(ctx, r.Neutron.N, r.Neutron.C.ID, t.sg, t.group); err != nil {
			log.Error(err, "Renaming a spare policy group taken", "group", t.group.Key, "id", t.sg.ID)
		}
	})
	return pending
}

// refillSpares makes spare groups in the background until SpareGroups are ready. The refill reads the groups again first: a refill still under way when this reconcile read
// them may have made some since. Nothing happens while a refill runs.
func (r *Reconciler) refillSpares(ctx context.Context) {
	s := &r.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return
	}
	s.running = true
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			s.running = false
			s.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refillTimeout)
		defer cancel()
		log := klog.FromContext(ctx)
		have, _, err := policy.Read(ctx, r.Neutron.N, r.Neutron.C.ID)
		if err != nil {
			log.Error(err, "Reading the policy groups to refill the spares")
			return
		}
		var slots []int
		for i, n := 0, countFit(slices.Collect(maps.Values(have))); n+len(slots) < r.SpareGroups; i++ {
			if _, ok := have[policy.SpareKey(i)]; !ok {
				slots = append(slots, i)
			}
		}
		parallel(slots, func(i int) {
			sg, err := policy.CreateSpare(ctx, r.Neutron.N, r.Neutron.C.ID, i)
			if err != nil {
				log.Error(err, "Making a spare policy group", "slot", i)
				return
			}
			log.V(2).Info("Made a spare policy group", "slot", i, "id", sg.ID)
		})
	})
}

// recycle turns groups nothing wants into spares while fewer than SpareGroups are ready (left), in the slots
// no spare holds (left and unfit hold theirs). A group a port still carries, one that is not a policy's or a
// peer's, and every group while a refill runs (it chooses slots of its own) are returned in rest, to be deleted.
func (r *Reconciler) recycle(ctx context.Context, groups, held []openstack.SecurityGroup) (recycled int, rest []openstack.SecurityGroup) {
	r.spares.mu.Lock()
	refilling := r.spares.running
	r.spares.mu.Unlock()
	short := r.SpareGroups - countFit(held)
	if refilling || short <= 0 {
		return 0, groups
	}
	used := map[string]bool{}
	for _, sg := range held {
		if o, ok := ownership.Parse(sg.Tags); ok {
			used[o.UID] = true
		}
	}
	inUse := r.portGroups()
	log := klog.FromContext(ctx)
	slot := 0
	for _, sg := range groups {
		o, _ := ownership.Parse(sg.Tags)
		recyclable := strings.HasPrefix(o.UID, "np-") || strings.HasPrefix(o.UID, "peer-")
		if recycled == short || inUse[sg.ID] || !recyclable {
			rest = append(rest, sg)
			continue
		}
		for used[policy.SpareKey(slot)] {
			slot++
		}
		if err := policy.Recycle(ctx, r.Neutron.N, r.Neutron.C.ID, sg, slot); err != nil {
			log.V(2).Info("Policy group not recycled", "id", sg.ID, "err", err.Error())
			rest = append(rest, sg)
			continue
		}
		log.V(2).Info("Recycled a policy group as a spare", "group", o.UID, "id", sg.ID, "slot", slot)
		used[policy.SpareKey(slot)] = true
		recycled++
	}
	return recycled, rest
}

// countFit counts the groups that are spares without rules.
func countFit(groups []openstack.SecurityGroup) int {
	n := 0
	for _, sg := range groups {
		if o, ok := ownership.Parse(sg.Tags); ok && policy.IsSpare(o.UID) && policy.Clean(sg, nil) {
			n++
		}
	}
	return n
}

// portGroups are the IDs of the groups the cluster's pod ports carry.
func (r *Reconciler) portGroups() map[string]bool {
	inUse := map[string]bool{}
	for _, p := range r.Neutron.X.PortsOfKind(ownership.KindPod) {
		for _, id := range p.SecurityGroups {
			inUse[id] = true
		}
	}
	return inUse
}

// waitSpares waits for a refill under way (tests).
func (r *Reconciler) waitSpares() { r.spares.wg.Wait() }
