//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

func podSpec(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "nginx", Image: "nginx"}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

func createPod(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), podSpec(name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func createPods(t testing.TB, ns, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), podSpec(fmt.Sprintf("%s-%d", prefix, i)), metav1.CreateOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// portAnnotation returns the pod's decoded port annotation, or nil.
// portAnnotation returns the pod and its kuryr.org/neutron-port annotation, nil when it has no valid one.
func portAnnotation(t testing.TB, ns, name string) (*corev1.Pod, *annotations.Port) {
	t.Helper()
	p, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var port annotations.Port
	if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &port); !ok || err != nil {
		return p, nil // none yet, or one a user broke that Raven has not rewritten yet
	}
	return p, &port
}

// waitPortGone waits up to 30 s for Neutron to answer 404 for the port.
func waitPortGone(t testing.TB, id, what string) {
	t.Helper()
	eventually(t, 30*time.Second, what, func() (bool, error) {
		_, err := env.os.Networking.GetPort(context.Background(), id)
		return openstack.IsNotFound(err), nil
	})
}

func waitAnnotated(t testing.TB, ns, name string) *annotations.Port {
	t.Helper()
	var port *annotations.Port
	eventually(t, 60*time.Second, "pod "+ns+"/"+name+" to get its port annotation", func() (bool, error) {
		_, port = portAnnotation(t, ns, name)
		return port != nil, nil
	})
	return port
}

func waitAllAnnotated(t testing.TB, ns string, want int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods *corev1.PodList
	eventually(t, timeout, fmt.Sprintf("%d annotated pods in %s", want, ns), func() (bool, error) {
		var err error
		pods, err = env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Annotations[annotations.PodPort] != "" {
				n++
			}
		}
		return n == want && len(pods.Items) == want, nil
	})
	return pods.Items
}

// checkOnePortPerPod asserts the invariant for one namespace: every live pod has exactly one port (by
// device_id), its annotation names that port with the same IP and MAC, and no port of the namespace belongs
// to a pod that is gone. A pod that took a pool port shows in Neutron once Raven has recorded the claim
// (off the critical path), so the check retries for up to 30 s before it reports.
func checkOnePortPerPod(t testing.TB, ns string) {
	t.Helper()
	var problems []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		problems = onePortPerPodProblems(t, ns)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func onePortPerPodProblems(t testing.TB, ns string) []string {
	t.Helper()
	pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byDevice := map[string][]openstack.Port{}
	for _, p := range clusterPorts(t) {
		o, _ := ownership.Parse(p.Tags)
		if o.Name != "" && len(o.Name) > len(ns) && o.Name[:len(ns)+1] == ns+"/" {
			// By the owner's tag: a nested pod's port has no device_id.
			owner := o.UID
			if owner == "" {
				owner = p.DeviceID
			}
			byDevice[owner] = append(byDevice[owner], p)
		}
	}
	var problems []string
	live := map[string]bool{}
	for _, p := range pods.Items {
		live[string(p.UID)] = true
		ports := byDevice[string(p.UID)]
		if len(ports) != 1 {
			problems = append(problems, fmt.Sprintf("pod %s has %d ports, want 1", p.Name, len(ports)))
			continue
		}
		if problem := annotationProblem(p, ports[0]); problem != "" {
			problems = append(problems, problem)
		}
	}
	for dev, ports := range byDevice {
		if !live[dev] {
			problems = append(problems, fmt.Sprintf("%d leaked port(s) for gone pod %s", len(ports), dev))
		}
	}
	return problems
}

// annotationProblem says how the pod's port annotation differs from its port in Neutron ("" when it does not).
func annotationProblem(p corev1.Pod, port openstack.Port) string {
	var ann annotations.Port
	if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &ann); !ok || err != nil {
		return fmt.Sprintf("pod %s: annotation missing or bad (%v)", p.Name, err)
	}
	if len(ann.FixedIPs) == 0 || len(port.FixedIPs) == 0 {
		return fmt.Sprintf("pod %s: annotation %s has %d fixed IPs, port %s has %d", p.Name, ann.ID, len(ann.FixedIPs), port.ID, len(port.FixedIPs))
	}
	if ann.ID != port.ID || ann.MACAddress != port.MACAddress || ann.FixedIPs[0].IPAddress != port.FixedIPs[0].IPAddress {
		return fmt.Sprintf("pod %s: annotation %s/%s/%s does not match port %s/%s/%s", p.Name, ann.ID, ann.MACAddress,
			ann.FixedIPs[0].IPAddress, port.ID, port.MACAddress, port.FixedIPs[0].IPAddress)
	}
	return ""
}

func namespaceSubnet(t testing.TB, ns string) netip.Prefix {
	t.Helper()
	var sub annotations.Subnet
	eventually(t, 2*time.Minute, "namespace "+ns+" to get its subnet annotation", func() (bool, error) {
		n, err := env.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ok, err := annotations.Decode(n.Annotations, annotations.NamespaceSubnet, &sub)
		return ok && err == nil, err
	})
	return netip.MustParsePrefix(sub.CIDR)
}

// The walkthrough of seed 001.
func TestPodWalkthrough(t *testing.T) {
	shared(t)
	ns := newNamespace(t)
	cidr := namespaceSubnet(t, ns)
	createPod(t, ns, "nginx")
	ann := waitAnnotated(t, ns, "nginx")

	ports, err := env.os.Networking.ListPorts(context.Background(), openstack.Filter{Name: "nginx", DeviceID: ann.DeviceID})
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 1 {
		t.Fatalf("%d ports named nginx for the pod, want 1", len(ports))
	}
	port := ports[0]
	ip := netip.MustParseAddr(port.FixedIPs[0].IPAddress)
	if !cidr.Contains(ip) {
		t.Errorf("port IP %s is outside the namespace subnet %s", ip, cidr)
	}
	if ann.ID != port.ID || ann.MACAddress != port.MACAddress || ann.FixedIPs[0] != (annotations.FixedIP(port.FixedIPs[0])) ||
		ann.NetworkID != port.NetworkID || ann.Name != "nginx" || ann.DeviceOwner != port.DeviceOwner {
		t.Errorf("annotation %+v does not match the Neutron port %+v", ann, port)
	}
	pod, _ := portAnnotation(t, ns, "nginx")
	var sub annotations.Subnet
	if ok, err := annotations.Decode(pod.Annotations, annotations.PodSubnet, &sub); !ok || err != nil || sub.CIDR != cidr.String() || sub.GatewayIP == "" {
		t.Errorf("subnet annotation %+v (err %v), want cidr %s with a gateway", sub, err, cidr)
	}
	// The kubelet copies the IP of the CNI result into the pod status (seed 001 step 4).
	eventually(t, 20*time.Second, "status.podIP", func() (bool, error) {
		p, _ := portAnnotation(t, ns, "nginx")
		return p.Status.PodIP == ip.String(), nil
	})

	if err := env.kube.CoreV1().Pods(ns).Delete(context.Background(), "nginx", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPortGone(t, port.ID, "the port to be deleted")
}

func TestTwoNamespacesGetTwoNetworks(t *testing.T) {
	shared(t)
	a, b := newNamespace(t), newNamespace(t)
	ca, cb := namespaceSubnet(t, a), namespaceSubnet(t, b)
	if ca.Overlaps(cb) {
		t.Fatalf("namespace subnets overlap: %s and %s", ca, cb)
	}
	createPod(t, a, "web")
	createPod(t, b, "web")
	pa, pb := waitAnnotated(t, a, "web"), waitAnnotated(t, b, "web")
	if pa.NetworkID == pb.NetworkID {
		t.Fatalf("pods of two namespaces share network %s", pa.NetworkID)
	}
	if !ca.Contains(netip.MustParseAddr(pa.FixedIPs[0].IPAddress)) || !cb.Contains(netip.MustParseAddr(pb.FixedIPs[0].IPAddress)) {
		t.Fatalf("pod IPs %s, %s not in their namespace subnets %s, %s", pa.FixedIPs[0].IPAddress, pb.FixedIPs[0].IPAddress, ca, cb)
	}
}

func TestDeletedNamespaceLosesItsNetwork(t *testing.T) {
	shared(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createPod(t, ns, "web")
	ann := waitAnnotated(t, ns, "web")
	if err := env.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the namespace network to be deleted and the namespace gone", func() (bool, error) {
		_, err := env.os.Networking.GetNetwork(ctx, ann.NetworkID)
		_, kerr := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return openstack.IsNotFound(err) && apierrors.IsNotFound(kerr), nil
	})
}

func TestSIGTERMStopsWithinFiveSeconds(t *testing.T) {
	r := startRaven(t, ravenOpts{})
	took, err := r.signal(syscall.SIGTERM, 5*time.Second)
	env.raven = nil
	if err != nil {
		t.Fatalf("after SIGTERM: %v (took %s)\n%s", err, took, r.logTail(20))
	}
	t.Logf("raven exited %s after SIGTERM", took)
}

func TestRestartInSyncMakesNoNeutronWrite(t *testing.T) {
	ensureRaven(t)
	ns := newNamespace(t)
	createPods(t, ns, "p", 20)
	waitAllAnnotated(t, ns, 20, 2*time.Minute)
	waitNoTerminatingNamespaces(t)
	waitPoolsSettled(t)

	env.raven.stop()
	r := startRaven(t, ravenOpts{})
	// Start-up: the loads and the first resync after them.
	r.waitResyncs(t, 0, 1, time.Minute)
	startCalls, startWrites := r.openstackCalls(t)
	// Then a window that holds at least two whole periodic resyncs.
	from := r.resyncs(t)
	r.waitResyncs(t, from, 3, 2*time.Minute)
	calls, writes := r.openstackCalls(t)
	resyncs := r.resyncs(t) - from
	perResync := (calls - startCalls) / resyncs
	namespaces, err := env.kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restart with %d namespaces and 20 pods in sync: start-up %v OpenStack calls (%v writes), then %.1f calls per resync over %v resyncs, %v writes in all",
		len(namespaces.Items), startCalls, startWrites, perResync, resyncs, writes)
	for op, n := range r.metricSeries(t, "raven_openstack_request_duration_seconds_count", nil) {
		t.Logf("  %s: %v", op, n)
	}
	if writes != 0 {
		t.Errorf("restart in sync made %v OpenStack writes, want 0", writes)
	}
	// A cost per pod would be 20 calls at least. Start-up finds the cluster's objects, lists by collection and
	// reads each Service's load balancer once (one Service here); a resync lists by collection.
	if startCalls-perResync >= 25 || perResync >= 10 {
		t.Errorf("restart in sync: start-up %v calls (with its first resync), %.1f per resync; want fewer than 25 before the first resync and 10 per resync (numbers independent of the 20 pods)",
			startCalls, perResync)
	}
	checkOnePortPerPod(t, ns)
}

func TestPodDeletedWhileRavenStoppedLosesItsPort(t *testing.T) {
	ensureRaven(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createPod(t, ns, "short")
	ann := waitAnnotated(t, ns, "short")
	env.raven.stop()
	if err := env.kube.CoreV1().Pods(ns).Delete(ctx, "short", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the pod to be gone", func() (bool, error) {
		_, err := env.kube.CoreV1().Pods(ns).Get(ctx, "short", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	startRaven(t, ravenOpts{})
	waitPortGone(t, ann.ID, "the port of the pod deleted while Raven was stopped to be gone")
}

func TestPortDeletedInNeutronIsRecreated(t *testing.T) {
	shared(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createPod(t, ns, "victim")
	before := waitAnnotated(t, ns, "victim")
	if err := env.os.Networking.DeletePort(ctx, before.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a new port and an updated annotation", func() (bool, error) {
		_, ann := portAnnotation(t, ns, "victim")
		return ann != nil && ann.ID != before.ID, nil
	})
	checkOnePortPerPod(t, ns)
}

// A resync lists every port once every portAuditPeriod; the resyncs between list the namespace networks only. A
// port made out of band with the cluster's tags, for a pod that does not exist, outlives the resyncs between
// (past the orphan grace period), and is released after the next listing of every port.
func TestAPortMadeOutOfBandWaitsForTheListingOfEveryPort(t *testing.T) {
	const audit = 30 * time.Second
	r := startRaven(t, ravenOpts{portAudit: audit})
	t.Cleanup(r.stop) // the next tests run with the harness's periods
	ctx := context.Background()
	ns := newNamespace(t)
	createPod(t, ns, "mine")
	ann := waitAnnotated(t, ns, "mine")
	listings := func() float64 { return r.metric(t, "raven_port_listings_total", nil) }
	// Right after a listing of every port, so that the next is a whole period away.
	from := listings()
	eventually(t, 2*audit, "a listing of every port", func() (bool, error) { return listings() > from, nil })
	listed := listings()
	ghost := ownership.Owner{Cluster: env.cluster, Kind: ownership.KindPod, UID: "00000000-0000-4000-8000-0000000000fe", Name: ns + "/ghost"}
	port, err := env.os.Networking.CreatePort(ctx, openstack.PortSpec{Name: "ghost", NetworkID: ann.NetworkID, DeviceID: ghost.UID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.os.Networking.DeletePort(context.Background(), port.ID) })
	if err := env.os.Networking.ReplaceTags(ctx, openstack.ResourcePorts, port.ID, ghost.Tags()); err != nil {
		t.Fatal(err)
	}
	made := time.Now()
	ghostly := func() (bool, error) {
		p, err := env.os.Networking.GetPort(ctx, port.ID)
		if openstack.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		o, _ := ownership.Parse(p.Tags)
		return o.UID == ghost.UID, nil // not released (deleted, or back in a pool)
	}
	// Two whole resyncs, past the orphan grace period of 2 s, before the next listing of every port.
	r.waitResyncs(t, r.resyncs(t), 3, time.Minute)
	if got := listings(); got != listed {
		t.Fatalf("%v listings of every port ran within %.1f s, want none (portAuditPeriod %v)", got-listed, time.Since(made).Seconds(), audit)
	}
	if still, err := ghostly(); err != nil || !still {
		t.Fatalf("the port made out of band was released %.1f s after it was made, before any listing of every port (err %v)", time.Since(made).Seconds(), err)
	}
	eventually(t, 2*audit, "the port made out of band for a pod that does not exist to be released", func() (bool, error) {
		still, err := ghostly()
		return !still, err
	})
	if got := listings(); got <= listed {
		t.Errorf("the port was released with no listing of every port (%v before, %v after)", listed, got)
	}
	report(t, "a port made out of band with the cluster's tags: kept by the resyncs between two listings of every port, released %.1f s after it was made (portAuditPeriod %v)",
		time.Since(made).Seconds(), audit)
}

// Raven creates ports but cannot annotate (its identity may not patch pods), and is killed with SIGKILL
// in that state, which is the window between a port create and its annotation. After a restart with
// full rights every pod has exactly one port and nothing leaked.
func TestKilledBetweenPortCreateAndAnnotation(t *testing.T) {
	ensureRaven(t)
	ctx := context.Background()
	ns := newNamespace(t)
	namespaceSubnet(t, ns)
	env.raven.stop()

	// An identity that can do everything Raven does except patch pods (not named as Raven's service account,
	// which the shipped RBAC lets patch pods).
	const user = "raven-without-pod-patch"
	role := &rbacv1.ClusterRole{
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "services", "nodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces", "services"}, Verbs: []string{"patch", "update"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	bindUser(t, role, user)

	const n = 10
	createPods(t, ns, "crash", n)
	r := startRaven(t, ravenOpts{kubeconfig: impersonatingKubeconfig(t, env.vars["KUBECONFIG"], user, nil, impersonatedSuffix)})
	eventually(t, 60*time.Second, "ports for every pod (annotations are forbidden)", func() (bool, error) {
		count := 0
		for _, p := range clusterPorts(t) {
			if o, _ := ownership.Parse(p.Tags); len(o.Name) > len(ns) && o.Name[:len(ns)+1] == ns+"/" {
				count++
			}
		}
		return count == n, nil
	})
	r.kill()
	pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Annotations[annotations.PodPort] != "" {
			t.Fatalf("pod %s was annotated by an identity that may not patch pods", p.Name)
		}
	}
	startRaven(t, ravenOpts{})
	waitAllAnnotated(t, ns, n, 60*time.Second)
	checkOnePortPerPod(t, ns)
}

// waitNoTerminatingNamespaces waits until earlier tests' namespaces are gone, so that their teardown
// does not mix into a measurement.
func waitNoTerminatingNamespaces(t testing.TB) {
	t.Helper()
	eventually(t, 5*time.Minute, "no namespace left Terminating", func() (bool, error) {
		nss, err := env.kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ns := range nss.Items {
			if ns.DeletionTimestamp != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitPoolsSettled waits until the number of pool ports in Neutron stops changing (refills are done).
func waitPoolsSettled(t testing.TB) {
	t.Helper()
	last, stable := -1, 0
	eventually(t, time.Minute, "port pools to settle", func() (bool, error) {
		ports, err := env.os.Networking.ListPorts(context.Background(), openstack.Filter{Tags: ownership.Selector(env.cluster, ownership.KindPool)})
		if err != nil {
			return false, err
		}
		if len(ports) == last {
			stable++
		} else {
			last, stable = len(ports), 0
		}
		return stable >= 20, nil // 2 s without change
	})
}

// With pools.recycle, a deleted pod's port goes back to its namespace's pool instead of being deleted, and
// the next pods are served from the pool; nothing is leaked or duplicated.
func TestRecycledPortGoesBackToThePool(t *testing.T) {
	r := startRaven(t, ravenOpts{config: writeConfig(t, "pools: {enabled: true, minFree: 2, batch: 2, max: 10, recycle: true}\n")})
	t.Cleanup(r.stop) // the next tests run with the stack's configuration
	ctx := context.Background()
	ns := newNamespace(t)
	createPod(t, ns, "first")
	ann := waitAnnotated(t, ns, "first")
	// A pool port's claim is finished off the critical path; a pod deleted before Neutron shows the port as
	// its own has its port deleted, not recycled (Pools.Recycle). Wait for that first.
	eventually(t, 30*time.Second, "Neutron to show the pod's port as its own", func() (bool, error) {
		p, err := env.os.Networking.GetPort(ctx, ann.ID)
		if err != nil {
			return false, err
		}
		o, _ := ownership.Parse(p.Tags)
		return o.Kind == ownership.KindPod, nil
	})
	if err := env.kube.CoreV1().Pods(ns).Delete(ctx, "first", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	// The same port (same ID, so never deleted) becomes a free pool port again.
	eventually(t, 30*time.Second, "the deleted pod's port back in the pool", func() (bool, error) {
		p, err := env.os.Networking.GetPort(ctx, ann.ID)
		if err != nil {
			return false, err
		}
		o, _ := ownership.Parse(p.Tags)
		return o.Kind == ownership.KindPool && p.Name == "raven-pool" && p.DeviceID == "", nil
	})
	createPods(t, ns, "next", 3)
	waitAllAnnotated(t, ns, 3, time.Minute)
	checkInvariant(t, time.Minute)
}
