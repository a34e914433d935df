//go:build e2e && bench

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/internal/policy"
)

var (
	benchNPRounds = flag.Int("bench.np-rounds", 10, "rounds of each NetworkPolicy latency measure")
	benchNPSizes  = flag.String("bench.np-sizes", "10,100,200,300", "selected pods at which the NetworkPolicy benchmark counts Neutron rules (one namespace; the benchmark gives namespaces a /23)")
	benchNPProbe  = flag.Duration("bench.np-probe-timeout", 200*time.Millisecond, "how long one probe connection may take: a dropped one costs this much, so it is the resolution of the latency figures")
	benchNPOut    = flag.String("bench.np-out", "bench/results/netpol", "where the NetworkPolicy benchmark writes latest.json and latest.md")
)

// TestBenchmarkNetworkPolicy measures, with connections between pods' network namespaces: a security group
// rule added by hand → a client gets through (the floor) and removed → refused; a NetworkPolicy created →
// the client gets through, and deleted → refused; a pod labelled into a policy's peers → it gets through.
// Then the Neutron rules of one policy as the pods it selects and admits grow.
func TestBenchmarkNetworkPolicy(t *testing.T) {
	needDatapath(t)
	ctx := context.Background()
	res := map[string]any{}
	put := func(k string, v float64) { res[k] = float64(int64(v*100)) / 100 }
	res["stack"] = "ML2/OVN Neutron, node side on (STACK_CNI=1), userspace datapath"
	putRun(res)
	res["rounds"] = *benchNPRounds
	res["probe_timeout_ms"] = benchNPProbe.Milliseconds()
	res["raven.pod_subnet_prefix_length"] = 23
	startRaven(t, benchRaven(ravenOpts{config: prefix23Config(t)}))

	ns := benchNamespace(t, "bench-np")
	createServingPods(t, ns, "server", "client")
	patchLabels(t, ns, "client", map[string]any{"role": "client"})
	server := waitPodReady(t, ns, "server", time.Minute)
	addr := net.JoinHostPort(server.Status.PodIP, "80")
	client := podNetns(ns, "client")
	// A refused connection costs the probe its whole timeout: the timeout is the measurement's resolution.
	through := func() bool { return probeWithin(client, "tcp", addr, "server", *benchNPProbe) }

	// ---- floor: a hand-made group on the server's port, a rule added and removed by hand.
	floorAdd, floorDel := floorRules(t, ns, through)

	// ---- Raven: the server isolated by a deny-all policy; a policy admitting the clients created, deleted.
	nps := env.kube.NetworkingV1().NetworkPolicies(ns)
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}}
	if _, err := nps.Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, through, false, time.Now())
	// Rounds start once Raven has its spare groups: the first policy of a cluster makes them after its own.
	waitSpareGroups(t, 4)
	tcp := corev1.ProtocolTCP
	p80 := intstr.FromInt32(80)
	allow := func() *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-clients"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p80}},
			}}}}
	}
	// Each round starts from the deny policy's state: the server's port carries exactly the groups it has now
	// (a probe can fail for a moment while OVN applies a change, so refusals alone do not say the last deletion
	// is in place).
	_, serverPort := portAnnotation(t, ns, "server")
	denied := portGroups(t, serverPort.ID)
	var created, deleted []float64
	for range *benchNPRounds {
		eventually(t, time.Minute, "the server's port back to the deny policy's groups", func() (bool, error) {
			return slices.Equal(portGroups(t, serverPort.ID), denied), nil
		})
		waitProbe(t, through, false, time.Now())
		start := time.Now()
		if _, err := nps.Create(ctx, allow(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		created = append(created, float64(waitProbe(t, through, true, start))/float64(time.Millisecond))
		start = time.Now()
		if err := nps.Delete(ctx, "allow-clients", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, float64(waitProbe(t, through, false, start))/float64(time.Millisecond))
	}

	// ---- a pod labelled into the policy's peers.
	if _, err := nps.Create(ctx, allow(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, through, true, time.Now())
	var labelled []float64
	for range *benchNPRounds {
		patchLabels(t, ns, "client", map[string]any{"role": nil})
		waitProbe(t, through, false, time.Now())
		start := time.Now()
		patchLabels(t, ns, "client", map[string]any{"role": "client"})
		labelled = append(labelled, float64(waitProbe(t, through, true, start))/float64(time.Millisecond))
	}
	for name, ms := range map[string][]float64{"floor.rule_added_to_through_ms": floorAdd, "floor.rule_removed_to_refused_ms": floorDel,
		"raven.policy_created_to_through_ms": created, "raven.policy_deleted_to_refused_ms": deleted, "raven.pod_labelled_to_through_ms": labelled} {
		s := summarize(ms)
		put(name+"_p50", s.p50)
		put(name+"_max", s.max)
	}
	fa, pc := summarize(floorAdd), summarize(created)
	put("target.policy_created_p99_minus_floor_p99_ms", pc.max-fa.max) // with rounds ≤ 100, p99 is the maximum
	t.Logf("floor: rule added → through p50 %.0f ms, max %.0f ms; Raven: policy created → through p50 %.0f ms, max %.0f ms; pod labelled → through max %.0f ms",
		fa.p50, fa.max, pc.p50, pc.max, summarize(labelled).max)

	// The latency figures (and every round's) are written now, so that they survive a failure of the growth phase.
	series := map[string][]float64{"floor_rule_added_ms": floorAdd, "floor_rule_removed_ms": floorDel,
		"policy_created_ms": created, "policy_deleted_ms": deleted, "pod_labelled_ms": labelled}
	// Every round's figure, in the order measured, beside the summaries.
	rounds := map[string][]int64{}
	for k, v := range series {
		for _, ms := range v {
			rounds[k] = append(rounds[k], int64(ms))
		}
	}
	res["rounds_ms"] = rounds
	writeResultsTo(t, outDir(*benchNPOut), res, series)

	// ---- Neutron rules of one policy as the pods it selects and admits grow.
	rulesGrowth(t, put)
	writeResultsTo(t, outDir(*benchNPOut), res, series)
}

// floorRules puts a hand-made group alone on the server's port and adds and removes a rule admitting TCP 80
// by hand, rounds times: rule added → the client gets through, removed → refused, in ms. No policy exists,
// so Raven leaves the port's groups alone; they are restored after.
func floorRules(t *testing.T, ns string, through func() bool) (added, removed []float64) {
	t.Helper()
	ctx := context.Background()
	_, ann := portAnnotation(t, ns, "server")
	port, err := env.os.Networking.GetPort(ctx, ann.ID)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := env.os.Networking.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "bench-floor-" + randSuffix()})
	if err != nil {
		t.Fatal(err)
	}
	only := []string{sg.ID}
	if _, err := env.os.Networking.UpdatePort(ctx, port.ID, openstack.PortUpdate{SecurityGroups: &only}); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, through, false, time.Now())
	for range *benchNPRounds {
		start := time.Now()
		r, err := env.os.Networking.CreateSecurityGroupRule(ctx, openstack.SecurityGroupRule{SecurityGroupID: sg.ID, Direction: "ingress", EtherType: "IPv4",
			Protocol: "tcp", PortRangeMin: 80, PortRangeMax: 80, RemoteIPPrefix: "0.0.0.0/0"})
		if err != nil {
			t.Fatal(err)
		}
		added = append(added, float64(waitProbe(t, through, true, start))/float64(time.Millisecond))
		start = time.Now()
		if err := env.os.Networking.DeleteSecurityGroupRule(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		removed = append(removed, float64(waitProbe(t, through, false, start))/float64(time.Millisecond))
	}
	orig := port.SecurityGroups
	if _, err := env.os.Networking.UpdatePort(ctx, port.ID, openstack.PortUpdate{SecurityGroups: &orig}); err != nil {
		t.Fatal(err)
	}
	_ = env.os.Networking.DeleteSecurityGroup(ctx, sg.ID)
	waitProbe(t, through, true, time.Now())
	return added, removed
}

// rulesGrowth counts the Neutron rules of one policy whose pods admit each other, as they grow to each of
// -bench.np-sizes. The pods get ports but run nowhere (their node does not exist): only the groups count.
func rulesGrowth(t *testing.T, put func(string, float64)) {
	t.Helper()
	ctx := context.Background()
	grow := benchNamespace(t, "bench-np-rules")
	tcp := corev1.ProtocolTCP
	p80 := intstr.FromInt32(80)
	member := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "members"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "member"}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "member"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p80}},
		}}}}
	created, err := env.kube.NetworkingV1().NetworkPolicies(grow).Create(ctx, member, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The pods only need their ports: they are bound to a node that no kubelet runs (300 pods are more than a
	// node of the stack runs).
	hollowNode(t, "bench-nowhere")
	have := 0
	for _, f := range strings.Split(*benchNPSizes, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil {
			t.Fatal(err)
		}
		for ; have < n; have++ {
			p := podSpec(fmt.Sprintf("m%d", have))
			p.Labels = map[string]string{"role": "member"}
			p.Spec.NodeName = "bench-nowhere"
			if _, err := env.kube.CoreV1().Pods(grow).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		rules := waitPolicyMembers(t, grow, string(created.UID), n)
		put(fmt.Sprintf("rules.policy_rules_at_%d_pods", n), float64(rules))
		t.Logf("%d selected pods, all members of the policy's peer group: the policy's group has %d rule(s)", n, rules)
	}
}

// prefix23Config is the stack's Raven configuration with a /23 for each namespace: 300 pods do not fit one
// namespace's /24 (Neutron answers AddressesExhausted).
func prefix23Config(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(env.vars["RAVEN_CONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), "podSubnetPrefixLength: 24", "podSubnetPrefixLength: 23", 1)
	if cfg == string(raw) {
		t.Fatalf("%s has no podSubnetPrefixLength: 24 to widen", env.vars["RAVEN_CONFIG"])
	}
	p := filepath.Join(t.TempDir(), "raven.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// refusedStreak is how many probes in a row must fail before the path counts as refused: a probe may fail on
// a slow connection while the path is open, and a round that began on such a failure would start open.
const refusedStreak = 3

// waitProbe probes until through() is want, and returns how long after since that came: at the end of the
// first success, or of the first failure of refusedStreak failures in a row.
func waitProbe(t testing.TB, through func() bool, want bool, since time.Time) time.Duration {
	t.Helper()
	need := 1
	if !want {
		need = refusedStreak
	}
	start := time.Now()
	var first time.Duration
	streak := 0
	for time.Since(start) < 2*time.Minute {
		if through() != want {
			streak = 0
			continue
		}
		if streak == 0 {
			first = time.Since(since)
		}
		if streak++; streak >= need {
			return first
		}
	}
	t.Fatalf("the probe did not turn %v within 2 minutes", want)
	return 0
}

// portGroups are the sorted security groups of a port.
func portGroups(t testing.TB, id string) []string {
	t.Helper()
	p, err := env.os.Networking.GetPort(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(slices.Values(p.SecurityGroups))
}

// waitSpareGroups waits until Neutron lists n empty spare policy groups of the cluster.
func waitSpareGroups(t testing.TB, n int) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("%d spare policy groups", n), func() (bool, error) {
		groups, err := env.os.Networking.ListSecurityGroups(context.Background(), openstack.Filter{Tags: ownership.Selector(env.cluster, ownership.KindPolicy)})
		if err != nil {
			return false, err
		}
		spares := 0
		for _, g := range groups {
			if o, _ := ownership.Parse(g.Tags); policy.IsSpare(o.UID) && len(g.Rules) == 0 {
				spares++
			}
		}
		return spares >= n, nil
	})
}

// waitPolicyMembers waits until n pods of ns have ports that carry the group of the policy whose UID is uid and
// a peer group (the pods admit each other), and returns the number of rules of the policy's group. Other
// policies' groups (the latency phase's, in its own namespace) are told apart by the UID.
func waitPolicyMembers(t testing.TB, ns, uid string, n int) int {
	t.Helper()
	ctx := context.Background()
	rules := 0
	eventually(t, 15*time.Minute, fmt.Sprintf("%d pods in their policy's groups", n), func() (bool, error) {
		groups, err := env.os.Networking.ListSecurityGroups(ctx, openstack.Filter{Tags: ownership.Selector(env.cluster, ownership.KindPolicy)})
		if err != nil {
			return false, err
		}
		var np string
		peers := map[string]bool{}
		for _, g := range groups {
			o, _ := ownership.Parse(g.Tags)
			switch {
			case strings.HasPrefix(o.UID, "np-") && strings.Contains(o.UID, uid):
				np, rules = g.ID, len(g.Rules)
			case strings.HasPrefix(o.UID, "peer-"):
				peers[g.ID] = true
			}
		}
		ports, err := env.os.Networking.ListPorts(ctx, openstack.Filter{Tags: ownership.Selector(env.cluster, ownership.KindPod)})
		if err != nil {
			return false, err
		}
		groupsOf := map[string][]string{}
		for _, p := range ports {
			groupsOf[p.ID] = p.SecurityGroups
		}
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		in := 0
		for _, p := range pods.Items {
			var a struct {
				ID string `json:"id"`
			}
			if json.Unmarshal([]byte(p.Annotations["kuryr.org/neutron-port"]), &a) != nil {
				continue
			}
			gs := groupsOf[a.ID]
			if np != "" && slices.Contains(gs, np) && slices.ContainsFunc(gs, func(g string) bool { return peers[g] }) {
				in++
			}
		}
		return in == n, nil
	})
	return rules
}
