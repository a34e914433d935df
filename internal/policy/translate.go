package policy

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Pod is what the translation needs of a pod that has a port: where it is, its labels, its address and its
// container ports (for named ports).
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	IP              string
	Ports           []corev1.ContainerPort
	// Node is the name of the node the pod is bound to ("": not yet).
	Node string
}

// Key is "namespace/name".
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// Namespace is a namespace's name and labels.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Rule is one Neutron security group rule. Protocol is "tcp", "udp", "sctp" or "" (any, and then no
// ports); PortMin..PortMax is the destination port range (0, 0: every port). Exactly one of RemoteGroup (a
// peer group's Key) and RemoteIPPrefix is set.
type Rule struct {
	Direction        string // "ingress" or "egress"
	Protocol         string
	PortMin, PortMax int
	RemoteGroup      string
	RemoteIPPrefix   string
}

// Group is a security group Raven wants: a policy's group with its rules, or a peer group without rules.
type Group struct {
	// Key identifies the group among a cluster's (its tag): "np-<policy UID>", "peer-<hash of the
	// selectors>", or "base-<name>" for the groups that open a direction no policy isolates.
	Key string
	// Description says what the group stands for, for people reading Neutron.
	Description string
	Rules       []Rule
}

// Membership is what the translation decides for one pod.
type Membership struct {
	// IngressIsolated and EgressIsolated: a policy of that type selects the pod; traffic in that direction
	// is then only what some selecting policy admits.
	IngressIsolated, EgressIsolated bool
	// Groups are the keys of the policy groups that select the pod and of the peer groups it belongs to.
	Groups []string
}

// Result is the whole translation: the groups, and the membership of every pod that has any.
type Result struct {
	Groups map[string]Group
	Pods   map[string]Membership // by Pod.Key
	// Problems are what cannot be expressed as asked, by policy ("namespace/name").
	Problems map[string][]string
}

// Translate turns the cluster's policies into groups and memberships. pods are the pods that have ports,
// namespaces every namespace (for namespace selectors).
func Translate(policies []networkingv1.NetworkPolicy, pods []Pod, namespaces []Namespace) Result {
	t := translator{res: Result{Groups: map[string]Group{}, Pods: map[string]Membership{}, Problems: map[string][]string{}},
		pods: pods, nsLabels: map[string]labels.Set{}}
	for _, ns := range namespaces {
		set := labels.Set{corev1.LabelMetadataName: ns.Name}
		for k, v := range ns.Labels {
			set[k] = v
		}
		t.nsLabels[ns.Name] = set
	}
	for i := range policies {
		t.policy(&policies[i])
	}
	for key, m := range t.res.Pods {
		slices.Sort(m.Groups)
		m.Groups = slices.Compact(m.Groups)
		t.res.Pods[key] = m
	}
	return t.res
}

type translator struct {
	res      Result
	pods     []Pod
	nsLabels map[string]labels.Set
}

// KeyOf is the key of a policy's group: its UID, so that a policy deleted and made again under its name
// gets a group of its own.
func KeyOf(np *networkingv1.NetworkPolicy) string {
	if np.UID == "" {
		return "np-" + np.Namespace + "." + np.Name
	}
	return "np-" + string(np.UID)
}

func (t *translator) problem(np *networkingv1.NetworkPolicy, format string, args ...any) {
	key := np.Namespace + "/" + np.Name
	t.res.Problems[key] = append(t.res.Problems[key], fmt.Sprintf(format, args...))
}

func (t *translator) policy(np *networkingv1.NetworkPolicy) {
	selected, err := t.selectPods(np.Namespace, nil, &np.Spec.PodSelector)
	if err != nil {
		t.problem(np, "podSelector: %v", err)
		return
	}
	ingress, egress := types(np)
	g := Group{Key: KeyOf(np), Description: clip("NetworkPolicy " + np.Namespace + "/" + np.Name)}
	if ingress {
		for i, r := range np.Spec.Ingress {
			g.Rules = append(g.Rules, t.rule(np, "ingress", fmt.Sprintf("ingress[%d]", i), r.From, r.Ports, selected)...)
		}
	}
	if egress {
		for i, r := range np.Spec.Egress {
			g.Rules = append(g.Rules, t.rule(np, "egress", fmt.Sprintf("egress[%d]", i), r.To, r.Ports, nil)...)
		}
	}
	g.Rules = dedupe(g.Rules)
	t.res.Groups[g.Key] = g
	for _, p := range selected {
		m := t.res.Pods[p.Key()]
		m.IngressIsolated = m.IngressIsolated || ingress
		m.EgressIsolated = m.EgressIsolated || egress
		m.Groups = append(m.Groups, g.Key)
		t.res.Pods[p.Key()] = m
	}
}

// types says which directions a policy isolates: policyTypes when given, else Ingress, and Egress when the
// policy has egress rules.
func types(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, pt := range np.Spec.PolicyTypes {
		switch pt {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// rule translates one ingress or egress rule: its peers × its ports. selected are the pods the policy
// selects (ingress: named ports resolve on them); for egress, named ports resolve on each peer's pods.
func (t *translator) rule(np *networkingv1.NetworkPolicy, dir, where string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, selected []Pod) []Rule {
	type remote struct {
		group, prefix string
		pods          []Pod // where an egress named port resolves
	}
	var remotes []remote
	if len(peers) == 0 {
		remotes = append(remotes, remote{prefix: "0.0.0.0/0", pods: t.pods})
	}
	for i, peer := range peers {
		switch {
		case peer.IPBlock != nil:
			if b, err := netip.ParsePrefix(peer.IPBlock.CIDR); err == nil && !b.Addr().Is4() {
				continue // Raven's pods are IPv4: an IPv6 block admits none of them
			}
			prefixes, err := Subtract(peer.IPBlock.CIDR, peer.IPBlock.Except)
			if err != nil {
				t.problem(np, "%s.from/to[%d].ipBlock: %v", where, i, err)
				continue
			}
			for _, p := range prefixes {
				remotes = append(remotes, remote{prefix: p, pods: t.podsIn(p)})
			}
		default:
			key, pods, err := t.peerGroup(np.Namespace, peer.NamespaceSelector, peer.PodSelector)
			if err != nil {
				t.problem(np, "%s.from/to[%d]: %v", where, i, err)
				continue
			}
			remotes = append(remotes, remote{group: key, pods: pods})
		}
	}
	var out []Rule
	for _, rm := range remotes {
		on := selected
		if dir == "egress" {
			on = rm.pods
		}
		for _, pr := range t.portRanges(np, where, ports, on) {
			out = append(out, Rule{Direction: dir, Protocol: pr.protocol, PortMin: pr.min, PortMax: pr.max, RemoteGroup: rm.group, RemoteIPPrefix: rm.prefix})
		}
	}
	return out
}

type portRange struct {
	protocol string
	min, max int
}

// portRanges is the rule's ports as Neutron port ranges: every port of every protocol when none is given;
// a named port becomes the numbers it names on the pods on (the destination side), as many ranges as
// there are distinct numbers, and none when no pod names it.
func (t *translator) portRanges(np *networkingv1.NetworkPolicy, where string, ports []networkingv1.NetworkPolicyPort, on []Pod) []portRange {
	if len(ports) == 0 {
		return []portRange{{}}
	}
	var out []portRange
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		protocol := strings.ToLower(string(proto))
		switch {
		case p.Port == nil:
			out = append(out, portRange{protocol: protocol})
		case p.Port.IntVal != 0 || p.Port.StrVal == "":
			end := int(p.Port.IntVal)
			if p.EndPort != nil {
				end = int(*p.EndPort)
			}
			if end < int(p.Port.IntVal) {
				t.problem(np, "%s: endPort %d is below port %d", where, end, p.Port.IntVal)
				continue
			}
			out = append(out, portRange{protocol: protocol, min: int(p.Port.IntVal), max: end})
		default:
			for _, n := range namedPort(on, p.Port.StrVal, proto) {
				out = append(out, portRange{protocol: protocol, min: n, max: n})
			}
		}
	}
	return out
}

// namedPort is the sorted distinct numbers the container port name of protocol proto has on pods.
func namedPort(pods []Pod, name string, proto corev1.Protocol) []int {
	var out []int
	for _, p := range pods {
		for _, cp := range p.Ports {
			cpProto := cmp.Or(cp.Protocol, corev1.ProtocolTCP)
			if cp.Name == name && cpProto == proto {
				out = append(out, int(cp.ContainerPort))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// peerGroup is the peer group of a from/to entry with selectors, made when first seen, and its pods (who
// become its members). Without namespaceSelector the peer is in the policy's namespace.
func (t *translator) peerGroup(policyNS string, nsSel, podSel *metav1.LabelSelector) (string, []Pod, error) {
	if nsSel == nil && podSel == nil {
		return "", nil, fmt.Errorf("a peer needs a podSelector, a namespaceSelector or an ipBlock")
	}
	pods, err := t.selectPods(policyNS, nsSel, podSel)
	if err != nil {
		return "", nil, err
	}
	desc := "pods " + selectorText(podSel)
	if nsSel == nil {
		desc += " in namespace " + policyNS
	} else {
		desc += " in namespaces " + selectorText(nsSel)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(desc))
	key := "peer-" + strconv.FormatUint(h.Sum64(), 36)
	if _, ok := t.res.Groups[key]; !ok {
		t.res.Groups[key] = Group{Key: key, Description: clip(desc)}
		for _, p := range pods {
			m := t.res.Pods[p.Key()]
			m.Groups = append(m.Groups, key)
			t.res.Pods[p.Key()] = m
		}
	}
	return key, pods, nil
}

// selectPods are the pods matching podSel (nil: all) in namespace ns, or in the namespaces matching nsSel
// when it is given.
func (t *translator) selectPods(ns string, nsSel, podSel *metav1.LabelSelector) ([]Pod, error) {
	podMatch := labels.Everything()
	if podSel != nil {
		s, err := metav1.LabelSelectorAsSelector(podSel)
		if err != nil {
			return nil, err
		}
		podMatch = s
	}
	nsMatch := func(name string) bool { return name == ns }
	if nsSel != nil {
		s, err := metav1.LabelSelectorAsSelector(nsSel)
		if err != nil {
			return nil, err
		}
		nsMatch = func(name string) bool {
			set, ok := t.nsLabels[name]
			return ok && s.Matches(set)
		}
	}
	var out []Pod
	for _, p := range t.pods {
		if nsMatch(p.Namespace) && podMatch.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

// podsIn are the pods whose address is in prefix.
func (t *translator) podsIn(prefix string) []Pod {
	pfx, err := netip.ParsePrefix(prefix)
	if err != nil {
		return nil
	}
	var out []Pod
	for _, p := range t.pods {
		if a, err := netip.ParseAddr(p.IP); err == nil && pfx.Contains(a) {
			out = append(out, p)
		}
	}
	return out
}

func selectorText(s *metav1.LabelSelector) string {
	if s == nil {
		return "(all)"
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil || sel.Empty() {
		return "(all)"
	}
	return "(" + sel.String() + ")"
}

func dedupe(rules []Rule) []Rule {
	key := func(r Rule) string {
		return fmt.Sprintf("%s|%s|%d|%d|%s|%s", r.Direction, r.Protocol, r.PortMin, r.PortMax, r.RemoteGroup, r.RemoteIPPrefix)
	}
	slices.SortFunc(rules, func(a, b Rule) int { return strings.Compare(key(a), key(b)) })
	return slices.CompactFunc(rules, func(a, b Rule) bool { return key(a) == key(b) })
}

// clip keeps a description within Neutron's 255 characters (the key, not the description, identifies a group).
func clip(s string) string {
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}
