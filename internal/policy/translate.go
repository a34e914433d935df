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
	// Key identifies the group among a cluster's (its tag): "np-<policy UID>" for a policy's pods, or
	// "np-<policy UID>-ports-<hash>" for those of its pods that give its ingress named ports one set of
	// numbers (see OwnerKey); "peer-<hash>" for a peer's pods (of its selectors, of an ipBlock or every
	// pod, and then those that give a named port one number); or "base-<name>" for the groups that open a
	// direction no policy isolates.
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

// policy translates one policy. Its egress rules and the ingress rules without named ports are the same
// for every pod it selects; an ingress named port opens, on each pod, the number that pod gives it. Its
// pods are therefore grouped by those numbers, and each set of numbers gets a group of its own with all
// the policy's rules, that of the pods naming none of them being KeyOf(np): a policy whose pods all name
// the port alike still has one group. A pod's group depends on its own ports only, as State.GroupsFor,
// which translates for one pod alone, needs.
func (t *translator) policy(np *networkingv1.NetworkPolicy) {
	selected, err := t.selectPods(np.Namespace, nil, &np.Spec.PodSelector)
	if err != nil {
		t.problem(np, "podSelector: %v", err)
		return
	}
	ingress, egress := types(np)
	var in []ruleSpec
	var common []Rule
	if ingress {
		for i, r := range np.Spec.Ingress {
			in = append(in, t.spec(np, "ingress", fmt.Sprintf("ingress[%d]", i), r.From, r.Ports))
		}
	}
	if egress {
		for i, r := range np.Spec.Egress {
			common = append(common, t.egressRules(t.spec(np, "egress", fmt.Sprintf("egress[%d]", i), r.To, r.Ports))...)
		}
	}
	refs := namedRefs(in)
	variants, members := map[string]numbers{}, map[string][]Pod{}
	for _, p := range selected {
		n := numbersOf(p, refs)
		key := variantKey(np, n)
		variants[key], members[key] = n, append(members[key], p)
	}
	if len(variants) == 0 {
		variants[KeyOf(np)] = nil
	}
	for key, n := range variants {
		rules := slices.Clone(common)
		for _, s := range in {
			rules = append(rules, s.ingressRules(n)...)
		}
		desc := "NetworkPolicy " + np.Namespace + "/" + np.Name
		if len(n) > 0 {
			desc += ", its pods with " + n.String()
		}
		t.res.Groups[key] = Group{Key: key, Description: clip(desc), Rules: dedupe(rules)}
		for _, p := range members[key] {
			t.join(p, key, ingress, egress)
		}
	}
}

// join makes p a member of the group key, which isolates it for ingress or egress as they say.
func (t *translator) join(p Pod, key string, ingress, egress bool) {
	m := t.res.Pods[p.Key()]
	m.IngressIsolated = m.IngressIsolated || ingress
	m.EgressIsolated = m.EgressIsolated || egress
	m.Groups = append(m.Groups, key)
	t.res.Pods[p.Key()] = m
}

// variantInfix separates a policy's key from the hash of the numbers of the pods a variant group is for.
const variantInfix = "-ports-"

// variantKey is the key of the group of np's pods that give its ingress named ports the numbers n: KeyOf(np)
// when they name none of them.
func variantKey(np *networkingv1.NetworkPolicy, n numbers) string {
	if len(n) == 0 {
		return KeyOf(np)
	}
	return KeyOf(np) + variantInfix + hash36(n.String())
}

// OwnerKey is the KeyOf of the policy whose group has key key, for a group a policy has for the pods that
// give its named ports some numbers as for its own; any other key is returned as it is.
func OwnerKey(key string) string {
	i := strings.LastIndex(key, variantInfix)
	if !strings.HasPrefix(key, "np-") || i < 0 {
		return key
	}
	if h := key[i+len(variantInfix):]; h == "" || strings.Trim(h, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		return key
	}
	return key[:i]
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

// ruleSpec is an ingress or egress rule read once (its problems said once): its remotes, its ports with a
// number (or every port), and its named ports.
type ruleSpec struct {
	dir     string
	remotes []remote
	ports   []portRange
	named   []namedRef
}

// remote is one from/to entry: the prefixes it admits (an ipBlock minus its excepts, or everything) or the
// peer group of its selectors, and, for its named ports, its pods and what they are (desc).
type remote struct {
	prefixes []string
	group    string
	desc     string
	pods     []Pod
}

// spec reads one ingress or egress rule. A selector's peer group is made whatever the pods (ingress) or
// when ports with a number use it (egress), so that whether a pod belongs to it depends on that pod alone.
func (t *translator) spec(np *networkingv1.NetworkPolicy, dir, where string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) ruleSpec {
	s := ruleSpec{dir: dir}
	s.ports, s.named = t.portRanges(np, where, ports)
	if len(peers) == 0 {
		desc, pods, _ := t.peerPods("", &metav1.LabelSelector{}, nil)
		s.remotes = []remote{{prefixes: []string{"0.0.0.0/0"}, desc: desc, pods: pods}}
		return s
	}
	for i, peer := range peers {
		if peer.IPBlock != nil {
			if rm, ok := t.block(np, fmt.Sprintf("%s.from/to[%d].ipBlock", where, i), peer.IPBlock); ok {
				s.remotes = append(s.remotes, rm)
			}
			continue
		}
		desc, pods, err := t.peerPods(np.Namespace, peer.NamespaceSelector, peer.PodSelector)
		if err != nil {
			t.problem(np, "%s.from/to[%d]: %v", where, i, err)
			continue
		}
		rm := remote{desc: desc, pods: pods}
		if dir == "ingress" || len(s.ports) > 0 {
			rm.group = t.group(desc, pods)
		}
		s.remotes = append(s.remotes, rm)
	}
	return s
}

// block is the remote of an ipBlock; false when it admits no pod address (IPv6) or is invalid.
func (t *translator) block(np *networkingv1.NetworkPolicy, where string, b *networkingv1.IPBlock) (remote, bool) {
	if p, err := netip.ParsePrefix(b.CIDR); err == nil && !p.Addr().Is4() {
		return remote{}, false // Raven's pods are IPv4: an IPv6 block admits none of them
	}
	prefixes, err := Subtract(b.CIDR, b.Except)
	if err != nil {
		t.problem(np, "%s: %v", where, err)
		return remote{}, false
	}
	rm := remote{prefixes: prefixes, desc: "pods in " + b.CIDR}
	if len(b.Except) > 0 {
		rm.desc += " except " + strings.Join(slices.Sorted(slices.Values(b.Except)), " ")
	}
	for _, p := range prefixes {
		rm.pods = append(rm.pods, t.podsIn(p)...)
	}
	return rm, true
}

// rules are the rules admitting the remote on ports.
func (rm remote) rules(dir string, ports []portRange) []Rule {
	var out []Rule
	for _, pr := range ports {
		if rm.group != "" {
			out = append(out, Rule{Direction: dir, Protocol: pr.protocol, PortMin: pr.min, PortMax: pr.max, RemoteGroup: rm.group})
			continue
		}
		for _, p := range rm.prefixes {
			out = append(out, Rule{Direction: dir, Protocol: pr.protocol, PortMin: pr.min, PortMax: pr.max, RemoteIPPrefix: p})
		}
	}
	return out
}

// ingressRules are the rules of an ingress rule on the pods that give its named ports the numbers n.
func (s ruleSpec) ingressRules(n numbers) []Rule {
	ports := slices.Clone(s.ports)
	for _, ref := range s.named {
		if v, ok := n[ref]; ok {
			ports = append(ports, portRange{protocol: ref.protocol(), min: v, max: v})
		}
	}
	var out []Rule
	for _, rm := range s.remotes {
		out = append(out, rm.rules(s.dir, ports)...)
	}
	return out
}

// egressRules are the rules of an egress rule. A named port is resolved on the destination: for each
// number the remote's pods give it, a rule on that number towards a peer group of the remote's pods that
// give it that number. Rules grow with the distinct numbers, not with the pods.
func (t *translator) egressRules(s ruleSpec) []Rule {
	var out []Rule
	for _, rm := range s.remotes {
		out = append(out, rm.rules(s.dir, s.ports)...)
		for _, ref := range s.named {
			for _, v := range namedPort(rm.pods, ref) {
				var members []Pod
				for _, p := range rm.pods {
					if n, ok := ref.on(p); ok && n == v {
						members = append(members, p)
					}
				}
				key := t.group(fmt.Sprintf("%s whose %s port %s is %d", rm.desc, ref.protocol(), ref.name, v), members)
				out = append(out, Rule{Direction: s.dir, Protocol: ref.protocol(), PortMin: v, PortMax: v, RemoteGroup: key})
			}
		}
	}
	return out
}

type portRange struct {
	protocol string
	min, max int
}

// namedRef is a named port of a rule: a container port name and its protocol.
type namedRef struct {
	name  string
	proto corev1.Protocol
}

func (r namedRef) protocol() string { return strings.ToLower(string(r.proto)) }

// on is the number pod p gives the named port; false when it names no such port.
func (r namedRef) on(p Pod) (int, bool) {
	for _, cp := range p.Ports {
		if cp.Name == r.name && cmp.Or(cp.Protocol, corev1.ProtocolTCP) == r.proto {
			return int(cp.ContainerPort), true
		}
	}
	return 0, false
}

// numbers are the numbers a pod gives named ports, of those it names.
type numbers map[namedRef]int

// numbersOf are the numbers p gives refs.
func numbersOf(p Pod, refs []namedRef) numbers {
	n := numbers{}
	for _, ref := range refs {
		if v, ok := ref.on(p); ok {
			n[ref] = v
		}
	}
	return n
}

// String is the numbers in a stable order, e.g. "tcp http 80, udp dns 53".
func (n numbers) String() string {
	var parts []string
	for ref, v := range n {
		parts = append(parts, fmt.Sprintf("%s %s %d", ref.protocol(), ref.name, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// namedRefs are the distinct named ports of rules.
func namedRefs(rules []ruleSpec) []namedRef {
	var out []namedRef
	for _, s := range rules {
		for _, ref := range s.named {
			if !slices.Contains(out, ref) {
				out = append(out, ref)
			}
		}
	}
	return out
}

// portRanges are the rule's ports with a number as Neutron port ranges (every port of every protocol when
// none is given), and its named ports, which are resolved on the destination pods.
func (t *translator) portRanges(np *networkingv1.NetworkPolicy, where string, ports []networkingv1.NetworkPolicyPort) ([]portRange, []namedRef) {
	if len(ports) == 0 {
		return []portRange{{}}, nil
	}
	var out []portRange
	var named []namedRef
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
			named = append(named, namedRef{name: p.Port.StrVal, proto: proto})
		}
	}
	return out, named
}

// namedPort is the sorted distinct numbers pods give the named port ref.
func namedPort(pods []Pod, ref namedRef) []int {
	var out []int
	for _, p := range pods {
		if n, ok := ref.on(p); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// peerPods are the pods of a from/to entry with selectors, and what they are. Without namespaceSelector
// the peer is in the policy's namespace.
func (t *translator) peerPods(policyNS string, nsSel, podSel *metav1.LabelSelector) (string, []Pod, error) {
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
	return desc, pods, nil
}

// group is the key of the peer group of the pods desc says, made when first seen with members as its
// members.
func (t *translator) group(desc string, members []Pod) string {
	key := "peer-" + hash36(desc)
	if _, ok := t.res.Groups[key]; !ok {
		t.res.Groups[key] = Group{Key: key, Description: clip(desc)}
		for _, p := range members {
			t.join(p, key, false, false)
		}
	}
	return key
}

func hash36(s string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return strconv.FormatUint(h.Sum64(), 36)
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
