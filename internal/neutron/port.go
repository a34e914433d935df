package neutron

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// DeviceOwner marks the ports Raven makes for pods.
const DeviceOwner = "raven:pod"

// ErrNotLoaded says the pod's port is not known yet: Raven is still listing Neutron's ports after a start.
var ErrNotLoaded = errors.New("the ports are still being listed from Neutron")

// PodRef names a pod, and the node it is scheduled to (empty until it is).
type PodRef struct {
	UID, Namespace, Name, Node string
	// SecurityGroups are the groups the pod's port must carry (its NetworkPolicies'); nil: the cluster's
	// pod groups.
	SecurityGroups []string
	// Keep, when set, is the address of the port the pod's annotation names: a port made for the pod asks
	// for it first, and takes what Neutron gives only when it is not free.
	Keep *Address
	// VM is set when the pod's node is a nested node: its port is not bound to the node (the trunk's
	// parent is), comes from the node's trunk pool when pools are on, and is a subport of the VM's trunk
	// (Manager.Attach).
	VM *VMNode
}

// bindHost is the host the pod's port is bound to: its node, or none for a nested node's pod.
func (pod PodRef) bindHost() string {
	if pod.VM != nil {
		return ""
	}
	return pod.Node
}

// groups are the security groups of pod's port.
func (m *Manager) groups(pod PodRef) []string {
	if pod.SecurityGroups != nil {
		return pod.SecurityGroups
	}
	return m.C.PodSecurityGroups
}

// sameGroups says whether a port carries exactly groups (nil groups: whatever it has is right).
func sameGroups(have, want []string) bool {
	if want == nil {
		return true
	}
	return slices.Equal(slices.Sorted(slices.Values(have)), slices.Sorted(slices.Values(want)))
}

func deref(p *openstack.Port) openstack.Port {
	if p == nil {
		return openstack.Port{}
	}
	return *p
}

// dropExtraPorts deletes the pod's ports other than the one to keep, and returns that one (nil when the pod
// has no port on network): preferred if it is there, else the first on network.
func (m *Manager) dropExtraPorts(ctx context.Context, uid, network, preferred string) (*openstack.Port, error) {
	ports := m.X.PortsOf(uid)
	var keep *openstack.Port
	for i := range ports {
		if ports[i].ID == preferred && ports[i].NetworkID == network {
			keep = &ports[i]
		}
	}
	for i := range ports {
		p := ports[i]
		if keep == nil && p.NetworkID == network {
			keep = &ports[i]
			continue
		}
		if keep != nil && p.ID == keep.ID {
			continue
		}
		if err := m.deletePort(ctx, p.ID); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// loadPortsOf puts the ports Neutron holds for a pod (by device_id) into the index.
func (m *Manager) loadPortsOf(ctx context.Context, uid string) error {
	// By the owner's tag, not device_id: a nested pod's port has none (a subport may not).
	ports, err := m.N.ListPorts(ctx, openstack.Filter{Tags: ownership.UIDSelector(m.C.ID, uid)})
	if err != nil {
		return err
	}
	for _, p := range ports {
		if !m.X.Known(p.ID) {
			m.X.PutPort(m.C.ID, p)
		}
	}
	return nil
}

// adoptUntagged finds a port of the pod that a crash left untagged, and tags it.
func (m *Manager) adoptUntagged(ctx context.Context, uid, network string, owner ownership.Owner) (*openstack.Port, error) {
	found, err := m.N.ListPorts(ctx, openstack.Filter{DeviceID: uid, NetworkID: network})
	if err != nil {
		return nil, err
	}
	for _, p := range found {
		if p.DeviceOwner == DeviceOwner {
			if err := m.N.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, owner.Tags()); err != nil {
				return nil, err
			}
			p.Tags = owner.Tags()
			m.X.PutPort(m.C.ID, p)
			return &p, nil
		}
	}
	return nil, nil
}

// create makes one port: through the batcher when there is one, tagged in the create request when Neutron
// allows it, in a second call otherwise.
func (m *Manager) create(ctx context.Context, spec openstack.PortSpec) (*openstack.Port, error) {
	switch {
	case m.C.Caps.TagsOnPortCreate && m.B != nil:
		return m.B.Create(ctx, spec)
	case m.C.Caps.TagsOnPortCreate:
		p, err := m.N.CreatePort(ctx, spec)
		if err != nil {
			return nil, err
		}
		return p, KeepTags(ctx, m.N, p, spec.Tags)
	}
	tags := spec.Tags
	spec.Tags = nil
	p, err := m.N.CreatePort(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := m.N.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, tags); err != nil {
		return nil, err
	}
	p.Tags = tags
	return p, nil
}

// EnsurePort returns the pod's port on nn, creating it when the pod has none. Extra ports of the pod
// (a duplicate left by a crash, or a port on a network the namespace no longer has) are deleted; the port
// named by preferred (the one the pod's annotation already announces) is the one kept, so that a running
// pod never changes its address.
func (m *Manager) EnsurePort(ctx context.Context, pod PodRef, nn *NamespaceNet, preferred string) (port openstack.Port, created bool, err error) {
	if !m.X.PortsLoaded() {
		// Raven has just started and is still listing every port. A pod that announces its port waits for
		// the listing; a new one is served now, after asking Neutron for any port of its own.
		if preferred != "" {
			return port, false, ErrNotLoaded
		}
		if err := m.loadPortsOf(ctx, pod.UID); err != nil {
			return port, false, err
		}
	}
	keep, err := m.dropExtraPorts(ctx, pod.UID, nn.Network.ID, preferred)
	if err != nil {
		return port, false, err
	}
	if keep != nil {
		p, err := m.bind(ctx, *keep, pod.bindHost(), pod.SecurityGroups)
		return p, false, err
	}
	owner := ownership.Owner{Cluster: m.C.ID, Kind: ownership.KindPod, UID: pod.UID, Name: pod.Namespace + "/" + pod.Name}
	if p, ok, err := m.remake(ctx, pod, nn, owner); err != nil || ok {
		return p, ok, err
	}
	if p, ok, err := m.fromPool(ctx, nn, pod, owner); err != nil || ok {
		return p, ok, err
	}
	if !m.C.Caps.TagsOnPortCreate {
		// Without tags on create, a crash between create and tag leaves an untagged port: find it by device_id.
		if p, err := m.adoptUntagged(ctx, pod.UID, nn.Network.ID, owner); err != nil || p != nil {
			return deref(p), false, err
		}
	}
	p, err := m.create(ctx, m.portSpec(pod, nn, owner))
	if err != nil {
		return port, false, err
	}
	m.X.PutPort(m.C.ID, *p)
	return *p, true, nil
}

// fromPool takes a pool's port for the pod, when pools are on: its namespace's, its node's (pools.perNode),
// or, on a nested node, its node VM's trunk pool (subports attached in advance).
func (m *Manager) fromPool(ctx context.Context, nn *NamespaceNet, pod PodRef, owner ownership.Owner) (openstack.Port, bool, error) {
	if m.P == nil {
		return openstack.Port{}, false, nil
	}
	return m.P.Take(ctx, nn, pod, owner)
}

// portSpec is the create request of the pod's own port. A nested node's pod's port has no device_id: Neutron
// refuses a subport with one (PortInUse); its tags name the pod.
func (m *Manager) portSpec(pod PodRef, nn *NamespaceNet, owner ownership.Owner) openstack.PortSpec {
	spec := openstack.PortSpec{
		Name: pod.Name, NetworkID: nn.Network.ID, DeviceOwner: DeviceOwner, DeviceID: pod.UID,
		Description: Marker(owner.Tags()), Tags: owner.Tags(),
		HostID: pod.bindHost(), SecurityGroups: m.groups(pod),
	}
	if pod.VM != nil {
		spec.DeviceID = ""
	}
	if nn.Subnet != nil {
		spec.SubnetID = nn.Subnet.ID
	}
	return spec
}

// bind binds the port to node when the pod has one and the port is not bound there yet, and gives it the
// security groups groups (nil: leaves them), in one update. A pod's node never changes once set, so this
// binds an unbound port (a pod annotated before it was scheduled); it must happen before anything plugs the
// port: ML2/OVN keeps a port plugged first and bound later DOWN for good.
func (m *Manager) bind(ctx context.Context, p openstack.Port, node string, groups []string) (openstack.Port, error) {
	var u openstack.PortUpdate
	if node != "" && p.HostID != node {
		u.HostID = &node
	}
	if !sameGroups(p.SecurityGroups, groups) {
		u.SecurityGroups = &groups
	}
	if u.HostID == nil && u.SecurityGroups == nil {
		return p, nil
	}
	updated, err := m.N.UpdatePort(ctx, p.ID, u)
	if err != nil {
		return p, fmt.Errorf("updating port %s (node %s, security groups %v): %w", p.ID, node, groups, err)
	}
	m.X.PutPort(m.C.ID, *updated)
	return *updated, nil
}

// ReleasePorts deletes every port of the owner UID, or gives it back to its namespace's pool when pools
// recycle (see Pools.Recycle). It returns how many ports it released.
func (m *Manager) ReleasePorts(ctx context.Context, uid string) (int, error) {
	n := 0
	for _, p := range m.X.PortsOf(uid) {
		done, err := m.release(ctx, uid, p)
		if err != nil {
			return n, err
		}
		if done {
			n++
		}
	}
	return n, nil
}

// release deletes or recycles one port of uid; done is false when another worker has it in hand or it
// is no longer uid's.
func (m *Manager) release(ctx context.Context, uid string, p openstack.Port) (done bool, err error) {
	if _, busy := m.deleting.LoadOrStore(p.ID, struct{}{}); busy {
		return false, nil
	}
	defer m.deleting.Delete(p.ID)
	// Ports change hands (pools, recycling): act only if it is still this owner's, now that no other worker
	// can act on it.
	if !m.X.OwnedBy(p.ID, uid) {
		return false, nil
	}
	if m.P != nil && m.P.Cfg.Recycle {
		recycled, err := m.P.Recycle(ctx, m.X.NetworkByID(p.NetworkID), p)
		switch {
		case openstack.IsNotFound(err):
			m.X.DropPort(p.ID) // gone already
			return true, nil
		case err != nil:
			return false, err
		case recycled:
			return true, nil
		}
	}
	return true, m.deleteGuarded(ctx, p.ID)
}

// deletePort deletes a port and drops it from the index. While another worker deletes the same port it
// returns at once: that worker reports any failure and retries.
func (m *Manager) deletePort(ctx context.Context, id string) error {
	if _, busy := m.deleting.LoadOrStore(id, struct{}{}); busy {
		return nil
	}
	defer m.deleting.Delete(id)
	return m.deleteGuarded(ctx, id)
}

// deleteGuarded deletes a port whose guard in m.deleting the caller holds. A port that a trunk carries
// (Neutron refuses to delete it: 409) is taken off the trunk first: at once when Raven knows it is a subport,
// else after Neutron's refusal.
func (m *Manager) deleteGuarded(ctx context.Context, id string) error {
	if m.T != nil && m.T.Carries(id) {
		if err := m.T.Detach(ctx, id); err != nil {
			return err
		}
	}
	err := m.N.DeletePort(ctx, id)
	if m.T != nil && openstack.KindOf(err) == openstack.KindConflict {
		if derr := m.T.Detach(ctx, id); derr != nil {
			return errors.Join(err, derr)
		}
		err = m.N.DeletePort(ctx, id)
	}
	if err := openstack.IgnoreNotFound(err); err != nil {
		return err
	}
	m.X.DropPort(id)
	return nil
}

// Attach makes a nested pod's port a VLAN subport of its node VM's trunk (see Trunks.Attach).
func (m *Manager) Attach(ctx context.Context, vm VMNode, portID string) (Subport, error) {
	return m.AttachAt(ctx, vm, portID, 0)
}

// AttachAt is Attach for a port made again for a running pod: it keeps vlan, its former port's, when that is
// free (see Trunks.AttachAt).
func (m *Manager) AttachAt(ctx context.Context, vm VMNode, portID string, vlan int) (Subport, error) {
	if m.T == nil || m.T.WorkerSubnetID == "" {
		return Subport{}, errors.New("nested nodes are not configured (nested.workerSubnetID)")
	}
	return m.T.AttachAt(ctx, vm, portID, vlan)
}
