package service

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/pkg/annotations"
)

// Served says whether Raven builds a load balancer for the Service: it needs a clusterIP.
func Served(svc *corev1.Service) bool {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	ip := svc.Spec.ClusterIP
	return ip != "" && ip != corev1.ClusterIPNone
}

// ImplementsLoadBalancer says whether Raven is the Service's load balancer implementation: its
// spec.loadBalancerClass is unset or class (Raven's). A Service of another class belongs to that class's
// controller (MetalLB, a Gateway, ...): Raven still serves its clusterIP and externalIPs, as it does for a
// ClusterIP Service (what kube-proxy would do), but makes it no floating IP of its own and leaves its
// status.loadBalancer alone.
func ImplementsLoadBalancer(svc *corev1.Service, class string) bool {
	return svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == class
}

// FloatingIP says which floating IP the Service wants: want is false for none; addr is empty when
// Neutron may choose (type LoadBalancer without loadBalancerIP). ignored lists externalIPs that cannot
// become floating IPs, with the reason. A Service whose load balancer is another class's (see
// ImplementsLoadBalancer; class is Raven's) wants one for its externalIPs only.
func FloatingIP(svc *corev1.Service, external netip.Prefix, class string) (addr string, want bool, ignored []string) {
	for _, raw := range svc.Spec.ExternalIPs {
		ip, err := netip.ParseAddr(raw)
		switch {
		case err != nil:
			ignored = append(ignored, fmt.Sprintf("%q is not an IP address", raw))
		case !external.IsValid() || !external.Contains(ip):
			ignored = append(ignored, fmt.Sprintf("%s is outside the external subnet %s", ip, external))
		case want:
			ignored = append(ignored, fmt.Sprintf("%s: only the first externalIP inside the external subnet gets a floating IP", ip))
		default:
			addr, want = ip.String(), true
		}
	}
	if want || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !ImplementsLoadBalancer(svc, class) {
		return addr, want, ignored
	}
	if raw := svc.Spec.LoadBalancerIP; raw != "" {
		ip, err := netip.ParseAddr(raw)
		if err != nil || !external.IsValid() || !external.Contains(ip) {
			ignored = append(ignored, fmt.Sprintf("loadBalancerIP %q is not an address of the external subnet %s; allocating one", raw, external))
			return "", true, ignored
		}
		return ip.String(), true, ignored
	}
	return "", true, ignored
}

// StuckAfter is how long a load balancer may stay PENDING_UPDATE or PENDING_DELETE before Raven reports
// it: Octavia's changes take seconds; longer usually means its worker died in the middle of one. A create
// may take minutes (an amphora boots), so PENDING_CREATE gets StuckCreatingAfter.
const (
	StuckAfter         = 2 * time.Minute
	StuckCreatingAfter = 10 * time.Minute
)

// Stuck says the load balancer has been PENDING_* for longer than it should, and since when.
func Stuck(lb *openstack.LoadBalancer, now time.Time) (time.Time, bool) {
	if lb == nil || !strings.HasPrefix(lb.ProvisioningStatus, "PENDING_") {
		return time.Time{}, false
	}
	since := lb.CreatedAt.Time
	if lb.UpdatedAt.After(since) {
		since = lb.UpdatedAt.Time
	}
	limit := StuckAfter
	if lb.ProvisioningStatus == "PENDING_CREATE" {
		limit = StuckCreatingAfter
	}
	return since, !since.IsZero() && now.Sub(since) > limit
}

// Annotations renders the kuryr.org/neutron-vip and kuryr.org/neutron-pool values. A wanted port without a
// listener in Octavia is left out: the annotation says what is served.
func Annotations(svc *corev1.Service, vip openstack.Port, lb *openstack.LoadBalancer, fip *openstack.FloatingIP,
	want []octavia.Listener, cur octavia.Current) (map[string]*string, error) {
	v := annotations.VIP{Address: svc.Spec.ClusterIP, PortID: vip.ID, Name: svc.Name}
	if len(vip.FixedIPs) > 0 {
		v.SubnetID = vip.FixedIPs[0].SubnetID
	}
	if lb != nil {
		v.LoadBalancerID, v.ProvisioningStatus = lb.ID, lb.ProvisioningStatus
	}
	if fip != nil {
		v.FloatingIP, v.FloatingIPID = fip.FloatingIP, fip.ID
	}
	pools := []annotations.Pool{}
	for _, w := range want {
		p := servedPool(w, cur)
		if p.ListenerID == "" || p.ID == "" {
			continue // Octavia refused this port's listener or pool: it is not served, the Warning event says why
		}
		pools = append(pools, p)
	}
	vs, err := annotations.Encode(v)
	if err != nil {
		return nil, err
	}
	ps, err := annotations.Encode(pools)
	if err != nil {
		return nil, err
	}
	return map[string]*string{annotations.ServiceVIP: &vs, annotations.ServicePools: &ps}, nil
}

// servedPool describes the wanted listener w as Octavia serves it: its listener, pool and members in cur
// (IDs left empty where Octavia has none).
func servedPool(w octavia.Listener, cur octavia.Current) annotations.Pool {
	p := annotations.Pool{Name: w.Name, Protocol: w.Protocol, ProtocolPort: w.Port, LBMethod: w.Algorithm, Members: []annotations.Member{}}
	for _, l := range cur.Listeners {
		if l.Protocol == w.Protocol && l.ProtocolPort == w.Port {
			p.ListenerID = l.ID
		}
	}
	for _, cp := range cur.Pools {
		if cp.ListenerID == p.ListenerID && p.ListenerID != "" {
			p.ID = cp.ID
			for _, m := range cur.Members[cp.ID] {
				p.Members = append(p.Members, annotations.Member{Address: m.Address, ProtocolPort: m.ProtocolPort, SubnetID: subnetOf(m, w)})
			}
		}
	}
	return p
}

// subnetOf is m's subnet: as Octavia names it, or else (its status tree names none) the wanted member's at the
// same address and port.
func subnetOf(m openstack.Member, w octavia.Listener) string {
	if m.SubnetID != "" {
		return m.SubnetID
	}
	for _, wm := range w.Members {
		if wm.Address == m.Address && wm.ProtocolPort == m.ProtocolPort {
			return wm.SubnetID
		}
	}
	return ""
}
