package netpol

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// testIP is 10.244.<namespace index>.<pod index + 10>.
func testIP(ns, pod string) string {
	return fmt.Sprintf("10.244.%d.%d", slices.Index(NamespaceNames, ns), slices.Index(PodNames, pod)+10)
}

func scenario(t *testing.T, name string) Scenario {
	t.Helper()
	for _, s := range Scenarios() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return Scenario{}
}

type pair struct {
	from, to string
	want     bool
}

const (
	yes = true
	no  = false
)

func TestScenarios(t *testing.T) {
	// The destination y/b declares serve-80-tcp on port 81 and the client x/a
	// declares no ports at all: named ports must be resolved on the destination.
	renamedOnDestination := func(c *Cluster) {
		for i := range c.Pods {
			switch c.Pods[i].Key() {
			case "x/a":
				c.Pods[i].Ports = nil
			case "y/b":
				c.Pods[i].Ports = []ContainerPort{{Name: "serve-80-tcp", Port: 81, Protocol: corev1.ProtocolTCP}}
			}
		}
	}
	tests := []struct {
		scenario string
		mutate   func(*Cluster)
		pairs    []pair
	}{
		{"upstream: should support a 'default-deny-ingress' policy [TCP/80]", nil, []pair{
			{"y/a", "x/b", no}, {"x/a", "x/b", no}, {"x/a", "y/b", yes}, {"y/a", "y/b", yes},
		}},
		{"upstream: should support a 'default-deny-all' policy [TCP/80]", nil, []pair{
			{"x/a", "y/a", no}, {"y/a", "x/a", no}, {"y/a", "z/a", yes},
		}},
		{"upstream: should deny egress from all pods in a namespace [TCP/80]", nil, []pair{
			{"x/a", "y/a", no}, {"x/a", "x/b", no}, {"y/a", "x/a", yes}, {"z/c", "y/b", yes},
		}},
		// A pod selected only by an Ingress policy keeps its egress free.
		{"upstream: should enforce policy to allow traffic from pods within server namespace based on PodSelector [TCP/80]", nil, []pair{
			{"x/a", "y/a", yes}, {"x/a", "x/c", yes}, {"x/b", "x/a", yes}, {"x/c", "x/a", no}, {"y/b", "x/a", no},
		}},
		{"upstream: should enforce policy based on PodSelector and NamespaceSelector [TCP/80]", nil, []pair{
			{"y/b", "x/a", yes}, {"z/b", "x/a", yes}, {"x/b", "x/a", no}, {"y/a", "x/a", no},
		}},
		{"upstream: should enforce policy based on PodSelector or NamespaceSelector [TCP/80]", nil, []pair{
			{"x/b", "x/a", yes}, {"y/a", "x/a", yes}, {"z/c", "x/a", yes}, {"x/c", "x/a", no},
		}},
		{"upstream: should enforce except clause while egress access to server in CIDR block [TCP/80]", nil, []pair{
			{"x/a", "x/b", no}, {"x/a", "x/c", yes}, {"x/a", "z/a", yes}, {"x/b", "x/b", yes},
		}},
		{"local: egress ipBlock with two excepts [TCP/80]", nil, []pair{
			{"x/a", "x/b", no}, {"x/a", "y/c", no}, {"x/a", "y/a", yes}, {"x/a", "z/c", yes},
			{"x/a", "x/c", yes}, {"x/b", "y/c", yes},
		}},
		{"local: ingress ipBlock with three excepts [TCP/80]", nil, []pair{
			{"x/c", "x/a", no}, {"y/a", "x/a", no}, {"z/b", "x/a", no},
			{"y/b", "x/a", yes}, {"z/c", "x/a", yes}, {"x/c", "x/b", yes},
		}},
		{"upstream: should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed [TCP/80]", nil, []pair{
			{"x/a", "x/b", yes}, {"x/a", "z/c", yes},
		}},
		{"local: namespaceSelector In matching two namespaces [TCP/80]", nil, []pair{
			{"y/a", "x/a", yes}, {"z/c", "x/a", yes}, {"x/b", "x/a", no}, {"y/a", "x/b", yes},
		}},
		{"local: namespaceSelector matchLabels matching two namespaces [TCP/80]", nil, []pair{
			{"y/b", "x/a", yes}, {"z/a", "x/a", yes}, {"x/c", "x/a", no},
		}},
		{"upstream: should allow egress access on one named port [TCP/80]", renamedOnDestination, []pair{
			{"x/a", "y/a", yes}, {"x/a", "y/b", no}, {"x/b", "y/b", no},
		}},
		{"upstream: should allow egress access on one named port [TCP/81]", renamedOnDestination, []pair{
			{"x/a", "y/b", yes}, {"x/a", "y/a", no}, {"x/a", "x/c", no}, {"y/a", "x/a", yes},
		}},
		{"upstream: should allow ingress access on one named port [TCP/81]", nil, []pair{
			{"y/a", "x/b", yes}, {"x/a", "x/b", yes},
		}},
		{"upstream: should allow ingress access on one named port [TCP/80]", nil, []pair{
			{"y/a", "x/b", no}, {"x/a", "y/a", yes},
		}},
		{"local: ingress named UDP port [UDP/81]", nil, []pair{
			{"y/a", "x/a", yes}, {"x/b", "x/a", yes},
		}},
		{"local: ingress named UDP port [TCP/81]", nil, []pair{
			{"y/a", "x/a", no}, {"y/a", "x/b", yes},
		}},
		// http is 80 on pods a, 81 on pods b, and pods c do not name it.
		{"local: ingress on a named port the selected pods number differently [TCP/80]", nil, []pair{
			{"y/a", "x/a", yes}, {"y/a", "x/b", no}, {"y/a", "x/c", no}, {"x/a", "y/b", yes},
		}},
		{"local: ingress on a named port the selected pods number differently [TCP/81]", nil, []pair{
			{"y/a", "x/a", no}, {"y/a", "x/b", yes}, {"z/c", "x/c", no},
		}},
		{"local: ingress from a namespace on a named port and a numbered one [TCP/80]", nil, []pair{
			{"y/b", "x/a", yes}, {"z/a", "x/a", no}, {"y/b", "x/b", no}, {"y/c", "x/c", no},
		}},
		{"local: ingress from a namespace on a named port and a numbered one [TCP/81]", nil, []pair{
			{"y/b", "x/b", yes}, {"y/b", "x/a", no}, {"x/a", "x/b", no},
		}},
		{"local: ingress from a namespace on a named port and a numbered one [UDP/81]", nil, []pair{
			{"y/c", "x/c", yes}, {"z/a", "x/c", no},
		}},
		{"local: ingress from an ipBlock on a named port [TCP/80]", nil, []pair{
			{"z/b", "x/a", yes}, {"y/a", "x/a", no}, {"z/b", "x/b", no},
		}},
		{"local: ingress from an ipBlock on a named port [TCP/81]", nil, []pair{
			{"z/b", "x/b", yes}, {"y/a", "x/b", no}, {"x/c", "x/a", no}, {"y/b", "x/c", no},
		}},
		{"local: egress to a namespace on a named port [TCP/80]", nil, []pair{
			{"x/a", "y/a", yes}, {"x/a", "y/b", no}, {"x/c", "y/c", no}, {"x/a", "z/a", no}, {"y/a", "x/b", yes},
		}},
		{"local: egress to a namespace on a named port [TCP/81]", nil, []pair{
			{"x/b", "y/b", yes}, {"x/b", "y/a", no}, {"x/c", "z/b", no},
		}},
		{"local: egress anywhere on a named port [TCP/80]", nil, []pair{
			{"x/a", "z/a", yes}, {"x/a", "x/b", no}, {"x/a", "y/c", no}, {"x/b", "y/c", yes},
		}},
		{"local: egress anywhere on a named port [TCP/81]", nil, []pair{
			{"x/a", "y/b", yes}, {"x/a", "y/a", no}, {"x/a", "z/c", no},
		}},
		{"local: egress to an ipBlock on a named port [TCP/80]", nil, []pair{
			{"x/b", "z/a", yes}, {"x/b", "y/b", no}, {"x/b", "x/c", no},
		}},
		{"local: egress to an ipBlock on a named port [TCP/81]", nil, []pair{
			{"x/b", "z/b", yes}, {"x/b", "y/b", no}, {"x/b", "y/a", no}, {"x/a", "y/b", yes},
		}},
		{"local: ingress endPort range 80-81 [TCP/81]", nil, []pair{
			{"y/a", "x/a", yes}, {"x/b", "x/a", yes},
		}},
		{"local: ingress endPort range 80-81 [UDP/81]", nil, []pair{
			{"y/a", "x/a", no}, {"y/a", "x/b", yes},
		}},
		{"local: egress endPort range 79-80 excludes 81 [TCP/81]", nil, []pair{
			{"x/a", "y/a", no}, {"x/a", "x/b", no}, {"y/a", "x/a", yes},
		}},
		{"local: egress endPort range 79-80 excludes 81 [TCP/80]", nil, []pair{
			{"x/a", "y/a", yes},
		}},
		{"local: empty policyTypes with egress rules implies Egress and Ingress [TCP/80]", nil, []pair{
			{"x/a", "y/b", yes}, {"x/a", "z/a", no}, {"x/a", "x/b", no},
			{"y/a", "x/a", no}, {"x/b", "x/a", no}, {"y/a", "x/b", yes},
		}},
		{"local: egress allowed for TCP only, UDP denied [TCP/80]", nil, []pair{
			{"x/a", "y/a", yes},
		}},
		{"local: egress allowed for TCP only, UDP denied [UDP/80]", nil, []pair{
			{"x/a", "y/a", no}, {"y/a", "x/a", yes},
		}},
		{"local: multiple policies selecting the same pod are a union [TCP/80]", nil, []pair{
			{"y/a", "x/a", yes}, {"z/a", "x/a", yes}, {"z/a", "x/b", yes},
			{"y/a", "x/b", no}, {"x/c", "x/a", no}, {"y/a", "x/c", yes},
		}},
		{"upstream: should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP [TCP/81]", nil, []pair{
			{"y/a", "x/a", no}, {"y/a", "x/b", no}, {"x/a", "y/a", yes},
		}},
		{"upstream SCTP: should enforce policy based on Ports [SCTP/81]", nil, []pair{
			{"y/a", "x/a", yes}, {"z/a", "x/a", no},
		}},
		{"upstream SCTP: should enforce policy based on Ports [SCTP/80]", nil, []pair{
			{"y/a", "x/a", no}, {"y/a", "x/b", yes},
		}},
		{"upstream: should support denying of egress traffic on the client side (even if the server explicitly allows this traffic) [TCP/80]", nil, []pair{
			{"x/a", "y/a", yes}, {"x/a", "y/b", no}, {"x/b", "y/a", no}, {"x/a", "z/a", no}, {"y/a", "y/c", yes},
		}},
		{"upstream: should enforce multiple, stacked policies with overlapping podSelectors [TCP/80]", nil, []pair{
			{"y/c", "x/a", yes}, {"z/a", "x/a", no},
		}},
		{"upstream: should enforce policy based on Ports [TCP/80]", nil, []pair{
			{"y/c", "x/a", no}, {"y/c", "x/b", yes},
		}},
		{"upstream: should work with Ingress, Egress specified together [TCP/81]", nil, []pair{
			{"x/b", "x/a", yes}, {"x/a", "x/b", no}, {"x/a", "y/a", no},
		}},
		{"upstream: should work with Ingress, Egress specified together [TCP/80]", nil, []pair{
			{"x/a", "y/a", yes}, {"x/c", "x/a", no},
		}},
		{"upstream: should allow ingress access from updated pod [TCP/80]", nil, []pair{
			{"x/b", "x/a", yes}, {"x/c", "x/a", no},
		}},
		{"upstream: should enforce updated policy [TCP/81]", nil, []pair{
			{"y/a", "x/a", no}, {"x/a", "y/a", yes},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			s := scenario(t, tt.scenario)
			c := DefaultCluster(testIP)
			if tt.mutate != nil {
				tt.mutate(&c)
			}
			got := s.Expected(c)
			for _, p := range tt.pairs {
				if got[p.from][p.to] != p.want {
					t.Errorf("%s -> %s = %v, want %v\n%s", p.from, p.to, got[p.from][p.to], p.want, got)
				}
			}
		})
	}
}

func TestPolicySelectingNoPodsHasNoEffect(t *testing.T) {
	s := scenario(t, "local: a policy selecting no pods has no effect [TCP/80]")
	c := DefaultCluster(testIP)
	if d := Diff(Matrix(c, nil, 80, corev1.ProtocolTCP), s.Expected(c)); len(d) != 0 {
		t.Errorf("differs from no policy at all: %v", d)
	}
}

func TestIPv6Cluster(t *testing.T) {
	c := DefaultCluster(func(ns, pod string) string {
		return fmt.Sprintf("fd00:10:244:%d::%d", slices.Index(NamespaceNames, ns), slices.Index(PodNames, pod)+10)
	})
	v4 := scenario(t, "local: egress ipBlock with two excepts [TCP/80]").Expected(DefaultCluster(testIP))
	v6 := scenario(t, "local: egress ipBlock with two excepts [TCP/80]").Expected(c)
	if d := Diff(v4, v6); len(d) != 0 {
		t.Errorf("IPv6 differs from IPv4: %v", d)
	}
}

func TestScenarioList(t *testing.T) {
	all := Scenarios()
	bases := map[string]bool{}
	names := map[string]bool{}
	c := DefaultCluster(testIP)
	for _, s := range all {
		if names[s.Name] {
			t.Errorf("duplicate scenario %q", s.Name)
		}
		names[s.Name] = true
		bases[s.Name[:strings.LastIndex(s.Name, " [")]] = true
		if s.Protocol == corev1.ProtocolSCTP && !s.ModelOnly {
			t.Errorf("%q: SCTP scenarios must be model only", s.Name)
		}
		for _, p := range s.Policies(s.Apply(c)) {
			if p.Namespace == "" || p.Name == "" {
				t.Errorf("%q: policy without namespace or name", s.Name)
			}
		}
	}
	if len(bases) < 25 {
		t.Errorf("%d scenarios, want at least 25", len(bases))
	}
}

func TestApplyCopies(t *testing.T) {
	c := DefaultCluster(testIP)
	s := scenario(t, "upstream: should deny ingress access to updated pod [TCP/80]")
	got := s.Apply(c)
	if p, _ := got.Pod("x/a"); p.Labels["target"] != "isolated" {
		t.Errorf("label not applied: %v", p.Labels)
	}
	if p, _ := c.Pod("x/a"); p.Labels["target"] != "" {
		t.Errorf("original cluster modified: %v", p.Labels)
	}
}

func TestTable(t *testing.T) {
	c := Cluster{Pods: []Pod{{Namespace: "x", Name: "a", IP: "10.244.0.10"}, {Namespace: "x", Name: "b", IP: "10.244.0.11"}}}
	deny := []networkingv1.NetworkPolicy{np("x", "deny", spec{PodSelector: sel("pod", "none")})}
	want := Matrix(c, deny, 80, corev1.ProtocolTCP)
	if got, exp := want.String(), "-   x/a x/b\nx/a .   .\nx/b .   .\n"; got != exp {
		t.Errorf("String() =\n%s\nwant\n%s", got, exp)
	}
	got := Table{}
	got.Set("x/a", "x/a", true)
	got.Set("x/a", "x/b", false)
	got.Set("x/b", "x/a", true)
	d := Diff(want, got)
	if len(d) != 2 || d[0] != (Pair{"x/a", "x/b", true, false}) || d[1] != (Pair{"x/b", "x/b", true, false}) || !d[1].Loopback() {
		t.Errorf("Diff = %v", d)
	}
	if sbs := SideBySide(want, got); !strings.Contains(sbs, "expected") || strings.Count(sbs, "\n") != 4 {
		t.Errorf("SideBySide =\n%s", sbs)
	}
}
