package netpol

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Scenario is one truth-table case: a set of policies, optional label changes
// applied to the cluster before the policies are evaluated, and the probe
// (port and protocol) every ordered pair of pods is tested on.
type Scenario struct {
	// Name is the upstream It(...) text the case is adapted from ("upstream:",
	// "upstream UDP:", "upstream SCTP:") or a description of a case added here
	// ("local:"), followed by the probe, e.g. "[TCP/80]".
	Name string
	// Policies builds the policies from the cluster (namespace names, pod IPs).
	Policies func(c Cluster) []networkingv1.NetworkPolicy
	Port     int32
	Protocol corev1.Protocol
	// LabelChanges, when set, lists labels added to pods or namespaces before
	// probing.
	LabelChanges func(c Cluster) []LabelChange
	// ModelOnly marks cases that only check the model (the test pods do not
	// serve SCTP).
	ModelOnly bool
}

// LabelChange adds or overwrites labels on a pod, or on a namespace when Pod
// is empty.
type LabelChange struct {
	Namespace string
	Pod       string
	Labels    map[string]string
}

// Apply returns a copy of c with the scenario's label changes applied.
func (s Scenario) Apply(c Cluster) Cluster {
	out := Cluster{}
	for _, ns := range c.Namespaces {
		ns.Labels = maps.Clone(ns.Labels)
		out.Namespaces = append(out.Namespaces, ns)
	}
	for _, p := range c.Pods {
		p.Labels = maps.Clone(p.Labels)
		p.Ports = slices.Clone(p.Ports)
		out.Pods = append(out.Pods, p)
	}
	if s.LabelChanges == nil {
		return out
	}
	for _, ch := range s.LabelChanges(c) {
		for i := range out.Namespaces {
			if ch.Pod == "" && out.Namespaces[i].Name == ch.Namespace {
				out.Namespaces[i].Labels = merge(out.Namespaces[i].Labels, ch.Labels)
			}
		}
		for i := range out.Pods {
			if ch.Pod != "" && out.Pods[i].Namespace == ch.Namespace && out.Pods[i].Name == ch.Pod {
				out.Pods[i].Labels = merge(out.Pods[i].Labels, ch.Labels)
			}
		}
	}
	return out
}

func merge(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	maps.Copy(dst, src)
	return dst
}

// Expected applies the label changes to c and returns the expected Table.
func (s Scenario) Expected(c Cluster) Table {
	c = s.Apply(c)
	return Matrix(c, s.Policies(c), s.Port, s.Protocol)
}

type probe struct {
	port  int32
	proto corev1.Protocol
}

var (
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP

	tcp80, tcp81 = probe{80, tcp}, probe{81, tcp}
	udp80, udp81 = probe{80, udp}, probe{81, udp}

	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	bothTypes   = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
)

// def is a scenario probed on one or more port/protocol pairs.
type def struct {
	name      string
	probes    []probe
	policies  func(c Cluster) []networkingv1.NetworkPolicy
	labels    func(c Cluster) []LabelChange
	modelOnly bool
}

// Scenarios returns the truth-table cases, one per policy set and probe.
func Scenarios() []Scenario {
	var out []Scenario
	for _, d := range defs {
		for _, p := range d.probes {
			out = append(out, Scenario{
				Name:         fmt.Sprintf("%s [%s/%d]", d.name, p.proto, p.port),
				Policies:     d.policies,
				Port:         p.port,
				Protocol:     p.proto,
				LabelChanges: d.labels,
				ModelOnly:    d.modelOnly,
			})
		}
	}
	return out
}

type policies = []networkingv1.NetworkPolicy
type spec = networkingv1.NetworkPolicySpec
type ingress = []networkingv1.NetworkPolicyIngressRule
type egress = []networkingv1.NetworkPolicyEgressRule

var defs = []def{
	{
		name: "upstream: should support a 'default-deny-ingress' policy", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "deny-ingress", spec{PodSelector: sel(), PolicyTypes: ingressOnly})}
		},
	},
	{
		name: "upstream: should support a 'default-deny-all' policy", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "deny-all", spec{PodSelector: sel(), PolicyTypes: bothTypes})}
		},
	},
	{
		name: "upstream: should enforce policy to allow traffic from pods within server namespace based on PodSelector", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "x-a-allows-x-b", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, pods(sel("pod", "b")))}})}
		},
	},
	{
		name: "upstream: should enforce policy to allow ingress traffic for a target", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{
				np(x, "deny-all", spec{PodSelector: sel(), PolicyTypes: ingressOnly}),
				np(x, "allow-all-to-a", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
					Ingress: ingress{in(nil, podsIn(sel(), sel()))}}),
			}
		},
	},
	{
		name: "upstream: should enforce policy to allow ingress traffic from pods in all namespaces", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-from-another-ns", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, nss(sel()))}})}
		},
	},
	{
		name: "upstream: should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-client-a-via-ns-selector", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, nss(sel("ns", y)))}})}
		},
	},
	{
		name: "upstream: should enforce policy based on PodSelector with MatchExpressions", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "x-a-allows-x-b", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, pods(exprs(req("pod", metav1.LabelSelectorOpIn, "b"))))}})}
		},
	},
	{
		name: "upstream: should enforce policy based on NamespaceSelector with MatchExpressions", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-ns-y-match-selector", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, nss(exprs(req(corev1.LabelMetadataName, metav1.LabelSelectorOpIn, y))))}})}
		},
	},
	{
		// Two peers in one rule: OR.
		name: "upstream: should enforce policy based on PodSelector or NamespaceSelector", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-ns-y-match-selector", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil,
					nss(exprs(req(corev1.LabelMetadataName, metav1.LabelSelectorOpNotIn, x))),
					pods(sel("pod", "b")))}})}
		},
	},
	{
		// Both selectors in one peer: AND.
		name: "upstream: should enforce policy based on PodSelector and NamespaceSelector", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-ns-y-podselector-and-nsselector", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, podsIn(exprs(req(corev1.LabelMetadataName, metav1.LabelSelectorOpNotIn, x)), sel("pod", "b")))}})}
		},
	},
	{
		name: "upstream: should enforce policy based on Multiple PodSelectors and NamespaceSelectors", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-ns-y-z-pod-b-c", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, podsIn(
					exprs(req(corev1.LabelMetadataName, metav1.LabelSelectorOpNotIn, x)),
					exprs(req("pod", metav1.LabelSelectorOpIn, "b", "c"))))}})}
		},
	},
	{
		name: "upstream: should enforce policy based on any PodSelectors", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-ns-x-pod-b-c", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, pods(sel("pod", "b")), pods(sel("pod", "c")))}})}
		},
	},
	{
		name: "upstream: should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-ns-y-pod-a", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, podsIn(sel("ns", y), sel("pod", "a")))}})}
		},
	},
	{
		// Probed on 81 (allowed from y) and on 80 (the port the rule omits).
		name: "upstream: should enforce policy based on Ports", probes: []probe{tcp81, tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-port-81", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(num(81, tcp)), nss(sel("ns", y)))}})}
		},
	},
	{
		// Final state of the upstream case: the port-81 and port-80 policies together.
		name: "upstream: should enforce multiple, stacked policies with overlapping podSelectors", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{
				np(x, "allow-port-81", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
					Ingress: ingress{in(ports(num(81, tcp)), nss(sel("ns", y)))}}),
				np(x, "allow-port-80", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
					Ingress: ingress{in(ports(num(80, tcp)), nss(sel("ns", y)))}}),
			}
		},
	},
	{
		name: "upstream: should support allow-all policy", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-all", spec{PodSelector: sel(), PolicyTypes: ingressOnly, Ingress: ingress{{}}})}
		},
	},
	{
		name: "upstream: should allow ingress access on one named port", probes: []probe{tcp81, tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-named-81", spec{PodSelector: sel(), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(named("serve-81-tcp", "")))}})}
		},
	},
	{
		name: "upstream: should allow ingress access from namespace on one named port", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-client-a-via-ns-selector-80", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(named("serve-80-tcp", tcp)), nss(sel("ns", y)))}})}
		},
	},
	{
		// The name is resolved on the destination pod, not on the client.
		name: "upstream: should allow egress access on one named port", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-egress", spec{PodSelector: sel(), PolicyTypes: egressOnly,
				Egress: egress{out(ports(named("serve-80-tcp", "")))}})}
		},
	},
	{
		// Final state: the policy updated to no ingress rules; policyTypes left
		// empty, so Ingress is implied.
		name: "upstream: should enforce updated policy", probes: []probe{tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-all-mutate-to-deny-all", spec{PodSelector: sel(), Ingress: ingress{}})}
		},
	},
	{
		name: "upstream: should allow ingress access from updated namespace", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-client-a-via-ns-selector", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, nss(sel("ns2", "updated")))}})}
		},
		labels: func(c Cluster) []LabelChange {
			_, y, _ := nsNames(c)
			return []LabelChange{{Namespace: y, Labels: map[string]string{"ns2": "updated"}}}
		},
	},
	{
		name: "upstream: should allow ingress access from updated pod", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-client-a-via-pod-selector", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, pods(sel("pod", "b", "pod2", "updated")))}})}
		},
		labels: func(c Cluster) []LabelChange {
			x, _, _ := nsNames(c)
			return []LabelChange{{Namespace: x, Pod: "b", Labels: map[string]string{"pod2": "updated"}}}
		},
	},
	{
		name: "upstream: should deny ingress from pods on other namespaces", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "deny-empty-policy", spec{PodSelector: sel(), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, pods(sel()))}})}
		},
	},
	{
		name: "upstream: should deny ingress access to updated pod", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "deny-ingress-via-label-selector", spec{PodSelector: sel("target", "isolated"), PolicyTypes: ingressOnly})}
		},
		labels: func(c Cluster) []LabelChange {
			x, _, _ := nsNames(c)
			return []LabelChange{{Namespace: x, Pod: "a", Labels: map[string]string{"target": "isolated"}}}
		},
	},
	{
		name: "upstream: should deny egress from pods based on PodSelector", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "deny-egress-pod-a", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly})}
		},
	},
	{
		// Default deny egress.
		name: "upstream: should deny egress from all pods in a namespace", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "deny-egress-ns-x", spec{PodSelector: sel(), PolicyTypes: egressOnly})}
		},
	},
	{
		name: "upstream: should work with Ingress, Egress specified together", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-client-a-via-pod-selector", spec{PodSelector: sel("pod", "a"), PolicyTypes: bothTypes,
				Ingress: ingress{in(nil, pods(sel("pod", "b")))},
				Egress:  egress{out(ports(num(80, "")))}})}
		},
	},
	{
		name: "upstream: should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			fromXA := ingress{in(nil, podsIn(sel("ns", x), sel("pod", "a")))}
			return policies{
				np(x, "allow-to-ns-y-pod-a", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
					Egress: egress{out(nil, podsIn(sel("ns", y), sel("pod", "a")))}}),
				np(y, "allow-from-xa-on-ya", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly, Ingress: fromXA}),
				np(y, "allow-from-xa-on-yb", spec{PodSelector: sel("pod", "b"), PolicyTypes: ingressOnly, Ingress: fromXA}),
			}
		},
	},
	{
		// Egress to a pod in another namespace.
		name: "upstream: should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-to-ns-y-pod-a", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress{out(nil, podsIn(sel("ns", y), sel("pod", "a")))}})}
		},
	},
	{
		name: "upstream: should enforce ingress policy allowing any port traffic to a server on a specific protocol", probes: []probe{tcp80, udp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-ingress-by-proto", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(anyPort(tcp)))}})}
		},
	},
	{
		name: "upstream: should enforce multiple ingress policies with ingress allow-all policy taking precedence", probes: []probe{tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{
				np(x, "allow-ingress-port-80", spec{PodSelector: sel(), PolicyTypes: ingressOnly, Ingress: ingress{in(ports(num(80, "")))}}),
				np(x, "allow-ingress", spec{PodSelector: sel(), PolicyTypes: ingressOnly, Ingress: ingress{{}}}),
			}
		},
	},
	{
		name: "upstream: should enforce multiple egress policies with egress allow-all policy taking precedence", probes: []probe{tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{
				np(x, "allow-egress-port-80", spec{PodSelector: sel(), PolicyTypes: egressOnly, Egress: egress{out(ports(num(80, "")))}}),
				np(x, "allow-egress", spec{PodSelector: sel(), PolicyTypes: egressOnly, Egress: egress{{}}}),
			}
		},
	},
	{
		// Final state: every policy deleted.
		name: "upstream: should stop enforcing policies after they are deleted", probes: []probe{tcp80},
		policies: func(Cluster) policies { return nil },
	},
	{
		name: "upstream: should allow egress access to server in CIDR block", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-client-a-via-cidr-egress-rule", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress{out(nil, block(host(ipOf(c, y, "b"))))}})}
		},
	},
	{
		// ipBlock with one except.
		name: "upstream: should enforce except clause while egress access to server in CIDR block", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			b := ipOf(c, x, "b")
			return policies{np(x, "allow-client-a-via-cidr-egress-rule", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress{out(nil, block(around(b, 4), host(b)))}})}
		},
	},
	{
		// A second policy admitting the excepted address: policies are a union.
		name: "upstream: should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			b := ipOf(c, x, "b")
			return policies{
				np(x, "allow-cidr-except-b", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
					Egress: egress{out(nil, block(around(b, 4), host(b)))}}),
				np(x, "allow-b", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
					Egress: egress{out(nil, block(host(b)))}}),
			}
		},
	},
	{
		name: "upstream: should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{
				np(x, "allow-egress-for-target", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly, Egress: egress{{}}}),
				np(x, "deny-ingress-via-label-selector", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly}),
			}
		},
	},
	{
		name: "upstream: should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP", probes: []probe{tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{
				np(x, "deny-ingress", spec{PodSelector: sel(), PolicyTypes: ingressOnly}),
				np(x, "allow-only-sctp-ingress-on-port-81", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
					Ingress: ingress{in(ports(num(81, sctp)))}}),
			}
		},
	},
	{
		name: "upstream: should properly isolate pods that are selected by a policy allowing SCTP, even if the plugin doesn't support SCTP", probes: []probe{tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-only-sctp-ingress-on-port-80", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(num(80, sctp)))}})}
		},
	},
	{
		name: "upstream: should not allow access by TCP when a policy specifies only UDP", probes: []probe{tcp81, udp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-only-udp-ingress-on-port-81", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(num(81, udp)))}})}
		},
	},
	{
		name: "upstream: should enforce policy to allow traffic based on NamespaceSelector with MatchLabels using default ns label", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-client-a-via-ns-selector-for-immutable-ns-label", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, nss(sel(corev1.LabelMetadataName, y)))}})}
		},
	},
	{
		// Egress to every namespace but one.
		name: "upstream: should enforce policy based on NamespaceSelector with MatchExpressions using default ns label", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-ns-y-match-selector-for-immutable-ns-label", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress{out(nil, nss(exprs(req(corev1.LabelMetadataName, metav1.LabelSelectorOpNotIn, y))))}})}
		},
	},
	{
		name: "upstream UDP: should support a 'default-deny-ingress' policy", probes: []probe{udp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "deny-all", spec{PodSelector: sel(), PolicyTypes: ingressOnly})}
		},
	},
	{
		name: "upstream UDP: should enforce policy based on Ports", probes: []probe{udp81, tcp81},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-ingress-on-port-81-ns-x", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(num(81, udp)), nss(sel("ns", y)))}})}
		},
	},
	{
		name: "upstream SCTP: should enforce policy based on Ports", probes: []probe{{81, sctp}, {80, sctp}}, modelOnly: true,
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-ingress-on-port-81-ns-x", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(num(81, sctp)), nss(sel("ns", y)))}})}
		},
	},
	{
		// Adapted from the endPort API test ("should support creating
		// NetworkPolicy API with endport field"): a range covering 80 and 81.
		name: "local: ingress endPort range 80-81", probes: []probe{tcp80, tcp81, udp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-80-81", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(span(80, 81, tcp)))}})}
		},
	},
	{
		name: "local: egress endPort range 79-80 excludes 81", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-79-80", spec{PodSelector: sel(), PolicyTypes: egressOnly,
				Egress: egress{out(ports(span(79, 80, tcp)))}})}
		},
	},
	{
		name: "local: ingress named UDP port", probes: []probe{udp81, udp80, tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-named-81-udp", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(named("serve-81-udp", udp)))}})}
		},
	},
	{
		// The selected pods number the port http differently (a: 80, b: 81, c:
		// none): each opens its own number only.
		name: "local: ingress on a named port the selected pods number differently", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-http", spec{PodSelector: sel(), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(named(HTTP, "")))}})}
		},
	},
	{
		// A named and a numbered port in one rule, from a peer selector.
		name: "local: ingress from a namespace on a named port and a numbered one", probes: []probe{tcp80, tcp81, udp81},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-http-udp-81-from-y", spec{PodSelector: sel(), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(named(HTTP, tcp), num(81, udp)), nss(sel("ns", y)))}})}
		},
	},
	{
		name: "local: ingress from an ipBlock on a named port", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-http-from-cidr-except-ya", spec{PodSelector: sel(), PolicyTypes: ingressOnly,
				Ingress: ingress{in(ports(named(HTTP, "")), block(covering(c), host(ipOf(c, y, "a"))))}})}
		},
	},
	{
		// The name is resolved on each destination pod of the peer.
		name: "local: egress to a namespace on a named port", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-http-to-y", spec{PodSelector: sel(), PolicyTypes: egressOnly,
				Egress: egress{out(ports(named(HTTP, "")), nss(sel("ns", y)))}})}
		},
	},
	{
		// No to: every pod of the cluster is a destination, each on its own number.
		name: "local: egress anywhere on a named port", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-http-anywhere", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress{out(ports(named(HTTP, "")))}})}
		},
	},
	{
		name: "local: egress to an ipBlock on a named port", probes: []probe{tcp80, tcp81},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-http-to-cidr-except-yb", spec{PodSelector: sel("pod", "b"), PolicyTypes: egressOnly,
				Egress: egress{out(ports(named(HTTP, "")), block(covering(c), host(ipOf(c, y, "b"))))}})}
		},
	},
	{
		// Every except is removed from the cidr; none re-admits addresses.
		name: "local: egress ipBlock with two excepts", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-cidr-except-xb-yc", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress{out(nil, block(covering(c), host(ipOf(c, x, "b")), host(ipOf(c, y, "c"))))}})}
		},
	},
	{
		// ipBlock on ingress matches the source pod's IP.
		name: "local: ingress ipBlock with three excepts", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, z := nsNames(c)
			return policies{np(x, "allow-cidr-except-xc-ya-zb", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, block(covering(c), host(ipOf(c, x, "c")), host(ipOf(c, y, "a")), host(ipOf(c, z, "b"))))}})}
		},
	},
	{
		name: "local: egress to a namespace", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-egress-to-y", spec{PodSelector: sel("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress{out(nil, nss(sel("ns", y)))}})}
		},
	},
	{
		// Adapted from "should enforce ingress policy allowing any port traffic
		// to a server on a specific protocol", on the egress side.
		name: "local: egress allowed for TCP only, UDP denied", probes: []probe{tcp80, udp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-egress-tcp", spec{PodSelector: sel(), PolicyTypes: egressOnly,
				Egress: egress{out(ports(anyPort(tcp)))}})}
		},
	},
	{
		name: "local: multiple policies selecting the same pod are a union", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, z := nsNames(c)
			return policies{
				np(x, "a-from-y", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
					Ingress: ingress{in(nil, nss(sel("ns", y)))}}),
				np(x, "ab-from-z", spec{PodSelector: exprs(req("pod", metav1.LabelSelectorOpIn, "a", "b")), PolicyTypes: ingressOnly,
					Ingress: ingress{in(nil, nss(sel("ns", z)))}}),
			}
		},
	},
	{
		name: "local: a policy selecting no pods has no effect", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "deny-nobody", spec{PodSelector: sel("pod", "nonexistent"), PolicyTypes: bothTypes})}
		},
	},
	{
		name: "local: deny all ingress except from one namespace", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "allow-only-y", spec{PodSelector: sel(), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, nss(sel("ns", y)))}})}
		},
	},
	{
		name: "local: namespaceSelector In matching two namespaces", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, z := nsNames(c)
			return policies{np(x, "allow-y-z", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, nss(exprs(req("ns", metav1.LabelSelectorOpIn, y, z))))}})}
		},
	},
	{
		name: "local: namespaceSelector matchLabels matching two namespaces", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "allow-team-blue", spec{PodSelector: sel("pod", "a"), PolicyTypes: ingressOnly,
				Ingress: ingress{in(nil, nss(sel("team", "blue")))}})}
		},
		labels: func(c Cluster) []LabelChange {
			_, y, z := nsNames(c)
			blue := map[string]string{"team": "blue"}
			return []LabelChange{{Namespace: y, Labels: blue}, {Namespace: z, Labels: blue}}
		},
	},
	{
		name: "local: policy podSelector with NotIn and Exists expressions", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, _, _ := nsNames(c)
			return policies{np(x, "deny-ingress-not-c", spec{
				PodSelector: exprs(req("pod", metav1.LabelSelectorOpNotIn, "c"), req("pod", metav1.LabelSelectorOpExists)),
				PolicyTypes: ingressOnly,
				Ingress:     ingress{in(nil, pods(exprs(req("pod", metav1.LabelSelectorOpDoesNotExist))), nss(sel("ns", "nonexistent")))},
			})}
		},
	},
	{
		// Empty policyTypes with egress rules: both Ingress and Egress apply,
		// so x/a accepts nothing and reaches only y.
		name: "local: empty policyTypes with egress rules implies Egress and Ingress", probes: []probe{tcp80},
		policies: func(c Cluster) policies {
			x, y, _ := nsNames(c)
			return policies{np(x, "egress-to-y", spec{PodSelector: sel("pod", "a"),
				Egress: egress{out(nil, nss(sel("ns", y)))}})}
		},
	},
}

// nsNames returns the names of the cluster's first three namespaces (x, y, z).
func nsNames(c Cluster) (x, y, z string) {
	return c.Namespaces[0].Name, c.Namespaces[1].Name, c.Namespaces[2].Name
}

func np(ns, name string, s networkingv1.NetworkPolicySpec) networkingv1.NetworkPolicy {
	return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: s}
}

// sel builds a matchLabels selector from key/value pairs; no pairs selects all.
func sel(kv ...string) metav1.LabelSelector {
	s := metav1.LabelSelector{}
	for i := 0; i+1 < len(kv); i += 2 {
		if s.MatchLabels == nil {
			s.MatchLabels = map[string]string{}
		}
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func exprs(reqs ...metav1.LabelSelectorRequirement) metav1.LabelSelector {
	return metav1.LabelSelector{MatchExpressions: reqs}
}

func req(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

func pods(s metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &s}
}

func nss(s metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &s}
}

func podsIn(ns, pod metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &ns, PodSelector: &pod}
}

func block(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func in(p []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyIngressRule {
	return networkingv1.NetworkPolicyIngressRule{Ports: p, From: peers}
}

func out(p []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{Ports: p, To: peers}
}

func ports(ps ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyPort { return ps }

// protoPtr returns nil for "" so that the API default (TCP) applies.
func protoPtr(p corev1.Protocol) *corev1.Protocol {
	if p == "" {
		return nil
	}
	return &p
}

func num(port int32, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(port)
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto), Port: &v}
}

func named(name string, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	v := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto), Port: &v}
}

func span(port, end int32, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	p := num(port, proto)
	p.EndPort = &end
	return p
}

func anyPort(proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto)}
}

func ipOf(c Cluster, ns, pod string) string {
	p, _ := c.Pod(ns + "/" + pod)
	return p.IP
}

// host returns the single-address CIDR of ip (/32 or /128).
func host(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String()
}

// around returns the /bits network containing ip.
func around(ip string, bits int) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	p, _ := a.Unmap().Prefix(bits)
	return p.String()
}

// covering returns the smallest CIDR containing every pod IP of c of the
// first pod's address family.
func covering(c Cluster) string {
	var pfx netip.Prefix
	for _, p := range c.Pods {
		a, err := netip.ParseAddr(p.IP)
		if err != nil {
			continue
		}
		a = a.Unmap()
		if !pfx.IsValid() {
			pfx = netip.PrefixFrom(a, a.BitLen())
			continue
		}
		for a.BitLen() == pfx.Addr().BitLen() && !pfx.Contains(a) {
			pfx, _ = pfx.Addr().Prefix(pfx.Bits() - 1)
		}
	}
	return pfx.String()
}
