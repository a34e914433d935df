//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/openstack"
)

// The traffic tests prove Services with packets: Octavia's OVN provider programs OVN load balancers, and every
// claim is a TCP or UDP exchange through a clusterIP or a floating IP, counted by the backends' answers.

// needOVNProvider fails a test when the stack's Octavia balances nothing (the amphora provider with noop drivers).
func needOVNProvider(t testing.TB) {
	t.Helper()
	needDatapath(t)
	if env.vars["STACK_LB_PROVIDER"] != "ovn" {
		t.Fatalf("the stack's Octavia runs the %q provider: Service traffic needs the ovn provider (STACK_LB_PROVIDER=ovn)", env.vars["STACK_LB_PROVIDER"])
	}
}

// createServingDeployment is a Deployment whose pods answer on TCP and UDP port 80 with their names.
func createServingDeployment(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	spec := servingPod("").Spec
	switchableReadiness(&spec)
	deploy(t, ns, name, replicas, spec)
}

// readyPods waits until the Deployment name has exactly n Ready pods (none terminating) and returns their names.
func readyPods(t testing.TB, ns, name string, n int) []string {
	t.Helper()
	var names []string
	eventually(t, 3*time.Minute, fmt.Sprintf("%d ready pods of %s/%s", n, ns, name), func() (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		names = names[:0]
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
			if podReady(&p) {
				names = append(names, p.Name)
			}
		}
		return len(names) == n && len(pods.Items) == n, nil
	})
	slices.Sort(names)
	return names
}

// answers makes up to n fresh connections (new source ports: OVN hashes the 5-tuple) from the namespace from
// to addr and counts the answers. A failed exchange ends the round, counted under "error: …".
func answers(from, network, addr string, n int) map[string]int {
	out := map[string]int{}
	for range n {
		got, err := exchange(from, network, addr)
		if err != nil {
			out["error: "+err.Error()]++
			break
		}
		out[got]++
	}
	return out
}

// waitServedBy waits until a round of connections from from to addr is answered by exactly the backends
// want, each at least once, and by nothing else (no error, no other backend), and says how long it took.
func waitServedBy(t testing.TB, from, network, addr string, want []string) time.Duration {
	t.Helper()
	start := time.Now()
	var last map[string]int
	rounds := 0
	for deadline := start.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		rounds++
		last = answers(from, network, addr, 12*len(want))
		if slices.Equal(slices.Sorted(maps.Keys(last)), want) {
			waited(t, "answers over "+network, time.Since(start))
			return time.Since(start)
		}
	}
	dumpServicePath(t, from == env.vars["STACK_OUTSIDE_NETNS"])
	t.Fatalf("%s %s → %s: after %d rounds the last answers were %v; want each of %v and nothing else", network, from, addr, rounds, last, want)
	return 0
}

// dumpServicePath logs what decides whether a clusterIP or floating IP reaches its backends: Octavia's view of
// every load balancer's members and monitors, OVN's load balancers and service monitors, the datapath's flows
// towards the VIPs, and the last lines of the provider's driver agent and of ovn-controller. Through the
// outside, the outside path too.
func dumpServicePath(t testing.TB, outside bool) {
	t.Helper()
	ctx := context.Background()
	if lbs, err := env.os.LoadBalancing.ListLoadBalancers(ctx, nil); err == nil {
		for _, lb := range lbs {
			tree, err := env.os.LoadBalancing.LoadBalancerStatus(ctx, lb.ID)
			t.Logf("octavia lb %s %s vip=%s provisioning=%s operating=%s members=%v monitors=%v (err %v)",
				lb.ID, lb.Name, lb.VipAddress, lb.ProvisioningStatus, lb.OperatingStatus, tree.Members, tree.Monitors, err)
		}
	}
	nb, sb := "--db="+env.vars["STACK_OVN_NB_TCP"], "--db="+env.vars["STACK_OVN_SB_TCP"]
	logCmd(t, "ovn-nbctl", nb, "--timeout=10", "--columns=name,protocol,vips,health_check,ip_port_mappings,options", "list", "Load_Balancer")
	logCmd(t, "ovn-nbctl", nb, "--timeout=10", "list", "Load_Balancer_Health_Check")
	logCmd(t, "ovn-sbctl", sb, "--timeout=10", "--columns=ip,port,protocol,src_ip,logical_port,status", "list", "Service_Monitor")
	logCmd(t, "ovs-appctl", "dpctl/dump-flows")
	for _, name := range []string{"octavia-driver-agent", "ovn-controller", "ovn-northd"} {
		t.Logf("==== %s log, last lines:\n%s", name, tail(filepath.Join(env.vars["STACK_DIR"], "logs", name+".log"), 25))
	}
	if outside {
		dumpOutsidePath(t)
	}
}

// logCmd runs a command with the stack's Open vSwitch and OVN run directories and logs its output.
func logCmd(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+env.vars["OVS_RUNDIR"], "OVN_RUNDIR="+env.vars["OVN_RUNDIR"])
	out, err := cmd.CombinedOutput()
	t.Logf("==== %s %s (err %v)\n%s", name, strings.Join(args, " "), err, out)
}

// setReady makes a pod of createServingDeployment fail its readiness probe, or pass it again.
func setReady(t testing.TB, ns, pod string, ready bool) {
	t.Helper()
	podExec(t, ns, pod, "/testserver", "--mark="+map[bool]string{true: "ready", false: "unready"}[ready])
}

// setServing makes a pod's server stop answering while the pod stays Ready (a hung container no readiness
// probe sees), or answer again.
func setServing(t testing.TB, ns, pod string, serving bool) {
	t.Helper()
	podExec(t, ns, pod, "/testserver", "--mark="+map[bool]string{true: "serving", false: "hung"}[serving])
}

// A Service carries TCP and UDP from a pod through its clusterIP to every ready backend, from the outside
// through its external IP's floating IP, back to a backend that calls its own Service (hairpin); traffic
// follows scaling, readiness and the health monitors; a deleted Service stops answering and its pods keep
// their ports.
func TestServicesCarryTraffic(t *testing.T) {
	shared(t)
	needOVNProvider(t)
	ns := newNamespace(t)
	createServingPods(t, ns, "client")
	createServingDeployment(t, ns, "web", 3)
	svc := createService(t, ns, "web", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "tcp", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intOrString(80)},
			{Name: "udp", Port: 80, Protocol: corev1.ProtocolUDP, TargetPort: intOrString(80)},
		}
		s.Spec.ExternalIPs = []string{"172.24.4.60"}
	})
	backends := readyPods(t, ns, "web", 3)
	vip := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	client := podNetns(ns, "client")
	took := waitServedBy(t, client, "tcp", vip, backends)
	t.Logf("TCP through the clusterIP reaches all 3 backends %.1f s after the Service was created", took.Seconds())
	waitServedBy(t, client, "udp", vip, backends)

	// From the outside, through the floating IP of the external IP.
	outside := env.vars["STACK_OUTSIDE_NETNS"]
	for _, proto := range []string{"tcp", "udp"} {
		waitServedBy(t, outside, proto, "172.24.4.60:80", backends)
	}

	// Hairpin: a backend calling its own Service is answered by itself among the others.
	waitServedBy(t, podNetns(ns, backends[0]), "tcp", vip, backends)

	// Scaling: traffic follows 3 → 5 → 1.
	scale(t, ns, "web", 5)
	backends = readyPods(t, ns, "web", 5)
	took = waitServedBy(t, client, "tcp", vip, backends)
	t.Logf("scaled to 5: all 5 backends answer %.1f s after they were ready", took.Seconds())

	// A backend made unready leaves the rotation, and comes back when ready again.
	marked := time.Now()
	setReady(t, ns, backends[0], false)
	took = waitServedBy(t, client, "tcp", vip, backends[1:])
	t.Logf("an unready backend (%s, marked unready at %s UTC) stopped receiving new connections after %.1f s",
		backends[0], marked.UTC().Format("15:04:05.000"), took.Seconds())
	setReady(t, ns, backends[0], true)
	waitServedBy(t, client, "tcp", vip, backends)

	// A backend that stops answering while its pod stays Ready leaves the rotation through its pools' health
	// monitors (its EndpointSlice still says ready), for TCP and UDP, and comes back when it answers again.
	setServing(t, ns, backends[1], false)
	rest := slices.Delete(slices.Clone(backends), 1, 2)
	for _, proto := range []string{"tcp", "udp"} {
		took = waitServedBy(t, client, proto, vip, rest)
		t.Logf("%s: a Ready backend that stopped answering left the rotation after %.1f s", proto, took.Seconds())
	}
	// Every pool has its monitor: Octavia refused none of them. (Every UDP-CONNECT monitor was once refused, and
	// this test mostly passed all the same: the backend usually left the UDP rotation too, a way not tracked down.)
	if ws := warnings(t, ns, "web"); len(ws) > 0 {
		t.Fatalf("Raven gave the Service Warning events: %v", ws)
	}
	setServing(t, ns, backends[1], true)
	for _, proto := range []string{"tcp", "udp"} {
		took = waitServedBy(t, client, proto, vip, backends)
		t.Logf("%s: it was back in the rotation %.1f s after it answered again", proto, took.Seconds())
	}

	scale(t, ns, "web", 1)
	backends = readyPods(t, ns, "web", 1)
	waitServedBy(t, client, "udp", vip, backends)

	checkServiceDeleted(t, ns, svc, client, backends[0])
}

// checkServiceDeleted deletes the Service svc of ns and checks that its load balancer, VIP port and floating
// IP go, that its clusterIP stops answering from the namespace client, and that the pods that stay (the pod
// "client", and backend, which still answers on its own address) keep their ports.
func checkServiceDeleted(t *testing.T, ns string, svc *corev1.Service, client, backend string) {
	t.Helper()
	ctx := context.Background()
	vip := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	lb := serviceLB(t, svc.UID)
	if lb == nil {
		t.Fatal("no load balancer before the deletion")
	}
	// Only the ports of the pods that stay are compared: the scaled-down pods' ports may still be going.
	var kept []string
	for _, name := range []string{"client", backend} {
		if _, port := portAnnotation(t, ns, name); port != nil {
			kept = append(kept, port.ID)
		}
	}
	if len(kept) != 2 {
		t.Fatalf("ports of the remaining pods %v: want 2", kept)
	}
	if err := env.kube.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "load balancer, VIP port and floating IP gone, and the clusterIP silent", func() (bool, error) {
		_, lbErr := env.os.LoadBalancing.GetLoadBalancer(ctx, lb.ID)
		_, portErr := env.os.Networking.GetPort(ctx, lb.VipPortID)
		if !openstack.IsNotFound(lbErr) || !openstack.IsNotFound(portErr) || len(serviceFIPs(t, svc.UID)) != 0 {
			return false, nil
		}
		_, err := exchange(client, "tcp", vip)
		return err != nil, nil
	})
	for _, id := range kept {
		if _, err := env.os.Networking.GetPort(ctx, id); err != nil {
			t.Errorf("the port %s of a remaining pod after the Service deletion: %v", id, err)
		}
	}
	// The remaining backend still answers on its own address.
	p, err := env.kube.CoreV1().Pods(ns).Get(ctx, backend, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, client, "tcp", net.JoinHostPort(p.Status.PodIP, "80"), backend)
}

// A Service of type LoadBalancer is reached from the outside at its ingress IP.
func TestLoadBalancerIngressCarriesTraffic(t *testing.T) {
	shared(t)
	needOVNProvider(t)
	ns := newNamespace(t)
	createServingDeployment(t, ns, "lb", 2)
	svc := createService(t, ns, "lb", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	backends := readyPods(t, ns, "lb", 2)
	var ip string
	eventually(t, 2*time.Minute, "status.loadBalancer.ingress", func() (bool, error) {
		s := getService(t, ns, "lb")
		if len(s.Status.LoadBalancer.Ingress) != 1 {
			return false, nil
		}
		ip = s.Status.LoadBalancer.Ingress[0].IP
		return true, nil
	})
	took := waitServedBy(t, env.vars["STACK_OUTSIDE_NETNS"], "tcp", net.JoinHostPort(ip, "80"), backends)
	t.Logf("the ingress IP %s of %s reaches both backends %.1f s after it was published", ip, svc.Name, took.Seconds())
}

// A Service with 100 ports is built whole, in one Octavia request, and every port answers.
func TestServiceWith100PortsCarriesTraffic(t *testing.T) {
	needOVNProvider(t)
	if v := env.vars["STACK_OVN_OCTAVIA_PROVIDER"]; providerAsksPerListener(v) {
		// Measured: docs/performance/provider-8.0.0-100-ports-2026-11-28.txt. The load balancer made by hand
		// (one call, without Raven) does not carry its second port within minutes either.
		t.Skipf("ovn-octavia-provider %s asks Octavia's driver agent for every pool and listener of the load balancer after "+
			"each member and health monitor request (fixed in 10.0.0): a 100-port load balancer had 2 of its listeners in "+
			"OVN 4 min after Octavia accepted it, and its second port did not answer in 3 min", v)
	}
	r := ensureRaven(t)
	ns := newNamespace(t)
	createServingPods(t, ns, "client")
	createServingDeployment(t, ns, "many", 1)
	backends := readyPods(t, ns, "many", 1)
	isCreate := func(l string) bool { return strings.Contains(l, `operation="octavia loadbalancer create"`) }
	creates := r.metric(t, "raven_openstack_request_duration_seconds_count", isCreate)
	start := time.Now()
	svc := createService(t, ns, "many", func(s *corev1.Service) {
		s.Spec.Ports = nil
		for i := range 100 {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(10000 + i), TargetPort: intOrString(80)})
		}
	})
	client := podNetns(ns, "client")
	for i := range 100 {
		expectAnswerWithin(t, 3*time.Minute, client, "tcp", net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(10000+i)), backends[0])
	}
	t.Logf("all 100 ports answered %.1f s after the Service was created", time.Since(start).Seconds())
	// OVN balances before Octavia answers the create: wait for the answer, then count.
	eventually(t, 2*time.Minute, "Octavia's answer to the load balancer create", func() (bool, error) {
		return r.metric(t, "raven_openstack_request_duration_seconds_count", isCreate) > creates, nil
	})
	if n := r.metric(t, "raven_openstack_request_duration_seconds_count", isCreate) - creates; n != 1 {
		t.Errorf("%v load balancer creates for the 100-port Service, want 1 (the whole graph at once)", n)
	}
	lb := serviceLB(t, svc.UID)
	if lb == nil {
		t.Fatal("no load balancer")
	}
	ls, err := env.os.LoadBalancing.ListListeners(context.Background(), lb.ID)
	if err != nil || len(ls) != 100 {
		t.Fatalf("%d listeners (%v), want 100", len(ls), err)
	}
}

// expectAnswerWithin is expectAnswer with its own deadline.
func expectAnswerWithin(t testing.TB, timeout time.Duration, from, network, addr, want string) {
	t.Helper()
	var got string
	var err error
	began := time.Now()
	for deadline := began.Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		if got, err = exchange(from, network, addr); err == nil && got == want {
			waited(t, "answers over "+network, time.Since(began))
			return
		}
		if time.Now().After(deadline) {
			fatalf(t, "%s %s → %s: answer %q, error %v; want %q", network, from, addr, got, err, want)
		}
	}
}

// providerAsksPerListener tells whether an ovn-octavia-provider version (a Debian package version such as
// "8.0.0-1") computes a load balancer's operating statuses with one driver agent call per pool and listener
// after each member and health monitor request: 4.0.0 (2023.1) up to 10.0.0 (2026.1), which makes one call.
func providerAsksPerListener(version string) bool {
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "1:"), ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 4 && n < 10
}
