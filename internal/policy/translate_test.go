package policy

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/raven-net/raven/test/netpol"
)

func TestSubtract(t *testing.T) {
	cases := []struct {
		name    string
		cidr    string
		excepts []string
		want    []string
	}{
		{"no except is the block itself", "10.0.0.0/24", nil, []string{"10.0.0.0/24"}},
		{"one except splits the block around it", "10.0.0.0/24", []string{"10.0.0.0/26"}, []string{"10.0.0.64/26", "10.0.0.128/25"}},
		{"two excepts both stay out (the second does not re-admit the first)", "10.0.0.0/24", []string{"10.0.0.10/32", "10.0.0.200/32"},
			[]string{"10.0.0.0/29", "10.0.0.8/31", "10.0.0.11/32", "10.0.0.12/30", "10.0.0.16/28", "10.0.0.32/27", "10.0.0.64/26",
				"10.0.0.128/26", "10.0.0.192/29", "10.0.0.201/32", "10.0.0.202/31", "10.0.0.204/30", "10.0.0.208/28", "10.0.0.224/27"}},
		{"overlapping excepts", "10.0.0.0/24", []string{"10.0.0.0/25", "10.0.0.0/26"}, []string{"10.0.0.128/25"}},
		{"an except covering the block leaves nothing", "10.0.0.0/24", []string{"10.0.0.0/16"}, nil},
		{"an except outside the block removes nothing", "10.0.0.0/24", []string{"10.1.0.0/24"}, []string{"10.0.0.0/24"}},
		{"the block is masked", "10.0.0.7/24", nil, []string{"10.0.0.0/24"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Subtract(tc.cidr, tc.excepts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Subtract = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := Subtract("10.0.0.0/24", []string{"fd00::/64"}); err == nil {
		t.Fatal("an IPv6 except of an IPv4 block was accepted")
	}
}

// The rule and group counts grow with the policy's rules, peers, ports and the distinct numbers its named
// ports resolve to, not with the pods it selects or admits. Half the web pods name http 80, the other half
// 81; the clients name it 8080.
func TestRulesDoNotGrowWithPods(t *testing.T) {
	web := map[string]string{"app": "web"}
	client := map[string]string{"app": "client"}
	port80, http := intstr.FromInt32(80), intstr.FromString("http")
	cases := []struct {
		name                  string
		selects               map[string]string
		ingress               []networkingv1.NetworkPolicyIngressRule
		egress                []networkingv1.NetworkPolicyEgressRule
		wantRules, wantGroups int
	}{
		{"a numbered port is one rule and the policy's group and the peer's", web,
			[]networkingv1.NetworkPolicyIngressRule{{From: peer(client), Ports: []networkingv1.NetworkPolicyPort{{Port: &port80}}}}, nil, 1, 2},
		{"an ingress named port the selected pods number two ways is a group and a rule for each way, and the peer's group", web,
			[]networkingv1.NetworkPolicyIngressRule{{From: peer(client), Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}}}, nil, 2, 3},
		{"an egress named port towards pods that number it two ways is the policy's group and a rule and a peer group for each number", client, nil,
			[]networkingv1.NetworkPolicyEgressRule{{To: peer(web), Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}}}, 2, 3},
		{"an egress named port to anywhere is a rule and a peer group for each number the cluster's pods give it", client, nil,
			[]networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}}}, 3, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "web", UID: "u1"}, Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: tc.selects}, Ingress: tc.ingress, Egress: tc.egress,
			}}
			if tc.egress != nil {
				np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
			}
			for _, n := range []int{10, 300} {
				var pods []Pod
				for i := range n {
					pods = append(pods, Pod{Namespace: "x", Name: "web" + strings.Repeat("w", i), Labels: web, Ports: namedHTTP(80 + int32(i%2))},
						Pod{Namespace: "x", Name: "client" + strings.Repeat("c", i), Labels: client, Ports: namedHTTP(8080)})
				}
				res := Translate([]networkingv1.NetworkPolicy{np}, pods, []Namespace{{Name: "x"}})
				rules := 0
				for _, g := range res.Groups {
					rules += len(g.Rules)
				}
				if rules != tc.wantRules || len(res.Groups) != tc.wantGroups || len(res.Pods) != 2*n {
					t.Fatalf("%d pods each side: %d rules in %d groups, %d pods members; want %d rules in %d groups, every pod a member",
						n, rules, len(res.Groups), len(res.Pods), tc.wantRules, tc.wantGroups)
				}
			}
		})
	}
}

func peer(podLabels map[string]string) []networkingv1.NetworkPolicyPeer {
	return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: podLabels}}}
}

func namedHTTP(n int32) []corev1.ContainerPort {
	return []corev1.ContainerPort{{Name: "http", ContainerPort: n}}
}

// TestTranslationMatchesTheModel translates every scenario of the independent model, evaluates the groups
// as Neutron does (a port admits what any rule of any of its groups admits; a direction no policy isolates
// is open) and compares every ordered pair with the model's expectation.
func TestTranslationMatchesTheModel(t *testing.T) {
	base := netpol.DefaultCluster(nil)
	for _, sc := range netpol.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			c := sc.Apply(base)
			pols := sc.Policies(c)
			want := sc.Expected(c)
			res := Translate(pols, podsOf(c), namespacesOf(c))
			if len(res.Problems) > 0 {
				t.Fatalf("problems: %v", res.Problems)
			}
			got := netpol.Table{}
			for _, from := range c.Pods {
				for _, to := range c.Pods {
					got.Set(from.Key(), to.Key(), admits(res, from, to, sc.Port, sc.Protocol))
				}
			}
			if d := netpol.Diff(want, got); len(d) > 0 {
				t.Fatalf("%d pairs differ: %v\n%s", len(d), d, netpol.SideBySide(want, got))
			}
		})
	}
}

// The pod controller gives a new pod its groups from a translation of the policies with that pod alone
// (State.GroupsFor): a pod's membership must not depend on the other pods.
func TestAPodsGroupsDoNotDependOnTheOtherPods(t *testing.T) {
	base := netpol.DefaultCluster(nil)
	for _, sc := range netpol.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			c := sc.Apply(base)
			pols := sc.Policies(c)
			all := Translate(pols, podsOf(c), namespacesOf(c))
			for _, p := range podsOf(c) {
				alone := Translate(pols, []Pod{p}, namespacesOf(c))
				if got, want := alone.Pods[p.Key()], all.Pods[p.Key()]; !reflect.DeepEqual(got, want) {
					t.Errorf("%s alone: %+v; among the cluster's pods: %+v", p.Key(), got, want)
				}
			}
		})
	}
}

func TestOwnerKey(t *testing.T) {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "web", UID: "0b6c5f8e-2d41-4c3a-9f1e-7a2b3c4d5e6f"}}
	http := namedRef{name: "http", proto: corev1.ProtocolTCP}
	cases := []struct {
		name, key, want string
	}{
		{"a policy's own group is the policy's", KeyOf(np), KeyOf(np)},
		{"the group of the pods that number its named ports one way is the policy's", variantKey(np, numbers{http: 8080}), KeyOf(np)},
		{"a peer group is no policy's", "peer-1x2y3z", "peer-1x2y3z"},
		{"a base group is no policy's", BaseInfra, BaseInfra},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := OwnerKey(tc.key); got != tc.want {
				t.Fatalf("OwnerKey(%q) = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
}

func podsOf(c netpol.Cluster) []Pod {
	var out []Pod
	for _, p := range c.Pods {
		pod := Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, IP: p.IP}
		for _, cp := range p.Ports {
			pod.Ports = append(pod.Ports, corev1.ContainerPort{Name: cp.Name, ContainerPort: cp.Port, Protocol: cp.Protocol})
		}
		out = append(out, pod)
	}
	return out
}

func namespacesOf(c netpol.Cluster) []Namespace {
	var out []Namespace
	for _, ns := range c.Namespaces {
		out = append(out, Namespace{Name: ns.Name, Labels: ns.Labels})
	}
	return out
}

// admits evaluates the translation as Neutron's security groups do, both ends of the connection.
func admits(res Result, from, to netpol.Pod, port int32, proto corev1.Protocol) bool {
	src, dst := res.Pods[from.Key()], res.Pods[to.Key()]
	out := !src.EgressIsolated || anyRule(res, src.Groups, "egress", port, proto, func(r Rule) bool { return remoteIs(res, r, to) })
	in := !dst.IngressIsolated || anyRule(res, dst.Groups, "ingress", port, proto, func(r Rule) bool { return remoteIs(res, r, from) })
	return out && in
}

func anyRule(res Result, groups []string, dir string, port int32, proto corev1.Protocol, remote func(Rule) bool) bool {
	for _, g := range groups {
		for _, r := range res.Groups[g].Rules {
			if r.Direction != dir || (r.Protocol != "" && r.Protocol != strings.ToLower(string(proto))) {
				continue
			}
			if r.PortMin != 0 && (int(port) < r.PortMin || int(port) > r.PortMax) {
				continue
			}
			if remote(r) {
				return true
			}
		}
	}
	return false
}

// remoteIs says whether the rule's remote is the pod: a member of its remote group, or inside its prefix.
func remoteIs(res Result, r Rule, p netpol.Pod) bool {
	if r.RemoteGroup != "" {
		return slices.Contains(res.Pods[p.Key()].Groups, r.RemoteGroup)
	}
	pfx := netip.MustParsePrefix(r.RemoteIPPrefix)
	return pfx.Contains(netip.MustParseAddr(p.IP))
}

func TestIPv6BlocksAdmitNoPodAndBreakNothing(t *testing.T) {
	np := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "egress-anywhere"}, Spec: networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}, {IPBlock: &networkingv1.IPBlock{CIDR: "::/0"}},
		}}},
	}}
	res := Translate([]networkingv1.NetworkPolicy{np}, []Pod{{Namespace: "x", Name: "a"}}, []Namespace{{Name: "x"}})
	rules := res.Groups[KeyOf(&np)].Rules
	if len(rules) != 1 || rules[0].RemoteIPPrefix != "0.0.0.0/0" || len(res.Problems) != 0 {
		t.Fatalf("rules %+v, problems %v: want the IPv4 block alone (Raven's pods are IPv4; an IPv6 rule would make Neutron refuse the lot)", rules, res.Problems)
	}
}

func TestSecurityGroups(t *testing.T) {
	ids := map[string]string{BaseInfra: "infra", BaseIngress: "in", BaseEgress: "out", "np-1": "np1", "peer-1": "peer1"}
	cases := []struct {
		name        string
		m           Membership
		ids         map[string]string
		want        []string
		wantMissing []string
	}{
		{"an unisolated pod keeps the pod groups", Membership{}, ids, []string{"pods"}, nil},
		{"an unisolated peer joins its peer group", Membership{Groups: []string{"peer-1"}}, ids, []string{"peer1", "pods"}, nil},
		{"an unisolated peer does not wait for a peer group still being made", Membership{Groups: []string{"peer-1"}}, map[string]string{}, []string{"pods"}, nil},
		{"ingress isolation keeps egress open", Membership{IngressIsolated: true, Groups: []string{"np-1"}}, ids, []string{"infra", "np1", "out"}, nil},
		{"egress isolation keeps ingress open", Membership{EgressIsolated: true, Groups: []string{"np-1"}}, ids, []string{"in", "infra", "np1"}, nil},
		{"an isolated pod whose policy group is missing keeps the groups that exist, never the pod groups",
			Membership{IngressIsolated: true, Groups: []string{"np-2"}}, ids, []string{"infra", "out"}, []string{"np-2"}},
		{"an isolated pod without any of its groups has none",
			Membership{IngressIsolated: true, EgressIsolated: true, Groups: []string{"np-2", "peer-2"}}, map[string]string{}, nil, []string{BaseInfra, "np-2", "peer-2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, missing := SecurityGroups(tc.m, []string{"pods"}, tc.ids)
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(missing, tc.wantMissing) {
				t.Fatalf("SecurityGroups = %v, missing %v; want %v, missing %v", got, missing, tc.want, tc.wantMissing)
			}
		})
	}
}
