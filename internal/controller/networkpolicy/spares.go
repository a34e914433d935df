package networkpolicy

import (
	"context"
	"maps"
	"slices"
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

// refillTimeout bounds one refill: a few groups, three requests each.
const refillTimeout = time.Minute

// splitSpares takes the spare groups out of have. The spares that can be handed out come first, by slot; the
// others (with rules or on a port: a take that failed halfway; any spare while no policy exists or spares are
// off) are to be deleted.
func (r *Reconciler) splitSpares(have map[string]openstack.SecurityGroup, policies bool) (fit, unfit []openstack.SecurityGroup) {
	inUse := map[string]bool{}
	for _, p := range r.Neutron.X.PortsOfKind(ownership.KindPod) {
		for _, id := range p.SecurityGroups {
			inUse[id] = true
		}
	}
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

// refillSpares makes spare groups in the background until SpareGroups are ready: left are the ones this
// reconcile left untaken, unfit the ones it deletes. Nothing happens while a refill runs.
func (r *Reconciler) refillSpares(ctx context.Context, left, unfit []openstack.SecurityGroup) {
	taken := map[string]bool{}
	for _, sg := range slices.Concat(left, unfit) {
		if o, ok := ownership.Parse(sg.Tags); ok {
			taken[o.UID] = true
		}
	}
	var slots []int
	for i := 0; len(left)+len(slots) < r.SpareGroups; i++ {
		if !taken[policy.SpareKey(i)] {
			slots = append(slots, i)
		}
	}
	if len(slots) == 0 {
		return
	}
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

// waitSpares waits for a refill under way (tests).
func (r *Reconciler) waitSpares() { r.spares.wg.Wait() }
