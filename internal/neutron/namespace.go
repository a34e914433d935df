package neutron

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// Manager applies namespace and pod intent to Neutron and keeps the Index in step with what it did.
type Manager struct {
	N openstack.Networking
	C *Cluster
	X *Index
	// B, when set, groups pod port creates into bulk requests.
	B *Batcher
	// P, when set, hands out ready ports from per-namespace pools.
	P *Pools
	// T, when set, takes ports off trunks before deleting them and, with a worker subnet, puts nested nodes'
	// pods' ports on their VMs' trunks.
	T *Trunks
	// PageYield, when set, replaces the package's PageYield.
	PageYield time.Duration

	// deleting holds the ports being deleted, so that workers cleaning up after many pods deleted at once
	// do not send the same DELETE several times.
	deleting sync.Map
}

// ErrPortsRemain says a namespace cannot be torn down yet: pod ports are still on its network.
var ErrPortsRemain = errors.New("pod ports remain on the namespace network")

// EnsureNamespace makes sure the namespace has a network, a subnet from the pod subnet pool, and an
// interface on the cluster router. Each step is skipped when the index shows it done.
func (m *Manager) EnsureNamespace(ctx context.Context, uid, name string) (*NamespaceNet, error) {
	owner := ownership.Owner{Cluster: m.C.ID, Kind: ownership.KindNamespace, UID: uid, Name: name}
	nn := m.X.Network(uid)
	if nn == nil {
		// The index may predate a network made by another replica: ask Neutron before creating.
		nets, err := m.N.ListNetworks(ctx, openstack.Filter{Tags: owner.Tags()[:3]})
		if err != nil {
			return nil, err
		}
		if len(nets) > 0 {
			slices.SortFunc(nets, func(a, b openstack.Network) int { return a.CreatedAt.Compare(b.CreatedAt) })
			nn = &NamespaceNet{NamespaceUID: uid, Namespace: name, Network: nets[0]}
		} else {
			net, err := ensureTagged(ctx, m.N, networkKind, owner.Tags(), func(ctx context.Context, d string) (*openstack.Network, error) {
				return m.N.CreateNetwork(ctx, openstack.NetworkSpec{Name: "raven-" + m.C.ID + "-" + name, Description: d})
			})
			if err != nil {
				return nil, err
			}
			nn = &NamespaceNet{NamespaceUID: uid, Namespace: name, Network: *net}
		}
		m.X.SetNetwork(*nn)
	}
	if nn.Subnet == nil {
		subs, err := m.N.ListSubnets(ctx, openstack.Filter{NetworkID: nn.Network.ID, Tags: owner.Tags()[:3]})
		if err != nil {
			return nil, err
		}
		if len(subs) > 0 {
			nn.Subnet = &subs[0]
		} else {
			sub, err := ensureTagged(ctx, m.N, subnetKind, owner.Tags(), func(ctx context.Context, d string) (*openstack.Subnet, error) {
				return m.N.CreateSubnet(ctx, openstack.SubnetSpec{
					Name: nn.Network.Name, NetworkID: nn.Network.ID, SubnetPoolID: m.C.SubnetPoolID,
					PrefixLength: m.C.PrefixLength, Description: d, EnableDHCP: true,
				})
			})
			if err != nil {
				return nil, err
			}
			nn.Subnet = sub
		}
		m.X.SetNetwork(*nn)
	}
	if !nn.Attached {
		if err := attach(ctx, m.N, m.C.RouterID, nn.Subnet.ID); err != nil {
			return nil, fmt.Errorf("attaching subnet %s to router %s: %w", nn.Subnet.ID, m.C.RouterID, err)
		}
		nn.Attached = true
		m.X.SetNetwork(*nn)
	}
	return nn, nil
}

// DeleteNamespace removes the namespace's pool ports, router interface, subnet and network, in that
// order, once no pod port is left. Objects already gone are fine.
func (m *Manager) DeleteNamespace(ctx context.Context, uid string) error {
	nn := m.X.Network(uid)
	if nn == nil {
		var err error
		if nn, err = m.listNamespaceNet(ctx, uid); err != nil || nn == nil {
			return err
		}
	}
	if m.P != nil {
		m.P.Close(nn.Network.ID)
	}
	for _, p := range m.X.PortsOn(nn.Network.ID) {
		if o, _ := ownership.Parse(p.Tags); o.Kind == ownership.KindPod {
			return ErrPortsRemain
		}
		// A trunk pool's port is a subport: deletePort takes it off its trunk first.
		if err := m.deletePort(ctx, p.ID); err != nil {
			return err
		}
	}
	if nn.Subnet != nil {
		if err := m.deleteInUse(ctx, nn, func() error { return m.deleteSubnet(ctx, nn) }); err != nil {
			return inUse(err, "subnet", nn.Subnet.ID)
		}
	}
	del := func() error { return openstack.IgnoreNotFound(m.N.DeleteNetwork(ctx, nn.Network.ID)) }
	if err := m.deleteInUse(ctx, nn, del); err != nil {
		return inUse(err, "network", nn.Network.ID)
	}
	m.X.DropNetwork(uid)
	return nil
}

// deleteInUse runs del; when Neutron answers that the object is still in use, it deletes the cluster's pool
// ports that Neutron holds on the namespace network and the index does not (a bulk create whose answer was
// lost to a deadline made them), then runs del again. A pod port found there means a pod's port is still to
// be released.
func (m *Manager) deleteInUse(ctx context.Context, nn *NamespaceNet, del func() error) error {
	err := del()
	if openstack.KindOf(err) != openstack.KindConflict {
		return err
	}
	ports, err := m.N.ListPorts(ctx, openstack.Filter{NetworkID: nn.Network.ID, Tags: ownership.ClusterSelector(m.C.ID)})
	if err != nil {
		return err
	}
	for _, p := range ports {
		switch o, _ := ownership.Parse(p.Tags); o.Kind {
		case ownership.KindPod:
			return ErrPortsRemain
		case ownership.KindPool:
			if err := m.deletePort(ctx, p.ID); err != nil {
				return err
			}
			klog.FromContext(ctx).Info("Deleted a pool port Raven had lost track of", "port", p.ID, "network", nn.Network.ID)
		}
	}
	return del()
}

// deleteSubnet takes the namespace subnet off the cluster router, then deletes it.
func (m *Manager) deleteSubnet(ctx context.Context, nn *NamespaceNet) error {
	if nn.Attached {
		err := m.N.RemoveRouterInterface(ctx, m.C.RouterID, nn.Subnet.ID)
		if err != nil && !openstack.IsNotFound(err) && openstack.KindOf(err) != openstack.KindBadRequest {
			return err
		}
	}
	return openstack.IgnoreNotFound(m.N.DeleteSubnet(ctx, nn.Subnet.ID))
}

// listNamespaceNet asks Neutron for the namespace network the index does not hold, with its subnet; nil
// when there is none. The router interface is taken to be there (removing it is harmless when not).
func (m *Manager) listNamespaceNet(ctx context.Context, uid string) (*NamespaceNet, error) {
	owner := ownership.Owner{Cluster: m.C.ID, Kind: ownership.KindNamespace, UID: uid}
	nets, err := m.N.ListNetworks(ctx, openstack.Filter{Tags: owner.Tags()})
	if err != nil {
		return nil, err
	}
	if len(nets) == 0 {
		return nil, nil
	}
	nn := &NamespaceNet{NamespaceUID: uid, Network: nets[0], Attached: true}
	subs, err := m.N.ListSubnets(ctx, openstack.Filter{NetworkID: nets[0].ID})
	if err != nil {
		return nil, err
	}
	for i := range subs {
		if ownership.Owns(m.C.ID, subs[i].Tags) {
			nn.Subnet = &subs[i]
		}
	}
	return nn, nil
}

func inUse(err error, what, id string) error {
	if openstack.KindOf(err) == openstack.KindConflict {
		return fmt.Errorf("%s %s is still in use by ports Raven does not own; remove them to finish: %w", what, id, err)
	}
	return err
}
