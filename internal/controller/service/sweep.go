package service

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// Sweep returns the service part of the resync: a Service whose load balancer vanished out of band goes
// back to its reconciler, and the load balancers, VIP ports and floating IPs of Services that are gone
// are deleted once older than grace. swept counts what it removed.
func Sweep(c client.Reader, nm *neutron.Manager, lbc openstack.LoadBalancing, prov octavia.Provider, deletes *octavia.Deletes, repairs chan<- event.GenericEvent,
	grace time.Duration, swept func(kind string)) func(ctx context.Context, now time.Time) error {
	return func(ctx context.Context, now time.Time) error {
		var svcs corev1.ServiceList
		if err := c.List(ctx, &svcs); err != nil {
			return err
		}
		lbs, err := lbc.ListLoadBalancers(ctx, ownership.Selector(nm.C.ID, ownership.KindService))
		if err != nil {
			return err
		}
		fips, err := nm.N.ListFloatingIPs(ctx, openstack.Filter{Tags: ownership.Selector(nm.C.ID, ownership.KindService)})
		if err != nil {
			return err
		}
		seen, hasLB := owners(lbs, fips, nm.X.PortsOfKind(ownership.KindService))
		live := map[string]bool{}
		for i := range svcs.Items {
			s := &svcs.Items[i]
			live[string(s.UID)] = true
			if lostItsLoadBalancer(s, hasLB) {
				if !controller.Send(ctx, repairs, s) {
					return ctx.Err()
				}
			}
		}
		var errs []error
		for uid, created := range seen {
			if uid == "" || live[uid] || now.Sub(created) < grace {
				continue
			}
			done, err := Teardown(ctx, nm, lbc, prov, deletes, uid)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if done {
				klog.FromContext(ctx).Info("Deleted orphan load balancer objects", "serviceUID", uid)
				if swept != nil {
					swept("loadbalancer")
				}
			}
		}
		return errors.Join(errs...)
	}
}

// lostItsLoadBalancer tells a live, served Service that Raven has built (it has the finalizer) but whose load
// balancer is gone.
func lostItsLoadBalancer(s *corev1.Service, hasLB map[string]bool) bool {
	return Served(s) && s.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(s, annotations.ServiceFinalizer) && !hasLB[string(s.UID)]
}

// owners lists the Services that own load balancers, floating IPs or VIP ports, each with the time its
// oldest object was made, and says which of them have a load balancer.
func owners(lbs []openstack.LoadBalancer, fips []openstack.FloatingIP, vips []openstack.Port) (seen map[string]time.Time, hasLB map[string]bool) {
	seen, hasLB = map[string]time.Time{}, map[string]bool{}
	note := func(tags []string, created time.Time) string {
		o, _ := ownership.Parse(tags)
		if t, ok := seen[o.UID]; !ok || created.Before(t) {
			seen[o.UID] = created
		}
		return o.UID
	}
	for _, lb := range lbs {
		hasLB[note(lb.Tags, lb.CreatedAt.Time)] = true
	}
	for _, f := range fips {
		note(f.Tags, f.CreatedAt)
	}
	for _, p := range vips {
		note(p.Tags, p.CreatedAt)
	}
	return seen, hasLB
}
