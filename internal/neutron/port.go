package neutron

import (
	"context"
	"fmt"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// DeviceOwner marks the ports Raven makes for pods.
const DeviceOwner = "raven:pod"

// PodRef names a pod.
type PodRef struct {
	UID, Namespace, Name string
}

// EnsurePort returns the pod's port on nn, creating it when the pod has none. Extra ports of the pod
// (a duplicate left by a crash, or a port on a network the namespace no longer has) are deleted; the port
// named by preferred (the one the pod's annotation already announces) is the one kept, so that a running
// pod never changes its address.
func (m *Manager) EnsurePort(ctx context.Context, pod PodRef, nn *NamespaceNet, preferred string) (port openstack.Port, created bool, err error) {
	ports := m.X.PortsOf(pod.UID)
	var keep *openstack.Port
	for i := range ports {
		if ports[i].ID == preferred && ports[i].NetworkID == nn.Network.ID {
			keep = &ports[i]
		}
	}
	for i := range ports {
		p := ports[i]
		if keep == nil && p.NetworkID == nn.Network.ID {
			keep = &ports[i]
			continue
		}
		if keep != nil && p.ID == keep.ID {
			continue
		}
		if err := m.deletePort(ctx, p.ID); err != nil {
			return port, false, err
		}
	}
	if keep != nil {
		return *keep, false, nil
	}
	owner := ownership.Owner{Cluster: m.C.ID, Kind: ownership.KindPod, UID: pod.UID, Name: pod.Namespace + "/" + pod.Name}
	if m.P != nil {
		if p, ok := m.P.Take(nn, pod, owner); ok {
			return p, true, nil
		}
	}
	if !m.C.Caps.TagsOnPortCreate {
		// Without tags on create, a crash between create and tag leaves an untagged port: find it by device_id.
		found, err := m.N.ListPorts(ctx, openstack.Filter{DeviceID: pod.UID, NetworkID: nn.Network.ID})
		if err != nil {
			return port, false, err
		}
		for _, p := range found {
			if p.DeviceOwner == DeviceOwner {
				if err := m.N.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, owner.Tags()); err != nil {
					return port, false, err
				}
				p.Tags = owner.Tags()
				m.X.PutPort(m.C.ID, p)
				return p, false, nil
			}
		}
	}
	spec := openstack.PortSpec{
		Name: pod.Name, NetworkID: nn.Network.ID, DeviceOwner: DeviceOwner, DeviceID: pod.UID,
		Description: fmt.Sprintf("pod %s/%s", pod.Namespace, pod.Name), Tags: owner.Tags(),
	}
	if nn.Subnet != nil {
		spec.SubnetID = nn.Subnet.ID
	}
	var p *openstack.Port
	switch {
	case m.C.Caps.TagsOnPortCreate && m.B != nil:
		p, err = m.B.Create(ctx, spec)
	case m.C.Caps.TagsOnPortCreate:
		p, err = m.N.CreatePort(ctx, spec)
	default:
		spec.Tags = nil
		if p, err = m.N.CreatePort(ctx, spec); err == nil {
			err = m.N.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, owner.Tags())
			p.Tags = owner.Tags()
		}
	}
	if err != nil {
		return port, false, err
	}
	m.X.PutPort(m.C.ID, *p)
	return *p, true, nil
}

// ReleasePorts deletes every port of the owner UID.
func (m *Manager) ReleasePorts(ctx context.Context, uid string) (int, error) {
	n := 0
	for _, p := range m.X.PortsOf(uid) {
		if err := m.deletePort(ctx, p.ID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// deletePort deletes a port and drops it from the index. While another worker deletes the same port it
// returns at once: that worker reports any failure and retries.
func (m *Manager) deletePort(ctx context.Context, id string) error {
	if _, busy := m.deleting.LoadOrStore(id, struct{}{}); busy {
		return nil
	}
	defer m.deleting.Delete(id)
	if err := openstack.IgnoreNotFound(m.N.DeletePort(ctx, id)); err != nil {
		return err
	}
	m.X.DropPort(id)
	return nil
}
