package neutron

import (
	"context"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// VIPDeviceOwner marks the VIP ports Raven makes for load balancers.
const VIPDeviceOwner = "raven:vip"

// VIP describes the VIP port a Service needs: its address (the clusterIP) on the service subnet.
type VIP struct {
	Owner       ownership.Owner
	Name        string
	Description string
	Address     string
}

// EnsureVIPPort finds or creates the VIP port of v.Owner whose fixed IP is v.Address. A port of the owner
// with another address (the clusterIP changed: the Service was recreated) is deleted.
func (m *Manager) EnsureVIPPort(ctx context.Context, v VIP) (openstack.Port, error) {
	c := m.C
	for _, p := range m.X.PortsOf(v.Owner.UID) {
		if len(p.FixedIPs) > 0 && p.FixedIPs[0].IPAddress == v.Address {
			return p, nil
		}
	}
	// Not in the index: maybe made by an earlier run whose index is gone; ask Neutron by tag.
	found, err := m.N.ListPorts(ctx, openstack.Filter{NetworkID: c.ServiceNetworkID, Tags: v.Owner.Tags()[:3]})
	if err != nil {
		return openstack.Port{}, err
	}
	for _, p := range found {
		if len(p.FixedIPs) > 0 && p.FixedIPs[0].IPAddress == v.Address {
			m.X.PutPort(c.ID, p)
			return p, nil
		}
		if err := openstack.IgnoreNotFound(m.N.DeletePort(ctx, p.ID)); err != nil {
			return openstack.Port{}, err
		}
		m.X.DropPort(p.ID)
	}
	spec := openstack.PortSpec{
		Name: v.Name, NetworkID: c.ServiceNetworkID, SubnetID: c.ServiceSubnet.ID, IPAddress: v.Address,
		DeviceOwner: VIPDeviceOwner, DeviceID: v.Owner.UID, Description: v.Description, Tags: v.Owner.Tags(),
	}
	p, err := m.N.CreatePort(ctx, spec)
	if err != nil {
		return openstack.Port{}, err
	}
	if c.Caps.TagsOnPortCreate {
		if err := KeepTags(ctx, m.N, p, spec.Tags); err != nil {
			return openstack.Port{}, err
		}
	} else {
		if err := m.N.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, spec.Tags); err != nil {
			return openstack.Port{}, err
		}
		p.Tags = spec.Tags
	}
	m.X.PutPort(c.ID, *p)
	return *p, nil
}

// DropVIPPorts deletes the VIP ports Raven made for owner on the service network: a load balancer provider
// that makes its own VIP port needs the address they hold.
func (m *Manager) DropVIPPorts(ctx context.Context, owner ownership.Owner) error {
	ports, err := m.N.ListPorts(ctx, openstack.Filter{NetworkID: m.C.ServiceNetworkID, Tags: owner.Tags()[:3]})
	if err != nil {
		return err
	}
	for _, p := range ports {
		if err := openstack.IgnoreNotFound(m.N.DeletePort(ctx, p.ID)); err != nil {
			return err
		}
		m.X.DropPort(p.ID)
	}
	return nil
}
