package neutron

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// Neutron takes tags in the create request of ports only (tag-ports-during-bulk-creation); networks,
// subnets, subnet pools, routers and floating IPs are tagged by a second call. When that call fails (a 5xx,
// a timeout, a crash), the object exists without the tags by which Raven finds its own. So every such
// object is created with a marker in its description, derived from the tags it is about to get: a later
// attempt finds it by the marker and tags it (adoption) instead of making a second one. A tag call that
// fails is also answered by deleting the new object at once, where Neutron lets Raven.

// maxDescription is Neutron's limit on a description's length.
const maxDescription = 255

// Marker is the description Raven writes on an object it creates and then tags with tags.
func Marker(tags []string) string {
	d := "raven " + strings.Join(tags, " ")
	if len(d) > maxDescription {
		d = d[:maxDescription]
	}
	return d
}

// kind is what ensureTagged needs to know of one Neutron collection.
type kind[T any] struct {
	res  openstack.Resource
	list func(openstack.Networking) func(context.Context, openstack.Filter) ([]T, error)
	del  func(openstack.Networking) func(context.Context, string) error
	id   func(*T) string
	set  func(*T, []string)
}

var (
	networkKind = kind[openstack.Network]{res: openstack.ResourceNetworks,
		list: func(n openstack.Networking) func(context.Context, openstack.Filter) ([]openstack.Network, error) {
			return n.ListNetworks
		},
		del: func(n openstack.Networking) func(context.Context, string) error { return n.DeleteNetwork },
		id:  func(x *openstack.Network) string { return x.ID }, set: func(x *openstack.Network, t []string) { x.Tags = t }}
	subnetKind = kind[openstack.Subnet]{res: openstack.ResourceSubnets,
		list: func(n openstack.Networking) func(context.Context, openstack.Filter) ([]openstack.Subnet, error) {
			return n.ListSubnets
		},
		del: func(n openstack.Networking) func(context.Context, string) error { return n.DeleteSubnet },
		id:  func(x *openstack.Subnet) string { return x.ID }, set: func(x *openstack.Subnet, t []string) { x.Tags = t }}
	subnetPoolKind = kind[openstack.SubnetPool]{res: openstack.ResourceSubnetPools,
		list: func(n openstack.Networking) func(context.Context, openstack.Filter) ([]openstack.SubnetPool, error) {
			return n.ListSubnetPools
		},
		del: func(n openstack.Networking) func(context.Context, string) error { return n.DeleteSubnetPool },
		id:  func(x *openstack.SubnetPool) string { return x.ID }, set: func(x *openstack.SubnetPool, t []string) { x.Tags = t }}
	routerKind = kind[openstack.Router]{res: openstack.ResourceRouters,
		list: func(n openstack.Networking) func(context.Context, openstack.Filter) ([]openstack.Router, error) {
			return n.ListRouters
		},
		del: func(n openstack.Networking) func(context.Context, string) error { return n.DeleteRouter },
		id:  func(x *openstack.Router) string { return x.ID }, set: func(x *openstack.Router, t []string) { x.Tags = t }}
	portKind = kind[openstack.Port]{res: openstack.ResourcePorts,
		list: func(n openstack.Networking) func(context.Context, openstack.Filter) ([]openstack.Port, error) {
			return n.ListPorts
		},
		del: func(n openstack.Networking) func(context.Context, string) error { return n.DeletePort },
		id:  func(x *openstack.Port) string { return x.ID }, set: func(x *openstack.Port, t []string) { x.Tags = t }}
	floatingIPKind = kind[openstack.FloatingIP]{res: openstack.ResourceFloatingIPs,
		list: func(n openstack.Networking) func(context.Context, openstack.Filter) ([]openstack.FloatingIP, error) {
			return n.ListFloatingIPs
		},
		del: func(n openstack.Networking) func(context.Context, string) error { return n.DeleteFloatingIP },
		id:  func(x *openstack.FloatingIP) string { return x.ID }, set: func(x *openstack.FloatingIP, t []string) { x.Tags = t }}
)

// ensureTagged returns an object of kind k that carries tags: one of Raven's project whose description holds
// the marker of tags (an earlier create whose tag call failed), tagged now, or else a new one made by create
// with the marker as description. The caller has already looked for the object by its tags. The marker is no
// secret (any reader of Raven's objects sees it): with credentials that see every project, only the project
// of Raven's token tells its own objects from another project's that copy the marker. (A Neutron without
// Keystone has no projects, and n.ProjectID is "".)
func ensureTagged[T any](ctx context.Context, n openstack.Networking, k kind[T], tags []string,
	create func(ctx context.Context, description string) (*T, error)) (*T, error) {
	marker := Marker(tags)
	found, err := k.list(n)(ctx, openstack.Filter{Description: marker, ProjectID: n.ProjectID()})
	if err != nil {
		return nil, err
	}
	if len(found) > 0 {
		x := &found[0]
		if err := n.ReplaceTags(ctx, k.res, k.id(x), tags); err != nil {
			return nil, err
		}
		k.set(x, tags)
		klog.FromContext(ctx).Info("Adopted an object whose tagging had failed", "resource", k.res, "id", k.id(x))
		return x, nil
	}
	x, err := create(ctx, marker)
	if err != nil {
		return nil, err
	}
	if err := n.ReplaceTags(ctx, k.res, k.id(x), tags); err != nil {
		return nil, undoCreate(ctx, n, k, k.id(x), err)
	}
	k.set(x, tags)
	return x, nil
}

// undoCreate deletes an object whose tag call failed; if the delete fails too, the marker finds it next
// time. The delete runs even when ctx has ended (a timeout of the tag call is one reason to be here).
func undoCreate[T any](ctx context.Context, n openstack.Networking, k kind[T], id string, tagErr error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := openstack.IgnoreNotFound(k.del(n)(dctx, id)); err != nil {
		klog.FromContext(ctx).Error(err, "Deleting an object whose tagging failed; it will be adopted by its description",
			"resource", k.res, "id", id)
		return fmt.Errorf("tagging new %s %s: %w", strings.TrimSuffix(string(k.res), "s"), id, errors.Join(tagErr, err))
	}
	return fmt.Errorf("tagging new %s %s (deleted it again): %w", strings.TrimSuffix(string(k.res), "s"), id, tagErr)
}

// CreateFloatingIP makes a floating IP tagged with tags, or adopts one an earlier attempt made but could
// not tag (such a floating IP may already sit on the port, and a second create would fail with 409).
func (m *Manager) CreateFloatingIP(ctx context.Context, spec openstack.FloatingIPSpec, tags []string) (*openstack.FloatingIP, error) {
	return ensureTagged(ctx, m.N, floatingIPKind, tags, func(ctx context.Context, d string) (*openstack.FloatingIP, error) {
		spec.Description = d
		return m.N.CreateFloatingIP(ctx, spec)
	})
}

// KeepTags makes sure a port created with tags in its request carries them. Neutron can answer a create
// without them (a create it retried internally after a database deadlock was seen to lose them), and an
// untagged port is nobody's: Raven would neither find nor delete it. The port is tagged again, or deleted
// when that fails too.
func KeepTags(ctx context.Context, n openstack.Networking, p *openstack.Port, tags []string) error {
	if len(tags) == 0 || hasAll(p.Tags, tags) {
		return nil
	}
	klog.FromContext(ctx).Info("Neutron created a port without the tags of its request; tagging it", "port", p.ID)
	if err := n.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, tags); err != nil {
		return undoCreate(ctx, n, portKind, p.ID, err)
	}
	p.Tags = tags
	return nil
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// AdoptMarked tags the cluster's ports that carry Raven's marker in their description but not its tags (a
// create whose tags Neutron lost, while Raven did not see the answer), so that the next listing shows them
// to the index, the repairs and the sweep. It returns how many it tagged. Only the cluster's networks (those
// with its tag) are looked at: Raven makes its ports on them alone.
func (m *Manager) AdoptMarked(ctx context.Context) (int, error) {
	cluster := ownership.ClusterSelector(m.C.ID)
	nets, err := m.N.ListNetworks(ctx, openstack.Filter{Tags: cluster})
	if err != nil {
		return 0, err
	}
	ids := make([]string, len(nets))
	for i, x := range nets {
		ids[i] = x.ID
	}
	if len(ids) == 0 {
		return 0, nil
	}
	ports, err := m.N.ListPorts(ctx, openstack.Filter{DeviceOwner: DeviceOwner, NotTagsAny: cluster, NetworkIDs: ids})
	if err != nil {
		return 0, err
	}
	prefix := Marker(cluster) + " "
	n := 0
	for _, p := range ports {
		if !strings.HasPrefix(p.Description, prefix) || len(p.Description) >= maxDescription {
			continue // not this cluster's, or a marker cut short: its tags cannot be read back whole
		}
		tags := strings.Fields(strings.TrimPrefix(p.Description, "raven "))
		if err := m.N.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, tags); err != nil {
			return n, err
		}
		klog.FromContext(ctx).Info("Tagged a port that carried this cluster's marker but not its tags", "port", p.ID, "name", p.Name)
		n++
	}
	return n, nil
}
