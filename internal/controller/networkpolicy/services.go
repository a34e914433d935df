package networkpolicy

import (
	"context"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/policy"
)

// readServices reads the Services and their EndpointSlices as the translation needs them (only when some
// policy has egress rules: only those reach Services by their addresses), with what their load balancers serve as
// lbs last saw it (nil: nothing). podAt names the pod at each pod address.
func readServices(ctx context.Context, c client.Reader, lbs *octavia.Backends, podAt map[string]string) ([]policy.Service, error) {
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return nil, err
	}
	var eps discoveryv1.EndpointSliceList
	if err := c.List(ctx, &eps); err != nil {
		return nil, err
	}
	bySvc := map[string][]discoveryv1.EndpointSlice{}
	for _, es := range eps.Items {
		if name := es.Labels[discoveryv1.LabelServiceName]; name != "" {
			bySvc[es.Namespace+"/"+name] = append(bySvc[es.Namespace+"/"+name], es)
		}
	}
	out := make([]policy.Service, 0, len(svcs.Items))
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		uid := string(svc.UID)
		out = append(out, serviceOf(svc, bySvc[svc.Namespace+"/"+svc.Name], lbs.Members(uid), lbs.FloatingIPs(uid), podAt))
	}
	return out, nil
}

// serviceOf is a Service with the addresses that lead to its load balancer (its clusterIPs and fips, the floating
// IPs Raven made for it) and, per port, every backend that load balancer may send to: the ready endpoints (the
// members it is given) and the members Octavia last listed for the port's listener (a member leaves the load
// balancer some time after its endpoint leaves the slice, and until then receives connections through the VIP).
// podAt names the pod at a member's address. An externalIP or a status ingress address is no address of the
// Service's here: anyone who may edit the Service may write one, and Raven's floating IP, when it made one for
// an externalIP, is among fips.
func serviceOf(svc *corev1.Service, eps []discoveryv1.EndpointSlice, members []octavia.ListenerMember, fips []string, podAt map[string]string) policy.Service {
	s := policy.Service{Namespace: svc.Namespace, Name: svc.Name}
	for _, a := range append(append([]string{}, svc.Spec.ClusterIPs...), fips...) {
		if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
			s.Addresses = append(s.Addresses, ip.String())
		}
	}
	for _, sp := range svc.Spec.Ports {
		protocol := strings.ToLower(string(sp.Protocol))
		if protocol == "" {
			protocol = "tcp"
		}
		bs := backends(eps, sp)
		for _, m := range members {
			if m.Protocol == protocol && m.Port == int(sp.Port) && !hasBackend(bs, m.Address, m.MemberPort) {
				bs = append(bs, policy.Backend{Pod: podAt[m.Address], IP: m.Address, Port: m.MemberPort})
			}
		}
		s.Ports = append(s.Ports, policy.ServicePort{Protocol: protocol, Port: int(sp.Port), Backends: bs})
	}
	return s
}

// podsAt names each pod by its address.
func podsAt(pods []policy.Pod) map[string]string {
	out := make(map[string]string, len(pods))
	for _, p := range pods {
		if p.IP != "" {
			out[p.IP] = p.Key()
		}
	}
	return out
}

func hasBackend(bs []policy.Backend, ip string, port int) bool {
	for _, b := range bs {
		if b.IP == ip && b.Port == port {
			return true
		}
	}
	return false
}

// backends are the ready IPv4 endpoints of one Service port: the load balancer's members.
func backends(eps []discoveryv1.EndpointSlice, sp corev1.ServicePort) []policy.Backend {
	var out []policy.Backend
	for _, e := range octavia.ReadyEndpoints(eps, sp) {
		pod := ""
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
			pod = e.TargetRef.Namespace + "/" + e.TargetRef.Name
		}
		out = append(out, policy.Backend{Pod: pod, IP: e.Address, Port: e.Port})
	}
	return out
}
