package neutron

import (
	"context"
	"net/netip"

	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// Address is the MAC and IP of the port a running pod's annotation names. A port made for the pod because
// that one is gone (deleted out of band, its network made again, taken by another owner) asks Neutron for
// them, so that the pod's interface and its status.podIP stay right.
type Address struct {
	MAC, IP string
}

// Fits says whether the address can be asked for on nn: its IP is in nn's subnet, and not its gateway.
func (a *Address) Fits(nn *NamespaceNet) bool {
	if a == nil || a.MAC == "" || a.IP == "" || nn.Subnet == nil {
		return false
	}
	ip, err := netip.ParseAddr(a.IP)
	if err != nil {
		return false
	}
	cidr, err := netip.ParsePrefix(nn.Subnet.CIDR)
	return err == nil && cidr.Contains(ip) && a.IP != nn.Subnet.GatewayIP
}

// remake makes the pod a port with the address of its former port (pod.Keep) when that fits nn; ok is false
// when there is none to keep or Neutron has given it to another port meanwhile: the caller then gives the pod
// a port with a new address. It comes before the pool: a pool port has another address.
func (m *Manager) remake(ctx context.Context, pod PodRef, nn *NamespaceNet, owner ownership.Owner) (openstack.Port, bool, error) {
	if !pod.Keep.Fits(nn) {
		return openstack.Port{}, false, nil
	}
	log := klog.FromContext(ctx)
	if !m.C.Caps.TagsOnPortCreate {
		// A crash between an earlier remake's create and its tagging left an untagged port with the address.
		if p, err := m.adoptUntagged(ctx, pod.UID, nn.Network.ID, owner); err != nil || p != nil {
			return deref(p), p != nil, err
		}
	}
	spec := m.portSpec(pod, nn, owner)
	spec.MACAddress, spec.IPAddress = pod.Keep.MAC, pod.Keep.IP
	p, err := m.create(ctx, spec)
	switch kind := openstack.KindOf(err); {
	case kind == openstack.KindConflict || kind == openstack.KindBadRequest || kind == openstack.KindForbidden:
		// Another port holds the MAC or IP now (409), Neutron refuses the address (400), or its policy does not
		// let Raven choose a port's address (403).
		log.Info("Neutron refused the address of the pod's former port; the pod gets a new one",
			"mac", pod.Keep.MAC, "ip", pod.Keep.IP, "err", err)
		return openstack.Port{}, false, nil
	case err != nil:
		return openstack.Port{}, false, err
	}
	m.X.PutPort(m.C.ID, *p)
	log.V(2).Info("Made the pod's port again with its former address", "port", p.ID, "mac", p.MACAddress, "ip", pod.Keep.IP)
	return *p, true, nil
}
