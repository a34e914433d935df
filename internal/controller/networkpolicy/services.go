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
// policy has egress rules: only those reach Services by their addresses).
func readServices(ctx context.Context, c client.Reader) ([]policy.Service, error) {
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
		out = append(out, serviceOf(svc, bySvc[svc.Namespace+"/"+svc.Name]))
	}
	return out, nil
}

// serviceOf is a Service with its addresses (clusterIPs, externalIPs, load balancer ingress IPs) and, per
// port, the ready endpoints the load balancer sends to (as its members are chosen).
func serviceOf(svc *corev1.Service, eps []discoveryv1.EndpointSlice) policy.Service {
	s := policy.Service{Namespace: svc.Namespace, Name: svc.Name}
	addrs := append(append([]string{}, svc.Spec.ClusterIPs...), svc.Spec.ExternalIPs...)
	for _, in := range svc.Status.LoadBalancer.Ingress {
		addrs = append(addrs, in.IP)
	}
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
			s.Addresses = append(s.Addresses, ip.String())
		}
	}
	for _, sp := range svc.Spec.Ports {
		protocol := strings.ToLower(string(sp.Protocol))
		if protocol == "" {
			protocol = "tcp"
		}
		s.Ports = append(s.Ports, policy.ServicePort{Protocol: protocol, Port: int(sp.Port), Backends: backends(eps, sp)})
	}
	return s
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
