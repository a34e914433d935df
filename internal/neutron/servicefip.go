package neutron

import (
	"context"
	"errors"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// ErrNoExternalNetwork says a floating IP is wanted, but the cluster has no external network.
var ErrNoExternalNetwork = errors.New("no external network configured")

// FloatingIPChange says what EnsureFloatingIP did, for the caller's events.
type FloatingIPChange struct {
	Created  bool
	Released []string // addresses
}

// EnsureFloatingIP makes owner's floating IPs match what is wanted: none when !want, else one on portID,
// with address addr when addr is not empty. A floating IP with another address is released, one on another
// port is moved.
func (m *Manager) EnsureFloatingIP(ctx context.Context, owner ownership.Owner, want bool, addr, portID string) (*openstack.FloatingIP, FloatingIPChange, error) {
	var change FloatingIPChange
	fips, err := m.N.ListFloatingIPs(ctx, openstack.Filter{Tags: owner.Tags()[:3]})
	if err != nil {
		return nil, change, err
	}
	var keep *openstack.FloatingIP
	for i := range fips {
		f := &fips[i]
		if want && keep == nil && (addr == "" || f.FloatingIP == addr) {
			keep = f
			continue
		}
		if err := openstack.IgnoreNotFound(m.N.DeleteFloatingIP(ctx, f.ID)); err != nil {
			return nil, change, err
		}
		change.Released = append(change.Released, f.FloatingIP)
	}
	switch {
	case !want:
		return nil, change, nil
	case keep == nil:
		if m.C.ExternalNetworkID == "" {
			return nil, change, ErrNoExternalNetwork
		}
		f, err := m.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: m.C.ExternalNetworkID, FloatingIP: addr, PortID: portID}, owner.Tags())
		change.Created = err == nil
		return f, change, err
	case keep.PortID != portID:
		f, err := m.N.UpdateFloatingIPPort(ctx, keep.ID, portID)
		return f, change, err
	}
	return keep, change, nil
}
