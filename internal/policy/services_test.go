package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/raven-net/raven/test/netpol"
)

// egressTo is a policy of namespace x that isolates the pods app=client for egress and admits TCP port to the
// pods app=backend of namespace x.
func egressTo(port int32) networkingv1.NetworkPolicy {
	p := intstr.FromInt32(port)
	return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "out", UID: "out"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "backend"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &p}},
		}},
	}}
}

func TestServicesFollowTheirBackends(t *testing.T) {
	pods := []Pod{
		{Namespace: "x", Name: "client", Labels: map[string]string{"app": "client"}, IP: "10.244.0.2"},
		{Namespace: "x", Name: "b1", Labels: map[string]string{"app": "backend"}, IP: "10.244.0.3"},
		{Namespace: "x", Name: "b2", Labels: map[string]string{"app": "backend"}, IP: "10.244.0.4"},
		{Namespace: "x", Name: "other", Labels: map[string]string{"app": "other"}, IP: "10.244.0.5"},
	}
	backend := func(name, ip string, port int) Backend { return Backend{Pod: "x/" + name, IP: ip, Port: port} }
	svc := func(backends ...Backend) Service {
		return Service{Namespace: "x", Name: "s", Addresses: []string{"10.0.0.7", "172.24.4.50"},
			Ports: []ServicePort{{Protocol: "tcp", Port: 80, Backends: backends}}}
	}
	vipRules := []Rule{
		{Direction: "egress", Protocol: "tcp", PortMin: 80, PortMax: 80, RemoteIPPrefix: "10.0.0.7/32"},
		{Direction: "egress", Protocol: "tcp", PortMin: 80, PortMax: 80, RemoteIPPrefix: "172.24.4.50/32"},
	}
	for _, tc := range []struct {
		name    string
		policy  networkingv1.NetworkPolicy
		service Service
		want    []Rule // the rules to the Service's addresses
	}{
		{"a Service whose backends the policy admits is reachable by each of its addresses, on its own port",
			egressTo(8080), svc(backend("b1", "10.244.0.3", 8080), backend("b2", "10.244.0.4", 8080)), vipRules},
		{"a Service one of whose backends the policy does not admit stays closed",
			egressTo(8080), svc(backend("b1", "10.244.0.3", 8080), backend("other", "10.244.0.5", 8080)), nil},
		{"a Service whose target port the policy does not admit stays closed",
			egressTo(9090), svc(backend("b1", "10.244.0.3", 8080)), nil},
		{"a Service without backends stays closed", egressTo(8080), svc(), nil},
		{"an endpoint that is no pod is judged by its address",
			egressTo(8080), svc(Backend{IP: "10.244.0.3", Port: 8080}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Translate([]networkingv1.NetworkPolicy{tc.policy}, pods, []Namespace{{Name: "x"}})
			AdmitServices(&res, []Service{tc.service})
			var got []Rule
			for _, r := range res.Groups[KeyOf(&tc.policy)].Rules {
				if r.RemoteIPPrefix == "10.0.0.7/32" || r.RemoteIPPrefix == "172.24.4.50/32" {
					got = append(got, r)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("rules to the Service: %+v, want %+v", got, tc.want)
			}
		})
	}
}

// An egress-isolated pod reaches no Service by the base groups: the service subnet is not open out.
func TestBaseGroupsOpenNoServiceOut(t *testing.T) {
	for _, g := range BaseGroups(Infra{ServiceCIDR: "10.0.0.0/24", PodPrefixes: []string{"10.244.0.0/16"}, NodeCIDRs: []string{"192.168.0.0/24"}}) {
		if g.Key != BaseInfra {
			continue
		}
		for _, r := range g.Rules {
			if r.Direction == "egress" {
				t.Fatalf("base-infra admits %+v out: an egress-isolated pod would reach every backend by its Service", r)
			}
		}
	}
}

// Every scenario of the model, probed through a Service in front of each pod as upstream's suite probes
// (a clusterIP whose one backend is the pod, on another port than the pod's): a client reaches the Service
// exactly when the model lets it reach the pod. Neutron judges the connection's first packet by the client's
// egress rules at the Service's address and port, its later packets at the backend (OVN's load balancer
// NATs them before the ACLs), and the backend's ingress rules at the backend. A rule that admitted every
// Service address out (Raven's base group once did) fails this for UDP: the first datagram is the probe.
func TestServicesMatchTheModel(t *testing.T) {
	base := netpol.DefaultCluster(nil)
	for _, sc := range netpol.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			c := sc.Apply(base)
			res := Translate(sc.Policies(c), podsOf(c), namespacesOf(c))
			proto := strings.ToLower(string(sc.Protocol))
			vip := map[string]string{}
			var services []Service
			for i, p := range c.Pods {
				vip[p.Key()] = fmt.Sprintf("10.96.0.%d", i+1)
				services = append(services, Service{Namespace: p.Namespace, Name: "s-" + p.Name, Addresses: []string{vip[p.Key()]},
					Ports: []ServicePort{{Protocol: proto, Port: 10000 + int(sc.Port), Backends: []Backend{{Pod: p.Key(), IP: p.IP, Port: int(sc.Port)}}}}})
			}
			AdmitServices(&res, services)
			got := netpol.Table{}
			for _, from := range c.Pods {
				for _, to := range c.Pods {
					src := res.Pods[from.Key()]
					first := !src.EgressIsolated || anyRule(res, src.Groups, "egress", 10000+sc.Port, sc.Protocol, func(r Rule) bool {
						return r.RemoteIPPrefix != "" && netip.MustParsePrefix(r.RemoteIPPrefix).Contains(netip.MustParseAddr(vip[to.Key()]))
					})
					dst := res.Pods[to.Key()]
					in := !dst.IngressIsolated || anyRule(res, dst.Groups, "ingress", sc.Port, sc.Protocol, func(r Rule) bool { return remoteIs(res, r, from) })
					// A UDP probe is one datagram and its answer (a reply): the first packet decides. TCP's data
					// comes after the handshake and is judged at the backend.
					later := sc.Protocol == corev1.ProtocolUDP || admits(res, from, to, sc.Port, sc.Protocol)
					got.Set(from.Key(), to.Key(), first && in && later)
				}
			}
			if d := netpol.Diff(sc.Expected(c), got); len(d) > 0 {
				t.Fatalf("%d pairs differ through the Services: %v\n%s", len(d), d, netpol.SideBySide(sc.Expected(c), got))
			}
		})
	}
}
