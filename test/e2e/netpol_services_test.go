//go:build e2e

package e2e

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/raven-net/raven/internal/openstack"
)

// path is one way from the client to the backend, TCP or UDP: its pod address, its Service's clusterIP or
// its external IP.
type path struct{ what, network, addr string }

// closedFor says whether every probe of a path fails for the whole of d (probed every 300 ms, 1 s each).
func closedFor(from string, p path, want string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		if probeWithin(from, p.network, p.addr, want, time.Second) {
			return false
		}
	}
	return true
}

// openWithin waits until a probe of the path is answered by want and returns how long that took.
func openWithin(t *testing.T, from string, p path, want string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !probeWithin(from, p.network, p.addr, want, time.Second) {
		if time.Since(start) > limit {
			fatalf(t, "%s (%s %s) from %s: still closed after %.0f s", p.what, p.network, p.addr, from, limit.Seconds())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start)
}

// A Service follows the client's egress policy as its backend does: an egress default-deny closes the
// backend through its pod address, its clusterIP and its external IP (a floating IP on the VIP), and an egress
// allow to the backend opens all three, while a client no policy selects keeps reaching it throughout.
func TestNetworkPolicyHoldsThroughServices(t *testing.T) {
	shared(t)
	needOVNProvider(t)
	ctx := context.Background()
	ns := newNamespace(t)
	pods := createServingPods(t, ns, "client", "bystander")
	createServingDeployment(t, ns, "web", 1)
	svc := createService(t, ns, "web", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "tcp", Port: 8080, Protocol: corev1.ProtocolTCP, TargetPort: intOrString(80)},
			{Name: "udp", Port: 8081, Protocol: corev1.ProtocolUDP, TargetPort: intOrString(80)},
		}
		s.Spec.ExternalIPs = []string{"172.24.4.62"}
	})
	backend := readyPods(t, ns, "web", 1)[0]
	bp, err := env.kube.CoreV1().Pods(ns).Get(ctx, backend, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// UDP matters most: a pod's egress rules are judged on a connection's first packet before the load
	// balancer's DNAT (at the address dialled) and on the later ones after it (at the backend), so a rule that
	// admitted the address dialled alone let every first datagram through, and its answer back.
	paths := []path{
		{"the backend's pod address", "tcp", net.JoinHostPort(bp.Status.PodIP, "80")},
		{"the clusterIP", "tcp", net.JoinHostPort(svc.Spec.ClusterIP, "8080")},
		{"the external IP", "tcp", "172.24.4.62:8080"},
		{"the backend's pod address", "udp", net.JoinHostPort(bp.Status.PodIP, "80")},
		{"the clusterIP", "udp", net.JoinHostPort(svc.Spec.ClusterIP, "8081")},
		{"the external IP", "udp", "172.24.4.62:8081"},
	}
	client, bystander := podNetns(ns, "client"), podNetns(ns, "bystander")
	for _, p := range paths {
		openWithin(t, client, p, backend, 2*time.Minute)
	}

	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "client-egress-deny"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
	}}
	if _, err := env.kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deny is in force once the pod address stays refused for a while (one refused probe is also what a
	// lost SYN looks like); from then on, every path stays refused.
	eventually(t, time.Minute, "the egress deny to close the backend's pod address", func() (bool, error) {
		return closedFor(client, paths[0], backend, 3*time.Second), nil
	})
	for _, p := range paths {
		if !closedFor(client, p, backend, 5*time.Second) {
			dumpPortGroups(t, "client", pods["client"].ID)
			dumpServicePath(t, false)
			fatalf(t, "egress default-deny: the client still reaches the backend through %s (%s %s)", p.what, p.network, p.addr)
		}
	}
	for _, p := range paths {
		openWithin(t, bystander, p, backend, 10*time.Second)
	}

	port, udp := intstr.FromInt32(80), corev1.ProtocolUDP
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "client-egress-to-web"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}, {Port: &port, Protocol: &udp}},
		}},
	}}
	created := time.Now()
	if _, err := env.kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, allow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		openWithin(t, client, p, backend, time.Minute)
		t.Logf("egress allow to the backend: %s (%s) open %.1f s after the policy was created", p.what, p.network, time.Since(created).Seconds())
	}
	// The allow admits the backend's port 80 only: the client still reaches no other pod.
	bys, err := env.kube.CoreV1().Pods(ns).Get(ctx, "bystander", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !closedFor(client, path{"another pod", "tcp", net.JoinHostPort(bys.Status.PodIP, "80")}, "bystander", 3*time.Second) {
		dumpPortGroups(t, "client", pods["client"].ID)
		fatalf(t, "the egress allow to app=web let the client reach another pod")
	}
}

// dumpPortGroups logs the security groups a pod's port carries in Neutron, with their rules.
func dumpPortGroups(t testing.TB, pod, portID string) {
	t.Helper()
	ctx := context.Background()
	p, err := env.os.Networking.GetPort(ctx, portID)
	if err != nil {
		t.Logf("port %s of %s: %v", portID, pod, err)
		return
	}
	t.Logf("port %s of %s: security groups %v", p.ID, pod, p.SecurityGroups)
	sgs, err := env.os.Networking.ListSecurityGroups(ctx, openstack.Filter{})
	if err != nil {
		t.Logf("security groups: %v", err)
		return
	}
	for _, sg := range sgs {
		if !slices.Contains(p.SecurityGroups, sg.ID) {
			continue
		}
		t.Logf("  group %s %s (%s): %d rules", sg.ID, sg.Name, sg.Description, len(sg.Rules))
		for _, r := range sg.Rules {
			t.Logf("    %s %s %s %d-%d remote ip %q group %q", r.Direction, r.EtherType, r.Protocol, r.PortRangeMin, r.PortRangeMax, r.RemoteIPPrefix, r.RemoteGroupID)
		}
	}
}

// A policy change does not drop the traffic it does not concern: a UDP flow between two pods no policy
// selects keeps every answer while a policy isolating a third pod of their namespace is created (the cluster's
// first: base groups, spares) and deleted.
func TestAPolicyChangeKeepsTrafficItDoesNotConcern(t *testing.T) {
	shared(t)
	needDatapath(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ports := createServingPods(t, ns, "a", "b", "c")
	addr := net.JoinHostPort(ports["b"].FixedIPs[0].IPAddress, "80")
	expectAnswer(t, podNetns(ns, "a"), "udp", addr, "b")
	// a → b exchanges one datagram at a time, without pause, on one source port (one conntrack entry for the
	// whole test), until the policy has come and gone.
	flow := startTraffic(t, podNetns(ns, "a"), addr, "b", false)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "isolate-c"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "c"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
	}}
	if _, err := env.kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cAddr := net.JoinHostPort(ports["c"].FixedIPs[0].IPAddress, "80")
	eventually(t, time.Minute, "c isolated", func() (bool, error) {
		return closedFor(podNetns(ns, "a"), path{"c", "tcp", cAddr}, "c", 3*time.Second), nil
	})
	if err := env.kube.NetworkingV1().NetworkPolicies(ns).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "c open again", func() (bool, error) {
		return probe(podNetns(ns, "a"), "tcp", cAddr, "c"), nil
	})
	r := flow.stop()
	t.Logf("%d datagrams of a → b across the policy's creation and deletion, %d unanswered", r.sent, r.lost)
	if r.lost > 0 {
		t.Fatalf("%d of %d datagrams between two pods no policy selects went unanswered across a policy change that concerns neither", r.lost, r.sent)
	}
}

// traffic is a UDP flow on one socket from one pod to another and, when asked for, a stream of new TCP
// connections beside it.
type traffic struct {
	halt chan struct{}
	done sync.WaitGroup
	r    trafficResult
}

type trafficResult struct {
	sent, lost, tried, failed int
	longest                   time.Duration
}

// startTraffic starts, until stop, datagrams exchanged one at a time without pause on one socket (one conntrack
// entry) and, with tcp, a TCP probe every 100 ms; each is to be answered by want (a connection not answered
// within 0.5 s failed).
func startTraffic(t *testing.T, from, addr, want string, tcp bool) *traffic {
	t.Helper()
	var conn net.Conn
	if err := inNetns(from, func() error {
		var err error
		conn, err = net.Dial("udp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tr := &traffic{halt: make(chan struct{})}
	tr.done.Add(1)
	go tr.exchange(conn, want)
	if tcp {
		tr.done.Add(1)
		go tr.connect(from, addr, want)
	}
	return tr
}

// exchange counts the datagrams sent on conn and those not answered by want within a second.
func (tr *traffic) exchange(conn net.Conn, want string) {
	defer tr.done.Done()
	defer func() { _ = conn.Close() }()
	buf := make([]byte, 64)
	for !tr.halted() {
		tr.r.sent++
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte("hello\n")); err != nil {
			tr.r.lost++
			continue
		}
		if n, err := conn.Read(buf); err != nil || strings.TrimSpace(string(buf[:n])) != want {
			tr.r.lost++
		}
	}
}

// connect counts the new TCP connections tried and failed, and the longest stretch from a failed one's start
// to the next that was answered.
func (tr *traffic) connect(from, addr, want string) {
	defer tr.done.Done()
	var failingSince time.Time
	for ; !tr.halted(); time.Sleep(100 * time.Millisecond) {
		tr.r.tried++
		now := time.Now()
		if probeWithin(from, "tcp", addr, want, 500*time.Millisecond) {
			if !failingSince.IsZero() {
				tr.r.longest = max(tr.r.longest, now.Sub(failingSince))
			}
			failingSince = time.Time{}
			continue
		}
		tr.r.failed++
		if failingSince.IsZero() {
			failingSince = now
		}
	}
	if !failingSince.IsZero() {
		tr.r.longest = max(tr.r.longest, time.Since(failingSince))
	}
}

func (tr *traffic) halted() bool {
	select {
	case <-tr.halt:
		return true
	default:
		return false
	}
}

// stop ends the traffic and returns what it counted.
func (tr *traffic) stop() trafficResult {
	close(tr.halt)
	tr.done.Wait()
	return tr.r
}
