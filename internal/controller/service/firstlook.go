package service

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// firstLookFor is how long the first look serves: a leader's first pass over every Service, at Kubernetes'
// published limits, is well within it.
const firstLookFor = 30 * time.Minute

// firstLook is one listing of the cluster's load balancers and Service floating IPs that the leader makes at its
// first Service reconcile, and that each Service's first reconcile reads instead of listing its own: at a cold
// start with 3,334 Services, those were 6,670 of its calls, where two paginated lists do; and the listeners and
// pools of every load balancer, 20,002 more calls at 10,001 Services, where two more paginated lists do. It only says what was
// there when it was listed, so it is trusted only where being late cannot lead to a duplicate or a leak:
//   - a Service it holds load balancers for gets those (oldest first, as octavia.Owned lists them), with their
//     listeners and pools (octavia.Layouts); the status tree is read as usual, and the listeners and pools
//     stand only where it shows the same ones (octavia.ReadWith), else they are read too;
//   - a Service it holds no load balancer for lists its own (it may have got one since);
//   - a Service it held with no floating IP, that wants none, skips the floating IP list; one that wants one,
//     or had one, lists its own.
//
// Each Service reads it once; after that, and after firstLookFor, every Service lists its own as before.
// The zero firstLook is ready: it lists at its first take.
type firstLook struct {
	mu     sync.Mutex
	listed time.Time // zero: not listed yet (or the listing failed)
	tried  bool
	lbs    map[string][]openstack.LoadBalancer // by owner UID; a Service's go once it took them
	fips   map[string]bool                     // owner UIDs with a floating IP
	// layouts are the load balancers' listeners and pools, by load balancer ID (nil: their listing failed).
	layouts map[string]octavia.Layout
}

// seen is what the first look held of one Service. ok is false when it holds nothing to trust: list as usual.
type seen struct {
	ok  bool
	lbs []openstack.LoadBalancer
	fip bool
	// layouts are the listeners and pools of lbs, by load balancer ID (none when their listing failed).
	layouts map[string]octavia.Layout
}

// take returns what the first look holds of the Service uid, once; the first call lists.
func (f *firstLook) take(ctx context.Context, r *Reconciler, uid string, now time.Time) seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.tried {
		f.tried = true
		f.list(ctx, r, now)
	}
	if f.listed.IsZero() {
		return seen{}
	}
	if now.Sub(f.listed) > firstLookFor {
		f.listed, f.lbs, f.fips, f.layouts = time.Time{}, nil, nil, nil // served its purpose
		return seen{}
	}
	lbs, ok := f.lbs[uid]
	if !ok {
		return seen{}
	}
	delete(f.lbs, uid) // once
	out := seen{ok: true, lbs: lbs, fip: f.fips[uid]}
	if f.layouts != nil {
		out.layouts = map[string]octavia.Layout{}
		for _, lb := range lbs {
			out.layouts[lb.ID] = f.layouts[lb.ID] // none listed: it had no listener nor pool with the tags
			delete(f.layouts, lb.ID)
		}
	}
	return out
}

// list lists the cluster's load balancers and Service floating IPs, and the load balancers' listeners and pools.
// A failure is logged, and every Service lists its own (or, for the listeners and pools, reads its own).
func (f *firstLook) list(ctx context.Context, r *Reconciler, now time.Time) {
	log := klog.FromContext(ctx)
	sel := ownership.Selector(r.Neutron.C.ID, ownership.KindService)
	lbs, err := r.LB.ListLoadBalancers(ctx, sel)
	if err != nil {
		log.Error(err, "Listing the cluster's load balancers at start; each Service lists its own")
		return
	}
	fips, err := r.Neutron.N.ListFloatingIPs(ctx, openstack.Filter{Tags: sel})
	if err != nil {
		log.Error(err, "Listing the cluster's floating IPs at start; each Service lists its own")
		return
	}
	f.lbs, f.fips = map[string][]openstack.LoadBalancer{}, map[string]bool{}
	for _, lb := range lbs {
		if o, ok := ownership.Parse(lb.Tags); ok && o.UID != "" {
			f.lbs[o.UID] = append(f.lbs[o.UID], lb)
		}
	}
	for _, l := range f.lbs {
		slices.SortFunc(l, func(a, b openstack.LoadBalancer) int { return a.CreatedAt.Compare(b.CreatedAt.Time) })
	}
	for _, fip := range fips {
		if o, ok := ownership.Parse(fip.Tags); ok && o.UID != "" {
			f.fips[o.UID] = true
		}
	}
	if f.layouts, err = octavia.Layouts(ctx, r.LB, sel); err != nil {
		log.Error(err, "Listing the cluster's listeners and pools at start; each Service reads its load balancer's own")
	}
	f.listed = now
	log.V(1).Info("Listed the cluster's load balancers and floating IPs for the first reconcile of each Service",
		"loadBalancers", len(lbs), "floatingIPs", len(fips))
}
