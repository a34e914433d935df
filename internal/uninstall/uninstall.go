// Package uninstall removes what Raven made for one cluster once Raven is gone: every OpenStack object that
// carries the cluster's tag, and Raven's finalizers on Kubernetes objects, so that namespaces and Services are
// deleted without it. It never touches an OpenStack object without the cluster's tag: what such an object
// holds up is reported, not removed.
package uninstall

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// Options say what to remove and how long to wait for it.
type Options struct {
	// Cluster is the cluster ID whose tag marks what goes.
	Cluster string
	// Provider is the Octavia provider the load balancers were made with (its delete order).
	Provider octavia.Provider
	// RouterID is a router the configuration names (neutron.routerID): not the cluster's, but the cluster's
	// subnets are taken off it as off the cluster's own routers.
	RouterID string
	// WorkerSubnetID is the subnet of the nested node VMs' ports (nested.workerSubnetID): their trunks are
	// where a nested pod's port is taken off before it is deleted.
	WorkerSubnetID string
	// DryRun lists what would go and removes nothing.
	DryRun bool
	// Timeout bounds the whole removal; Poll is how often a step not yet done is looked at again.
	Timeout, Poll time.Duration
}

// Report counts what was removed (or, in a dry run, found), by kind.
type Report map[string]int

func (r Report) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r[k]))
	}
	return strings.Join(parts, " ")
}

// OpenStack removes the cluster's objects, those that hold others first: load balancers (with everything on
// them), floating IPs, ports, security groups, subnets (off their routers), networks, routers and subnet
// pools. Each step is repeated until nothing of its kind is left or the timeout passes; what is left then is
// in the error, with what Neutron said.
func OpenStack(ctx context.Context, n openstack.Networking, lb openstack.LoadBalancing, o Options) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	r := Report{}
	sel := ownership.ClusterSelector(o.Cluster)
	deletes := &octavia.Deletes{}
	routers, err := n.ListRouters(ctx, openstack.Filter{Tags: sel})
	if err != nil {
		return r, fmt.Errorf("listing the cluster's routers: %w", err)
	}
	routerIDs := []string{}
	for _, x := range routers {
		routerIDs = append(routerIDs, x.ID)
	}
	if o.RouterID != "" {
		routerIDs = append(routerIDs, o.RouterID)
	}
	steps := []step{
		{"loadbalancers", func() ([]object, error) {
			lbs, err := lb.ListLoadBalancers(ctx, sel)
			return objects(lbs, func(l openstack.LoadBalancer) object {
				return object{l.ID, l.Tags, func() error { return octavia.Delete(ctx, lb, o.Provider, l, deletes) }}
			}), err
		}},
		{"floatingips", func() ([]object, error) {
			fips, err := n.ListFloatingIPs(ctx, openstack.Filter{Tags: sel})
			return objects(fips, func(f openstack.FloatingIP) object {
				return object{f.ID, f.Tags, func() error { return n.DeleteFloatingIP(ctx, f.ID) }}
			}), err
		}},
		{"ports", func() ([]object, error) {
			ports, err := n.ListPorts(ctx, openstack.Filter{Tags: sel})
			return objects(ports, func(p openstack.Port) object {
				return object{p.ID, p.Tags, func() error { return deletePort(ctx, n, o.WorkerSubnetID, p) }}
			}), err
		}},
		{"securitygroups", func() ([]object, error) {
			sgs, err := n.ListSecurityGroups(ctx, openstack.Filter{Tags: sel})
			return objects(sgs, func(g openstack.SecurityGroup) object {
				return object{g.ID, g.Tags, func() error { return n.DeleteSecurityGroup(ctx, g.ID) }}
			}), err
		}},
		{"subnets", func() ([]object, error) {
			subnets, err := n.ListSubnets(ctx, openstack.Filter{Tags: sel})
			return objects(subnets, func(s openstack.Subnet) object {
				return object{s.ID, s.Tags, func() error { return deleteSubnet(ctx, n, routerIDs, s) }}
			}), err
		}},
		{"networks", func() ([]object, error) {
			nets, err := n.ListNetworks(ctx, openstack.Filter{Tags: sel})
			return objects(nets, func(x openstack.Network) object {
				return object{x.ID, x.Tags, func() error { return n.DeleteNetwork(ctx, x.ID) }}
			}), err
		}},
		{"routers", func() ([]object, error) {
			routers, err := n.ListRouters(ctx, openstack.Filter{Tags: sel})
			return objects(routers, func(x openstack.Router) object {
				return object{x.ID, x.Tags, func() error { return n.DeleteRouter(ctx, x.ID) }}
			}), err
		}},
		{"subnetpools", func() ([]object, error) {
			pools, err := n.ListSubnetPools(ctx, openstack.Filter{Tags: sel})
			return objects(pools, func(x openstack.SubnetPool) object {
				return object{x.ID, x.Tags, func() error { return n.DeleteSubnetPool(ctx, x.ID) }}
			}), err
		}},
	}
	for _, s := range steps {
		if err := s.run(ctx, o, r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// object is one OpenStack object found with the cluster's tag, and how to ask for it to go.
type object struct {
	id     string
	tags   []string
	delete func() error
}

func objects[T any](items []T, f func(T) object) []object {
	out := make([]object, 0, len(items))
	for _, it := range items {
		out = append(out, f(it))
	}
	return out
}

// step is one kind, listed by the cluster's tag.
type step struct {
	kind string
	list func() ([]object, error)
}

// run asks every listed object of the step to go, and lists again, until none is left (or, in a dry run,
// once). Objects whose tags do not name the cluster are skipped, whatever the listing returned.
func (s step) run(ctx context.Context, o Options, r Report) error {
	log := klog.FromContext(ctx).WithValues("kind", s.kind)
	seen := map[string]bool{}
	var last []error
	for {
		objs, err := s.list()
		if err != nil {
			return fmt.Errorf("listing the cluster's %s: %w", s.kind, err)
		}
		objs = slices.DeleteFunc(objs, func(x object) bool { return !ownership.Owns(o.Cluster, x.tags) })
		for _, x := range objs {
			seen[x.id] = true
		}
		r[s.kind] = len(seen)
		if len(objs) == 0 || o.DryRun {
			if o.DryRun {
				log.Info("Would remove", "count", len(objs))
			}
			return nil
		}
		last = last[:0]
		for _, x := range objs {
			if err := x.delete(); err != nil && !openstack.IsNotFound(err) {
				last = append(last, fmt.Errorf("%s %s: %w", s.kind, x.id, err))
			}
		}
		log.V(2).Info("Asked to remove", "count", len(objs), "refused", len(last))
		select {
		case <-ctx.Done():
			ids := make([]string, len(objs))
			for i, x := range objs {
				ids[i] = x.id
			}
			return fmt.Errorf("the cluster's %s %s are still there after the timeout: %w", s.kind, strings.Join(ids, ", "), errors.Join(append(last, ctx.Err())...))
		case <-time.After(o.Poll):
		}
	}
}

// deletePort deletes a port, taking it off the trunk that carries it first (a nested node's pod's port):
// Neutron refuses to delete a subport. The trunk is one of the node VMs' ports on the worker subnet.
func deletePort(ctx context.Context, n openstack.Networking, workerSubnetID string, p openstack.Port) error {
	if p.DeviceOwner == openstack.SubportOwner {
		if err := (&neutron.Trunks{N: n, WorkerSubnetID: workerSubnetID}).Detach(ctx, p.ID); err != nil {
			return fmt.Errorf("taking the port off its trunk: %w", err)
		}
	}
	return n.DeletePort(ctx, p.ID)
}

// deleteSubnet takes the subnet off the routers that have an interface on it, then deletes it.
func deleteSubnet(ctx context.Context, n openstack.Networking, routerIDs []string, s openstack.Subnet) error {
	for _, r := range routerIDs {
		ports, err := n.ListPorts(ctx, openstack.Filter{DeviceID: r})
		if err != nil {
			return err
		}
		for _, p := range ports {
			if !strings.Contains(p.DeviceOwner, "router_interface") || !onSubnet(p, s.ID) {
				continue
			}
			if err := n.RemoveRouterInterface(ctx, r, s.ID); err != nil && !openstack.IsNotFound(err) {
				return fmt.Errorf("taking subnet %s off router %s: %w", s.ID, r, err)
			}
		}
	}
	return n.DeleteSubnet(ctx, s.ID)
}

func onSubnet(p openstack.Port, subnetID string) bool {
	for _, ip := range p.FixedIPs {
		if ip.SubnetID == subnetID {
			return true
		}
	}
	return false
}
