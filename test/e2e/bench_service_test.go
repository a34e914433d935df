//go:build e2e && bench

package e2e

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

var (
	benchSvcEndpoints = flag.Int("bench.svc-endpoints", 100, "backends of the service benchmark's Service")
	benchSvcPorts     = flag.Int("bench.svc-ports", 100, "ports of the service benchmark's many-port Service")
	benchSvcChurn     = flag.Int("bench.svc-churn", 10, "backends replaced at once in the service benchmark's churn phase")
	benchSvcOut       = flag.String("bench.svc-out", "bench/results/services", "where the service benchmark writes latest.json and latest.md")
)

// svcPhaseTimeout bounds each wait of the service benchmark: Octavia's OVN provider took 106–164 s for a
// 100-listener create on this kind of machine, and health monitors come one at a time after that.
const svcPhaseTimeout = 20 * time.Minute

// TestBenchmarkServices measures Services on the OVN provider with packets: created → a connection through
// the VIP has reached every backend (100 endpoints), created → every port answers (100 ports), and 10 % of
// the backends replaced → traffic avoids the old ones and has reached the new ones. Each Service is set
// beside its floor from the same run: the same load balancer built by hand in one fully populated create
// (the fewest calls the provider allows), and for the churn, Kubernetes' own EndpointSlice update.
func TestBenchmarkServices(t *testing.T) {
	needOVNProvider(t)
	ctx := context.Background()
	res := map[string]any{}
	put := func(k string, v float64) { res[k] = float64(int64(v*100)) / 100 }
	res["stack"] = "ML2/OVN Neutron, Octavia with the ovn provider, node side on (STACK_CNI=1), userspace datapath"
	putRun(res)
	r := startRaven(t, benchRaven(ravenOpts{}))
	res["raven.health_monitors"] = "on (delay 2 s, timeout 1 s, 2 failures down)"

	ns := benchNamespace(t, "bench-lb")
	createServingPods(t, ns, "client")
	client := podNetns(ns, "client")
	n := *benchSvcEndpoints
	createBenchDeployment(t, ns, "web", int32(n))
	createBenchDeployment(t, ns, "one", 1)
	createBenchDeployment(t, ns, "spare", int32(*benchSvcChurn))
	web := readyBackends(t, ns, "web", n)
	one := readyBackends(t, ns, "one", 1)
	spare := readyBackends(t, ns, "spare", *benchSvcChurn)
	serviceSubnet, podSubnet := benchSubnets(t, ns)
	t.Logf("%d backends ready; service subnet %s, pod subnet %s", n, serviceSubnet, podSubnet)

	isOctavia := func(l string) bool { return strings.Contains(l, `operation="octavia `) }
	octaviaCalls := func() float64 { return r.metric(t, "raven_openstack_request_duration_seconds_count", isOctavia) }

	// ---- 100 endpoints: the floor, then Raven.
	var members []openstack.MemberSpec
	for ip := range web {
		members = append(members, openstack.MemberSpec{Address: ip, ProtocolPort: 80, SubnetID: podSubnet})
	}
	floorS, floorAnswered, floorCalls := floorLoadBalancer(t, serviceSubnet, tcp80("floor", members), func(vip string) time.Duration {
		d, _ := reachAll(t, client, net.JoinHostPort(vip, "80"), names(web))
		return d
	})
	put("endpoints.floor_reach_all_s", floorS.Seconds())
	put("endpoints.floor_octavia_calls", float64(floorCalls))
	put("endpoints.floor_create_answered_s", floorAnswered.Seconds())

	o0 := octaviaCalls()
	start := time.Now()
	svc := createService(t, ns, "web", nil)
	reached, conns := reachAll(t, client, net.JoinHostPort(svc.Spec.ClusterIP, "80"), names(web))
	put("endpoints.raven_reach_all_s", reached.Seconds())
	put("endpoints.raven_octavia_calls_to_reach_all", octaviaCalls()-o0)
	put("endpoints.connections_to_reach_all", float64(conns))
	converged := waitMonitored(t, svc.UID, 1)
	put("endpoints.raven_monitored_s", time.Since(start).Seconds())
	put("endpoints.raven_octavia_calls_to_monitored", octaviaCalls()-o0)
	res["endpoints.backends"] = n
	t.Logf("%d endpoints: floor (one create by hand) reached all in %.1f s; Raven in %.1f s with %v Octavia calls (%v with its health monitor, %.1f s)",
		n, floorS.Seconds(), reached.Seconds(), res["endpoints.raven_octavia_calls_to_reach_all"], res["endpoints.raven_octavia_calls_to_monitored"], converged.Sub(start).Seconds())

	out := outDir(*benchSvcOut)
	writeResultsTo(t, out, res, nil) // each phase's figures are kept even if a later phase fails

	// ---- churn: 10 % of the backends replaced at once. The floor first: the same replacement made by hand in
	// one batch call on a load balancer built by hand with the same backends and health monitor.
	old := names(web)[:*benchSvcChurn]
	floorAvoid, floorReach := floorChurn(t, serviceSubnet, podSubnet, web, old, spare, client)
	put("churn.floor_avoids_old_s", floorAvoid.Seconds())
	put("churn.floor_reaches_new_s", floorReach.Seconds())
	churnStart := time.Now()
	for _, p := range old {
		if err := env.kube.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	avoid, reachNew, slicesS := churnTraffic(t, ns, client, net.JoinHostPort(svc.Spec.ClusterIP, "80"), old, n, churnStart)
	put("churn.replaced", float64(len(old)))
	put("churn.floor_endpointslices_s", slicesS.Seconds())
	put("churn.raven_avoids_old_s", avoid.Seconds())
	put("churn.raven_reaches_new_s", reachNew.Seconds())
	// Raven starts when Kubernetes has the new set; the floor when its one call is sent.
	avoidAfter, reachAfter := max(avoid-slicesS, 0), max(reachNew-slicesS, 0)
	put("churn.raven_avoids_old_after_slices_s", avoidAfter.Seconds())
	put("churn.raven_reaches_new_after_slices_s", reachAfter.Seconds())
	res["churn.verdict_avoid_within_2s_of_floor"] = avoidAfter <= floorAvoid+2*time.Second
	res["churn.verdict_reach_within_2s_of_floor"] = reachAfter <= floorReach+2*time.Second
	res["churn.verdict_whole_within_10s_of_slices"] = max(avoidAfter, reachAfter) <= 10*time.Second
	t.Logf("churn of %d of %d: the floor (one batch call by hand) avoided the old backends after %.1f s and reached every new one after %.1f s; "+
		"EndpointSlices showed the change after %.1f s (the Kubernetes floor); through Raven, traffic avoided the old backends after %.1f s and had reached every new one after %.1f s (%.1f s and %.1f s after the EndpointSlices)",
		len(old), n, floorAvoid.Seconds(), floorReach.Seconds(), slicesS.Seconds(), avoid.Seconds(), reachNew.Seconds(), avoidAfter.Seconds(), reachAfter.Seconds())
	writeResultsTo(t, out, res, nil)
	deleteServiceAndWait(t, ns, svc)

	// ---- 100 ports: the floor, then Raven.
	ports := *benchSvcPorts
	oneIP := ""
	for ip := range one {
		oneIP = ip
	}
	var graph []openstack.ListenerGraph
	for i := range ports {
		graph = append(graph, openstack.ListenerGraph{
			Listener: openstack.ListenerSpec{Name: fmt.Sprintf("floor:%d", 10000+i), Protocol: "TCP", ProtocolPort: 10000 + i},
			Pool:     openstack.PoolSpec{Name: fmt.Sprintf("floor:%d/tcp", 10000+i), Protocol: "TCP", LBAlgorithm: "SOURCE_IP_PORT"},
			Members:  []openstack.MemberSpec{{Address: oneIP, ProtocolPort: 80, SubnetID: podSubnet}},
		})
	}
	floorPortsS, floorPortsAnswered, floorPortsCalls := floorLoadBalancer(t, serviceSubnet, graph,
		func(vip string) time.Duration { return everyPortAnswers(t, client, vip, ports, names(one)[0]) })
	put("ports.floor_all_answer_s", floorPortsS.Seconds())
	put("ports.floor_octavia_calls", float64(floorPortsCalls))
	put("ports.floor_create_answered_s", floorPortsAnswered.Seconds())

	o0 = octaviaCalls()
	start = time.Now()
	many := createService(t, ns, "one", func(s *corev1.Service) {
		s.Spec.Ports = nil
		for i := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(10000 + i), TargetPort: intOrString(80)})
		}
	})
	answered := everyPortAnswers(t, client, many.Spec.ClusterIP, ports, names(one)[0])
	put("ports.raven_all_answer_s", answered.Seconds())
	put("ports.raven_octavia_calls_to_all_answer", octaviaCalls()-o0)
	waitMonitored(t, many.UID, ports)
	put("ports.raven_monitored_s", time.Since(start).Seconds())
	put("ports.raven_octavia_calls_to_monitored", octaviaCalls()-o0)
	res["ports.ports"] = ports
	t.Logf("%d ports: floor (one create by hand) all answered in %.1f s; Raven in %.1f s with %v Octavia calls; health monitors on every pool after %v s with %v calls",
		ports, floorPortsS.Seconds(), answered.Seconds(), res["ports.raven_octavia_calls_to_all_answer"], res["ports.raven_monitored_s"], res["ports.raven_octavia_calls_to_monitored"])
	writeResultsTo(t, out, res, nil) // before the delete: the figures are kept even if it fails
	deleteServiceAndWait(t, ns, many)
}

// createBenchDeployment is createServingDeployment without the readiness probe: the benchmark never turns a
// backend's readiness off, and 112 exec probes a second overloaded two real kubelets on 2 cores (load average 222,
// docs/performance/bench-services-2025.1-2026-11-28.txt). A pod is ready once its container runs.
func createBenchDeployment(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	deploy(t, ns, name, replicas, servingPod("").Spec)
}

// readyBackends waits for n Ready pods of the Deployment name and returns them by IP.
func readyBackends(t testing.TB, ns, name string, n int) map[string]string {
	t.Helper()
	out := map[string]string{}
	eventually(t, svcPhaseTimeout, fmt.Sprintf("%d ready pods of %s/%s", n, ns, name), func() (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		clear(out)
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) && p.Status.PodIP != "" {
				out[p.Status.PodIP] = p.Name
			}
		}
		return len(out) == n && len(pods.Items) == n, nil
	})
	return out
}

func names(byIP map[string]string) []string {
	var out []string
	for _, n := range byIP {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// benchSubnets finds the cluster's service subnet (the one holding the kubernetes Service's clusterIP) and
// the pod subnet of ns (from a pod's annotation).
func benchSubnets(t testing.TB, ns string) (service, pod string) {
	t.Helper()
	ctx := context.Background()
	k, err := env.kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subs, err := env.os.Networking.ListSubnets(ctx, openstack.Filter{Tags: ownership.Owner{Cluster: env.cluster, Kind: ownership.KindCluster}.Tags()})
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr(k.Spec.ClusterIP)
	for _, s := range subs {
		if p, err := netip.ParsePrefix(s.CIDR); err == nil && p.Contains(ip) {
			service = s.ID
		}
	}
	p, err := env.kube.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sub annotations.Subnet
	if ok, err := annotations.Decode(p.Annotations, annotations.PodSubnet, &sub); !ok || err != nil {
		t.Fatalf("pod %s/client has no subnet annotation (%v)", ns, err)
	}
	if service == "" {
		t.Fatalf("no subnet of the cluster holds the clusterIP %s", ip)
	}
	return service, sub.ID
}

// floorLoadBalancer builds a load balancer by hand in one fully populated create on the service subnet, at a
// free address of it chosen beforehand, and measures it with reach from the moment the create is sent (OVN
// balances before Octavia answers the create, for the floor as for Raven); then deletes it. calls is the
// number of Octavia requests the build took, answered the time Octavia took to answer the create.
func floorLoadBalancer(t testing.TB, subnet string, graph []openstack.ListenerGraph, reach func(vip string) time.Duration) (took, answered time.Duration, calls int) {
	t.Helper()
	ctx := context.Background()
	vip := freeServiceAddress(t, subnet)
	start := time.Now()
	type result struct {
		lb  *openstack.LoadBalancer
		err error
		at  time.Duration
	}
	done := make(chan result, 1)
	go func() {
		lb, err := env.os.LoadBalancing.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: "bench-floor-" + randSuffix(), VipSubnetID: subnet,
			VipAddress: vip, Provider: "ovn", Listeners: graph})
		done <- result{lb, err, time.Since(start)}
	}()
	calls++
	took = reach(vip)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	deleteLoadBalancerAndWait(t, r.lb.ID)
	return took, r.at, calls
}

// floorChurn is the churn's floor: a load balancer built by hand with backends (one create) and a health monitor
// like Raven's, serving them all; then the backends named old are replaced with spare in one batch call by hand.
// From that call: when a round of connections from client was first answered without error and by no old
// backend, and when every spare one had answered. The load balancer is deleted after.
func floorChurn(t testing.TB, subnet, podSubnet string, backends map[string]string, old []string, spare map[string]string, client string) (avoid, reachNew time.Duration) {
	t.Helper()
	var members, replaced []openstack.MemberSpec
	for ip, name := range backends {
		m := openstack.MemberSpec{Address: ip, ProtocolPort: 80, SubnetID: podSubnet}
		members = append(members, m)
		if !slices.Contains(old, name) {
			replaced = append(replaced, m)
		}
	}
	for ip := range spare {
		replaced = append(replaced, openstack.MemberSpec{Address: ip, ProtocolPort: 80, SubnetID: podSubnet})
	}
	vip, poolID := monitoredFloorLB(t, subnet, members)
	addr := net.JoinHostPort(vip, "80")
	reachAll(t, client, addr, names(backends))

	start := time.Now()
	if err := env.os.LoadBalancing.ReplaceMembers(context.Background(), poolID, replaced); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for time.Since(start) < svcPhaseTimeout {
		if cleanRound(client, addr, old, 3*len(backends), seen) && avoid == 0 {
			avoid = time.Since(start)
		}
		if reachNew == 0 && allSeen(seen, names(spare)) {
			reachNew = time.Since(start)
		}
		if avoid > 0 && reachNew > 0 {
			return avoid, reachNew
		}
	}
	t.Fatalf("floor churn: after %s avoid=%s reachNew=%s", svcPhaseTimeout, avoid, reachNew)
	return
}

// monitoredFloorLB builds a load balancer by hand on the service subnet with one TCP port over members, in one
// create, and gives its pool a health monitor like Raven's; it returns once the monitor is ONLINE and the load
// balancer ACTIVE, with its VIP and pool. It is deleted when the test ends.
func monitoredFloorLB(t testing.TB, subnet string, members []openstack.MemberSpec) (vip, poolID string) {
	t.Helper()
	ctx := context.Background()
	lbc := env.os.LoadBalancing
	vip = freeServiceAddress(t, subnet)
	lb, err := lbc.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: "bench-floor-churn-" + randSuffix(), VipSubnetID: subnet,
		VipAddress: vip, Provider: "ovn", Listeners: tcp80("floor", members)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteLoadBalancerAndWait(t, lb.ID) })
	active := func() (bool, error) {
		got, err := lbc.GetLoadBalancer(ctx, lb.ID)
		return err == nil && got.ProvisioningStatus == "ACTIVE", err
	}
	eventually(t, svcPhaseTimeout, "the floor's load balancer ACTIVE", active)
	tree, err := lbc.LoadBalancerStatus(ctx, lb.ID)
	if err != nil {
		t.Fatal(err)
	}
	for id := range tree.Members {
		poolID = id
	}
	addMonitorLikeRavens(t, poolID, "floor")
	eventually(t, svcPhaseTimeout, "the floor's health monitor ONLINE", func() (bool, error) {
		tree, err := lbc.LoadBalancerStatus(ctx, lb.ID)
		m, ok := tree.Monitors[poolID]
		return ok && m.ProvisioningStatus == "ACTIVE" && m.OperatingStatus == "ONLINE", err
	})
	eventually(t, svcPhaseTimeout, "the floor's load balancer ACTIVE with its monitor", active)
	return vip, poolID
}

// tcp80 is the graph of a load balancer built by hand: one TCP listener on port 80, named name:80, whose pool
// balances over members as Raven's do on the ovn provider.
func tcp80(name string, members []openstack.MemberSpec) []openstack.ListenerGraph {
	return []openstack.ListenerGraph{{
		Listener: openstack.ListenerSpec{Name: name + ":80", Protocol: "TCP", ProtocolPort: 80},
		Pool:     openstack.PoolSpec{Name: name + ":80/tcp", Protocol: "TCP", LBAlgorithm: "SOURCE_IP_PORT"},
		Members:  members,
	}}
}

// addMonitorLikeRavens gives a pool built by hand a health monitor like Raven's, named name. 8.0.0 puts the load
// balancer back to ACTIVE while its members are still being made, and Octavia refuses a monitor on the pool
// meanwhile (409, pool immutable): it is asked again until it takes it, as an operator would.
func addMonitorLikeRavens(t testing.TB, pool, name string) {
	t.Helper()
	eventually(t, svcPhaseTimeout, "the "+name+" health monitor accepted", func() (bool, error) {
		err := env.os.LoadBalancing.CreateMonitor(context.Background(), openstack.MonitorSpec{PoolID: pool, Name: name, Type: "TCP", Delay: 2, Timeout: 1,
			MaxRetries: 1, MaxRetriesDown: 2})
		if openstack.KindOf(err) == openstack.KindImmutable {
			return false, nil
		}
		return err == nil, err
	})
}

// deleteLoadBalancerAndWait deletes a load balancer made by hand (cascade) once Octavia takes the delete, and waits
// until it is gone. The delete is sent once: ovn-octavia-provider 8.0.0 shows the load balancer ACTIVE again
// after each queued request it reports on, while the delete waits behind them, and a delete sent at every ACTIVE
// (45 of one 100-member load balancer, 2026-11-28) queued the same cascade again and again, with an error for
// every member update of the load balancer already gone: the Service benchmark's later phases waited on it.
func deleteLoadBalancerAndWait(t testing.TB, id string) {
	t.Helper()
	ctx := context.Background()
	sent := false
	eventually(t, svcPhaseTimeout, "the floor load balancer deleted", func() (bool, error) {
		got, err := env.os.LoadBalancing.GetLoadBalancer(ctx, id)
		if openstack.IsNotFound(err) {
			return true, nil
		}
		if err != nil || sent || got.ProvisioningStatus != "ACTIVE" {
			return false, err
		}
		err = env.os.LoadBalancing.DeleteLoadBalancer(ctx, id)
		switch {
		case err == nil:
			sent = true
		case openstack.IsNotFound(err):
			return true, nil
		case openstack.KindOf(err) != openstack.KindImmutable:
			return false, err
		}
		return false, nil
	})
}

// freeServiceAddress is an address of the service subnet that no Service and no Neutron port holds, from the
// top of the subnet down (below its gateway), so that the floor's VIP is known before its create is sent.
func freeServiceAddress(t testing.TB, subnet string) string {
	t.Helper()
	ctx := context.Background()
	ports, err := env.os.Networking.ListPorts(ctx, openstack.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := env.kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, p := range ports {
		for _, ip := range p.FixedIPs {
			used[ip.IPAddress] = true
		}
	}
	for _, s := range svcs.Items {
		used[s.Spec.ClusterIP] = true
	}
	subs, err := env.os.Networking.ListSubnets(ctx, openstack.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		if s.ID != subnet {
			continue
		}
		pfx := netip.MustParsePrefix(s.CIDR)
		gw := netip.MustParseAddr(s.GatewayIP)
		for a := gw.Prev(); pfx.Contains(a) && a != pfx.Addr(); a = a.Prev() {
			if !used[a.String()] {
				return a.String()
			}
		}
	}
	t.Fatalf("no free address in service subnet %s", subnet)
	return ""
}

// reachAll makes fresh TCP connections from the namespace from to addr until every backend of want has
// answered at least once (connections that fail count as attempts), and returns how long that took and how
// many connections were made.
func reachAll(t testing.TB, from, addr string, want []string) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	seen := map[string]bool{}
	conns := 0
	for time.Since(start) < svcPhaseTimeout {
		conns++
		got, err := exchangeQuick(from, addr)
		if err == nil && slices.Contains(want, got) {
			seen[got] = true
			if len(seen) == len(want) {
				return time.Since(start), conns
			}
		}
	}
	t.Fatalf("%s → %s: %d of %d backends answered in %s", from, addr, len(seen), len(want), svcPhaseTimeout)
	return 0, 0
}

// exchangeQuick is exchange with a budget of half a second: a backend that is gone (or a VIP not yet
// balanced) must not hold up the count. An answer through OVN takes milliseconds here.
func exchangeQuick(from, addr string) (string, error) {
	var answer string
	err := inNetns(from, func() error {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return err
		}
		buf := make([]byte, 256)
		k, err := c.Read(buf)
		answer = strings.TrimSpace(string(buf[:k]))
		return err
	})
	return answer, err
}

// everyPortAnswers waits until each of the ports 10000… of vip has been answered by want, and says how long
// from now.
func everyPortAnswers(t testing.TB, from, vip string, ports int, want string) time.Duration {
	t.Helper()
	start := time.Now()
	for i := range ports {
		addr := net.JoinHostPort(vip, strconv.Itoa(10000+i))
		for {
			if got, err := exchangeQuick(from, addr); err == nil && got == want {
				break
			}
			if time.Since(start) > svcPhaseTimeout {
				t.Fatalf("%s did not answer within %s", addr, svcPhaseTimeout)
			}
		}
	}
	return time.Since(start)
}

// waitMonitored waits until the Service's load balancer is ACTIVE with pools health monitors, each ACTIVE,
// and returns when that was seen.
func waitMonitored(t testing.TB, uid types.UID, pools int) time.Time {
	t.Helper()
	ctx := context.Background()
	eventually(t, svcPhaseTimeout, fmt.Sprintf("%d health monitors", pools), func() (bool, error) {
		lb := serviceLB(t, uid)
		if lb == nil || lb.ProvisioningStatus != "ACTIVE" {
			return false, nil
		}
		tree, err := env.os.LoadBalancing.LoadBalancerStatus(ctx, lb.ID)
		if err != nil {
			return false, err
		}
		active := 0
		for _, m := range tree.Monitors {
			if m.ProvisioningStatus == "ACTIVE" {
				active++
			}
		}
		return active == pools, nil
	})
	return time.Now()
}

// churnTraffic measures, from start (the old pods' deletion), when the Service's EndpointSlices list exactly
// the n ready pods, none of them old (Kubernetes' floor), when a round of up to 3n connections from client to
// addr was first answered without error and never by an old backend (a round ends at its first miss), and
// when every new backend had answered.
func churnTraffic(t testing.TB, ns, client, addr string, old []string, n int, start time.Time) (avoid, reachNew, slicesS time.Duration) {
	t.Helper()
	newSeen := map[string]bool{}
	var fresh []string
	for time.Since(start) < svcPhaseTimeout {
		now := readyBackendsNow(t, ns, "web")
		if len(now) == n && slicesS == 0 && slices.Equal(readyEndpointIPs(t, ns, "web"), slices.Sorted(maps.Keys(now))) {
			slicesS = time.Since(start)
		}
		if fresh == nil && len(now) == n {
			fresh = newBackends(now, old)
		}
		clean := cleanRound(client, addr, old, 3*n, newSeen)
		if clean && avoid == 0 {
			avoid = time.Since(start)
		}
		if reachNew == 0 && fresh != nil && allSeen(newSeen, fresh) {
			reachNew = time.Since(start)
		}
		if avoid > 0 && reachNew > 0 && slicesS > 0 {
			return avoid, reachNew, slicesS
		}
	}
	t.Fatalf("churn: after %s avoid=%s reachNew=%s (new backends %v, answers seen %d) slices=%s", svcPhaseTimeout, avoid, reachNew, fresh, len(newSeen), slicesS)
	return
}

// cleanRound makes up to n connections from client to addr, recording who answered in seen; it is false at
// the first that fails or is answered by an old backend.
func cleanRound(client, addr string, old []string, n int, seen map[string]bool) bool {
	for range n {
		got, err := exchangeQuick(client, addr)
		if err != nil || slices.Contains(old, got) {
			return false
		}
		seen[got] = true
	}
	return true
}

func allSeen(seen map[string]bool, want []string) bool {
	for _, w := range want {
		if !seen[w] {
			return false
		}
	}
	return true
}

// newBackends are the names of now that are not old.
func newBackends(now map[string]string, old []string) []string {
	var out []string
	for _, name := range now {
		if !slices.Contains(old, name) {
			out = append(out, name)
		}
	}
	return out
}

// readyBackendsNow is the Ready, not terminating pods of the Deployment name, by IP, as they are now.
func readyBackendsNow(t testing.TB, ns, name string) map[string]string {
	t.Helper()
	pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) && p.Status.PodIP != "" {
			out[p.Status.PodIP] = p.Name
		}
	}
	return out
}

// readyEndpointIPs is the sorted addresses of the ready endpoints of the Service's EndpointSlices.
func readyEndpointIPs(t testing.TB, ns, svc string) []string {
	t.Helper()
	list, err := env.kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// deleteServiceAndWait deletes the Service and waits until its load balancer is gone.
func deleteServiceAndWait(t testing.TB, ns string, svc *corev1.Service) {
	t.Helper()
	if err := env.kube.CoreV1().Services(ns).Delete(context.Background(), svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Gone from Octavia, not only PENDING_DELETE: the next phase's floor must not share the provider with it.
	eventually(t, svcPhaseTimeout, "the Service's load balancer gone", func() (bool, error) {
		lbs, err := env.os.LoadBalancing.ListLoadBalancers(context.Background(),
			ownership.Owner{Cluster: env.cluster, Kind: ownership.KindService, UID: string(svc.UID)}.Tags())
		return err == nil && len(lbs) == 0, err
	})
}
