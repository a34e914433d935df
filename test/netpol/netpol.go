// Package netpol is an independent model of Kubernetes networking.k8s.io/v1
// NetworkPolicy semantics, written from the API reference. It computes the
// expected connectivity matrix of a truth-table test in the style of the
// upstream Kubernetes suite test/e2e/network/netpol: namespaces x, y and z,
// pods a, b and c in each, every pod serving TCP and UDP on ports 80 and 81,
// every ordered pair of pods probed. Unlike upstream, the pods do not all name
// their ports alike: the TCP port named "http" is 80 on pod a, 81 on pod b,
// and pod c has none, so that a named port must be resolved on each pod.
package netpol

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ContainerPort is a port a pod's container declares; named ports in policies
// are resolved against these.
type ContainerPort struct {
	Name     string
	Port     int32
	Protocol corev1.Protocol // empty means TCP, as in the Pod API
}

// Pod is a pod of the cluster under test.
type Pod struct {
	Namespace string
	Name      string
	Labels    map[string]string
	IP        string
	Ports     []ContainerPort
}

// Key returns "namespace/name", the key used in a Table.
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// Namespace is a namespace of the cluster under test.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Cluster is the set of namespaces and pods a policy set is evaluated against.
type Cluster struct {
	Namespaces []Namespace
	Pods       []Pod
}

// Names of the default cluster, as in the upstream suite.
var (
	NamespaceNames = []string{"x", "y", "z"}
	PodNames       = []string{"a", "b", "c"}
	ServedPorts    = []int32{80, 81}
	Protocols      = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}
)

// DefaultIP is the address scheme used when DefaultCluster gets a nil ipOf:
// 10.244.<namespace index>.<pod index + 10>.
func DefaultIP(ns, pod string) string {
	return fmt.Sprintf("10.244.%d.%d", slices.Index(NamespaceNames, ns), slices.Index(PodNames, pod)+10)
}

// DefaultCluster builds namespaces x, y, z, each labelled ns=<name> and
// kubernetes.io/metadata.name=<name>, holding pods a, b, c labelled
// pod=<name>, each declaring the ports of PodPorts. ipOf gives each pod's IP;
// nil means DefaultIP.
func DefaultCluster(ipOf func(ns, pod string) string) Cluster {
	if ipOf == nil {
		ipOf = DefaultIP
	}
	var c Cluster
	for _, ns := range NamespaceNames {
		c.Namespaces = append(c.Namespaces, Namespace{
			Name:   ns,
			Labels: map[string]string{"ns": ns, corev1.LabelMetadataName: ns},
		})
		for _, pod := range PodNames {
			c.Pods = append(c.Pods, Pod{Namespace: ns, Name: pod, Labels: map[string]string{"pod": pod}, IP: ipOf(ns, pod), Ports: PodPorts(pod)})
		}
	}
	return c
}

// HTTP is the TCP port name the default pods number differently: HTTPPorts.
const HTTP = "http"

// HTTPPorts is the number each default pod gives the port named HTTP; a pod
// missing here does not name it.
var HTTPPorts = map[string]int32{"a": 80, "b": 81}

// PodPorts are the container ports of default pod pod (its name): the
// upstream serve-<port>-<tcp|udp> for every served port and protocol, and
// HTTP on the number HTTPPorts gives it (a second name for a served port, so
// that every pod still serves exactly ports 80 and 81).
func PodPorts(pod string) []ContainerPort {
	var out []ContainerPort
	for _, port := range ServedPorts {
		for _, proto := range Protocols {
			out = append(out, ContainerPort{Name: PortName(port, proto), Port: port, Protocol: proto})
		}
	}
	if n, ok := HTTPPorts[pod]; ok {
		out = append(out, ContainerPort{Name: HTTP, Port: n, Protocol: corev1.ProtocolTCP})
	}
	return out
}

// PortName is the upstream container port name, e.g. "serve-80-tcp".
func PortName(port int32, proto corev1.Protocol) string {
	switch proto {
	case corev1.ProtocolTCP:
		return fmt.Sprintf("serve-%d-tcp", port)
	case corev1.ProtocolUDP:
		return fmt.Sprintf("serve-%d-udp", port)
	default:
		return fmt.Sprintf("serve-%d-sctp", port)
	}
}

// Pod returns the pod with key "namespace/name".
func (c Cluster) Pod(key string) (Pod, bool) {
	for _, p := range c.Pods {
		if p.Key() == key {
			return p, true
		}
	}
	return Pod{}, false
}

// namespaceLabels returns the labels of namespace name. The API server always
// sets kubernetes.io/metadata.name, so it is present even if the model omits it.
func (c Cluster) namespaceLabels(name string) labels.Set {
	set := labels.Set{corev1.LabelMetadataName: name}
	for _, ns := range c.Namespaces {
		if ns.Name == name {
			for k, v := range ns.Labels {
				set[k] = v
			}
		}
	}
	return set
}

// Allowed reports whether a connection from pod from to pod to on port/proto
// is allowed: the egress side of from and the ingress side of to must both
// allow it. A pod is isolated in a direction only if some policy in its
// namespace selects it and has that policy type; an isolated pod accepts the
// traffic if at least one rule of one of those policies matches it.
func Allowed(c Cluster, policies []networkingv1.NetworkPolicy, from, to Pod, port int32, proto corev1.Protocol) bool {
	return admits(c, policies, networkingv1.PolicyTypeEgress, from, to, to, port, proto) &&
		admits(c, policies, networkingv1.PolicyTypeIngress, to, from, to, port, proto)
}

// rule is an ingress or egress rule: the peers on the other end and the
// destination ports.
type rule struct {
	peers []networkingv1.NetworkPolicyPeer
	ports []networkingv1.NetworkPolicyPort
}

// admits reports whether the policies of direction dir that select subject
// allow traffic with peer; dst is the destination pod, used to resolve named
// ports.
func admits(c Cluster, policies []networkingv1.NetworkPolicy, dir networkingv1.PolicyType, subject, peer, dst Pod, port int32, proto corev1.Protocol) bool {
	isolated := false
	for i := range policies {
		np := &policies[i]
		if np.Namespace != subject.Namespace || !affects(&np.Spec, dir) || !selects(&np.Spec.PodSelector, subject.Labels) {
			continue
		}
		isolated = true
		for _, r := range rules(&np.Spec, dir) {
			if peersMatch(c, np.Namespace, r.peers, peer) && portsMatch(r.ports, dst, port, proto) {
				return true
			}
		}
	}
	return !isolated
}

// affects reports whether a policy applies to direction dir. With no
// policyTypes, every policy affects ingress and only policies with egress
// rules affect egress.
func affects(spec *networkingv1.NetworkPolicySpec, dir networkingv1.PolicyType) bool {
	if len(spec.PolicyTypes) == 0 {
		return dir == networkingv1.PolicyTypeIngress || len(spec.Egress) > 0
	}
	return slices.Contains(spec.PolicyTypes, dir)
}

func rules(spec *networkingv1.NetworkPolicySpec, dir networkingv1.PolicyType) []rule {
	var rs []rule
	if dir == networkingv1.PolicyTypeIngress {
		for _, r := range spec.Ingress {
			rs = append(rs, rule{r.From, r.Ports})
		}
	} else {
		for _, r := range spec.Egress {
			rs = append(rs, rule{r.To, r.Ports})
		}
	}
	return rs
}

// selects reports whether sel matches set; a nil or invalid selector matches
// nothing, an empty one matches everything.
func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(set))
}

// peersMatch reports whether pod is one of peers; no peers means any pod.
func peersMatch(c Cluster, policyNS string, peers []networkingv1.NetworkPolicyPeer, pod Pod) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if peerMatches(c, policyNS, p, pod) {
			return true
		}
	}
	return false
}

func peerMatches(c Cluster, policyNS string, peer networkingv1.NetworkPolicyPeer, pod Pod) bool {
	switch {
	case peer.IPBlock != nil:
		// The API rejects an ipBlock combined with selectors.
		return peer.PodSelector == nil && peer.NamespaceSelector == nil && inBlock(peer.IPBlock, pod.IP)
	case peer.NamespaceSelector == nil:
		// podSelector alone: pods of the policy's own namespace.
		return peer.PodSelector != nil && pod.Namespace == policyNS && selects(peer.PodSelector, pod.Labels)
	case !selects(peer.NamespaceSelector, c.namespaceLabels(pod.Namespace)):
		return false
	default:
		// namespaceSelector alone, or both selectors in one peer (AND).
		return peer.PodSelector == nil || selects(peer.PodSelector, pod.Labels)
	}
}

// inBlock reports whether ip lies in the block's cidr and in none of its
// excepts. Unparsable input matches nothing.
func inBlock(b *networkingv1.IPBlock, ip string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !cidr.Contains(addr) {
		return false
	}
	for _, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil || ex.Contains(addr) {
			return false
		}
	}
	return true
}

// portsMatch reports whether port/proto on dst is one of ports; no ports means
// every port and protocol.
func portsMatch(ports []networkingv1.NetworkPolicyPort, dst Pod, port int32, proto corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if portMatches(p, dst, port, proto) {
			return true
		}
	}
	return false
}

func portMatches(p networkingv1.NetworkPolicyPort, dst Pod, port int32, proto corev1.Protocol) bool {
	if protocolOf(p.Protocol) != proto {
		return false
	}
	switch {
	case p.Port == nil:
		// No port: every port of the protocol (endPort requires a port).
		return p.EndPort == nil
	case p.Port.Type == intstr.String:
		// A named port is looked up among the destination pod's container
		// ports of the same protocol; endPort is not allowed with it.
		if p.EndPort != nil {
			return false
		}
		for _, cp := range dst.Ports {
			if cp.Name == p.Port.StrVal && protocolOf(&cp.Protocol) == proto && cp.Port == port {
				return true
			}
		}
		return false
	default:
		end := p.Port.IntVal
		if p.EndPort != nil {
			end = *p.EndPort
		}
		return p.Port.IntVal <= port && port <= end
	}
}

// protocolOf applies the API default: TCP.
func protocolOf(p *corev1.Protocol) corev1.Protocol {
	if p == nil || *p == "" {
		return corev1.ProtocolTCP
	}
	return *p
}
