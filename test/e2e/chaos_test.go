//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// make chaos raises these; make test runs the bounded version.
var (
	chaosKills = flag.Int("chaos.kills", 3, "SIGKILLs of Raven during the burst")
	chaosOps   = flag.Int("chaos.ops", 80, "pod creates and deletes in the burst")
	chaosOut   = flag.Bool("chaos.report", false, "log one line per scenario for docs/reliability.md")
	// chaosLong runs the scenarios that take minutes on the ML2/OVN stack (make chaos sets it).
	chaosLong = flag.Bool("chaos.long", false, "also run the long scenarios (a Service with 100 ports)")
)

func stackService(t testing.TB, verb, name string) {
	t.Helper()
	if err := switchStackService(verb, name); err != nil {
		t.Fatal(err)
	}
}

// switchStackService runs hack/stack.sh's stop-service or start-service; on real nodes raven-node is not a
// service of the stack but a DaemonSet, which ravenNodes takes off the nodes and puts back.
func switchStackService(verb, name string) error {
	if realNodes() && name == "raven-node" {
		return ravenNodes(verb == "start-service")
	}
	return stackCmd(env.vars["STACK_DIR"], nil, verb, name)
}

func report(t testing.TB, format string, args ...any) {
	t.Helper()
	if *chaosOut {
		t.Logf("REPORT "+format, args...)
	} else {
		t.Logf(format, args...)
	}
}

// checkInvariant is the check every fault scenario ends with, over the whole cluster: every live pod has
// exactly one port, owned by that pod in Neutron (device_id, name and tags), its annotation names that port
// with the same IP and MAC, and no port is announced by two pods; nothing of this cluster (pod, pool or VIP
// port, namespace network or subnet, load balancer, floating IP, or an untagged object carrying Raven's
// marker) belongs to an owner that is gone; and every port Raven made carries its cluster's tags. It retries
// until the timeout (which covers the grace period), then reports what is still wrong.
func checkInvariant(t testing.TB, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var problems []string
	for {
		problems = invariantProblems(t)
		if len(problems) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			fatalf(t, "invariant still broken after %s:\n%s", timeout, strings.Join(problems, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// clusterState is what the invariant reads, from Kubernetes and OpenStack.
type clusterState struct {
	pods              []corev1.Pod
	livePods, liveSvc map[string]bool
	liveNS            map[string]bool
	ports             []openstack.Port
	networks          []openstack.Network
	subnets           []openstack.Subnet
	fips              []openstack.FloatingIP
	lbs               []openstack.LoadBalancer
}

func readClusterState(ctx context.Context) (*clusterState, error) {
	s := &clusterState{livePods: map[string]bool{}, liveSvc: map[string]bool{}, liveNS: map[string]bool{}}
	pods, err := env.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.pods = pods.Items
	for _, p := range pods.Items {
		s.livePods[string(p.UID)] = true
	}
	svcs, err := env.kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, x := range svcs.Items {
		s.liveSvc[string(x.UID)] = true
	}
	nss, err := env.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, x := range nss.Items {
		s.liveNS[string(x.UID)] = true
	}
	if s.ports, err = env.os.Networking.ListPorts(ctx, openstack.Filter{}); err != nil {
		return nil, err
	}
	if s.networks, err = env.os.Networking.ListNetworks(ctx, openstack.Filter{}); err != nil {
		return nil, err
	}
	if s.subnets, err = env.os.Networking.ListSubnets(ctx, openstack.Filter{}); err != nil {
		return nil, err
	}
	if s.fips, err = env.os.Networking.ListFloatingIPs(ctx, openstack.Filter{}); err != nil {
		return nil, err
	}
	s.lbs, err = env.os.LoadBalancing.ListLoadBalancers(ctx, ownership.Selector(env.cluster, ownership.KindService))
	return s, err
}

func invariantProblems(t testing.TB) []string {
	s, err := readClusterState(context.Background())
	if err != nil {
		return []string{err.Error()}
	}
	return append(s.portProblems(), s.ownerProblems()...)
}

// portProblems checks pods against their ports.
func (s *clusterState) portProblems() []string {
	byDevice, problems := s.portsByDevice()
	announced := map[string]string{}
	for _, p := range s.pods {
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		problems = append(problems, podPortProblems(p, byDevice[string(p.UID)], announced)...)
	}
	for dev, ports := range byDevice {
		if !s.livePods[dev] {
			problems = append(problems, fmt.Sprintf("%d port(s) leaked for gone pod %s (%s)", len(ports), dev, ports[0].Name))
		}
	}
	return problems
}

// portsByDevice groups this cluster's pod and pool ports by device_id, and lists the problems of their tags.
func (s *clusterState) portsByDevice() (map[string][]openstack.Port, []string) {
	var problems []string
	byDevice := map[string][]openstack.Port{}
	for _, p := range s.ports {
		if strings.HasPrefix(p.DeviceOwner, "raven:") && !ownership.Owns(env.cluster, p.Tags) && !ownership.Owns("other", p.Tags) {
			problems = append(problems, fmt.Sprintf("port %s (%s) made by Raven carries no cluster tag", p.ID, p.Name))
		}
		if !ownership.Owns(env.cluster, p.Tags) || p.DeviceOwner != "raven:pod" {
			continue
		}
		o, _ := ownership.Parse(p.Tags)
		switch {
		case o.Kind == ownership.KindPool && p.DeviceID != "":
			problems = append(problems, fmt.Sprintf("port %s is claimed by %s (device_id) but still tagged as a free pool port", p.ID, p.DeviceID))
		case o.Kind == ownership.KindPod && o.UID != p.DeviceID:
			problems = append(problems, fmt.Sprintf("port %s: tags say pod %s, device_id says %q", p.ID, o.UID, p.DeviceID))
		}
		if p.DeviceID != "" {
			byDevice[p.DeviceID] = append(byDevice[p.DeviceID], p)
		}
	}
	return byDevice, problems
}

// podPortProblems checks one pod against the ports whose device_id it is, and its annotation against the
// port; announced records which pod announced each port ID, to find a port announced twice.
func podPortProblems(p corev1.Pod, ports []openstack.Port, announced map[string]string) []string {
	var problems []string
	id := p.Namespace + "/" + p.Name
	var ann annotations.Port
	ok, derr := annotations.Decode(p.Annotations, annotations.PodPort, &ann)
	if ok && derr == nil {
		if other, dup := announced[ann.ID]; dup {
			problems = append(problems, fmt.Sprintf("port %s is announced by pods %s and %s", ann.ID, other, id))
		}
		announced[ann.ID] = id
	}
	switch {
	case len(ports) != 1:
		problems = append(problems, fmt.Sprintf("pod %s has %d ports of its own in Neutron, want 1", id, len(ports)))
	case !ok || derr != nil:
		problems = append(problems, fmt.Sprintf("pod %s has no valid port annotation", id))
	default:
		q := ports[0]
		if o, _ := ownership.Parse(q.Tags); o.Kind != ownership.KindPod || o.UID != string(p.UID) || q.Name != p.Name {
			problems = append(problems, fmt.Sprintf("pod %s: port %s is not its own in Neutron (name %q, tags %v)", id, q.ID, q.Name, q.Tags))
		}
		if ann.ID != q.ID || ann.MACAddress != q.MACAddress || len(ann.FixedIPs) == 0 || len(q.FixedIPs) == 0 || ann.FixedIPs[0].IPAddress != q.FixedIPs[0].IPAddress {
			problems = append(problems, fmt.Sprintf("pod %s: annotation %s does not match port %s", id, ann.ID, q.ID))
		}
	}
	return problems
}

// ownerProblems checks that every object of this cluster has a live owner, and that no untagged object
// carries Raven's marker.
func (s *clusterState) ownerProblems() []string {
	var problems []string
	marker := "raven " + "raven.cluster=" + env.cluster + " "
	check := func(what, id, descr string, tags []string) {
		o, ok := ownership.Parse(tags)
		if !ok || o.Cluster != env.cluster {
			if strings.HasPrefix(descr, marker) {
				problems = append(problems, fmt.Sprintf("%s %s carries this cluster's marker but not its tags", what, id))
			}
			return
		}
		switch o.Kind {
		case ownership.KindService:
			if !s.liveSvc[o.UID] {
				problems = append(problems, fmt.Sprintf("%s %s leaked for gone service %s", what, id, o.Name))
			}
		case ownership.KindNamespace:
			if !s.liveNS[o.UID] {
				problems = append(problems, fmt.Sprintf("%s %s leaked for gone namespace %s", what, id, o.Name))
			}
		}
	}
	for _, p := range s.ports {
		check("port", p.ID, p.Description, p.Tags)
	}
	for _, n := range s.networks {
		check("network", n.ID, n.Description, n.Tags)
	}
	for _, n := range s.subnets {
		check("subnet", n.ID, n.Description, n.Tags)
	}
	for _, f := range s.fips {
		check("floating IP", f.FloatingIP, f.Description, f.Tags)
	}
	for _, lb := range s.lbs {
		check("load balancer", lb.ID, "", lb.Tags)
	}
	return problems
}

// SIGKILL Raven at random moments during a burst of pod creates and deletes, restart it each time.
func TestChaosKillsDuringBurst(t *testing.T) {
	ensureRaven(t)
	ns := newNamespace(t)
	namespaceSubnet(t, ns)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var wg sync.WaitGroup
	ops := *chaosOps
	wg.Go(func() {
		for i := range ops {
			name := fmt.Sprintf("c-%d", i)
			if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), podSpec(name), metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
			if i%3 == 2 { // delete one in three, some right after creation
				victim := fmt.Sprintf("c-%d", rng.IntN(i+1))
				_ = env.kube.CoreV1().Pods(ns).Delete(context.Background(), victim, metav1.DeleteOptions{})
			}
			time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		}
	})
	kills := 0
	for range *chaosKills {
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		env.raven.kill()
		kills++
		startRaven(t, ravenOpts{})
	}
	wg.Wait()
	took := checkInvariant(t, 3*time.Minute)
	report(t, "kills during burst: %d pod operations, %d SIGKILLs, invariant holds %.1f s after the last operation", ops+ops/3, kills, took.Seconds())
}

// Neutron stopped for 20 s in the middle of a burst: Raven says not ready, does not crash, and catches up.
func TestChaosNeutronDown(t *testing.T) {
	r := ensureRaven(t)
	ns := newNamespace(t)
	namespaceSubnet(t, ns)
	createPods(t, ns, "before", 10)
	stackService(t, "stop-service", "neutron-server")
	restarted := false
	defer func() {
		if !restarted {
			stackService(t, "start-service", "neutron-server")
		}
		eventually(t, time.Minute, "Neutron to answer again", func() (bool, error) {
			_, err := env.os.Networking.Capabilities(context.Background())
			return err == nil, nil
		})
	}()
	createPods(t, ns, "during", 10)
	eventually(t, 30*time.Second, "/readyz to report Neutron down", func() (bool, error) { return !r.ready(), nil })
	time.Sleep(15 * time.Second)
	if !r.running() {
		t.Fatal("Raven exited while Neutron was down")
	}
	stackService(t, "start-service", "neutron-server")
	restarted = true
	back := time.Now()
	eventually(t, 60*time.Second, "/readyz again", func() (bool, error) { return r.ready(), nil })
	waitAllAnnotated(t, ns, 20, 5*time.Minute)
	took := checkInvariant(t, 2*time.Minute)
	report(t, "Neutron down 20 s during a burst of 20 pods: not ready meanwhile, converged %.1f s after Neutron returned (invariant %.1f s)",
		time.Since(back).Seconds(), took.Seconds())
}

// Octavia stopped while a Service changes: Raven retries and converges when it returns.
func TestChaosOctaviaDown(t *testing.T) {
	ensureRaven(t)
	ns := newNamespace(t)
	createDeployment(t, ns, "oct", 2)
	svc := createService(t, ns, "oct", nil)
	waitMembers(t, ns, "oct", svc.UID, 2, 80)
	stackService(t, "stop-service", "octavia")
	restarted := false
	defer func() {
		if !restarted {
			stackService(t, "start-service", "octavia")
		}
	}()
	scale(t, ns, "oct", 4)
	time.Sleep(10 * time.Second)
	stackService(t, "start-service", "octavia")
	restarted = true
	back := time.Now()
	eventually(t, time.Minute, "Octavia to answer again", func() (bool, error) {
		_, err := env.os.LoadBalancing.ListLoadBalancers(context.Background(), nil)
		return err == nil, nil
	})
	waitMembers(t, ns, "oct", svc.UID, 4, 80)
	took := checkInvariant(t, time.Minute)
	report(t, "Octavia down 10 s during a scale 2→4: members right %.1f s after Octavia returned (invariant %.1f s)", time.Since(back).Seconds(), took.Seconds())
}

// kube-apiserver restarted: Raven's watches break; deletes made right after it returns are not missed.
func TestChaosAPIServerRestart(t *testing.T) {
	ensureRaven(t)
	ns := newNamespace(t)
	createPods(t, ns, "a", 6)
	waitAllAnnotated(t, ns, 6, time.Minute)
	stackService(t, "stop-service", "kube-apiserver")
	stackService(t, "start-service", "kube-apiserver")
	eventually(t, time.Minute, "the apiserver back", func() (bool, error) {
		_, err := env.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		return err == nil, nil
	})
	back := time.Now()
	for i := range 3 {
		if err := env.kube.CoreV1().Pods(ns).Delete(context.Background(), fmt.Sprintf("a-%d", i), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	createPods(t, ns, "b", 3)
	took := checkInvariant(t, 2*time.Minute)
	report(t, "kube-apiserver restarted, 3 deletes and 3 creates right after: invariant holds %.1f s after it returned (%.1f s of checking)",
		time.Since(back).Seconds(), took.Seconds())
}

// kuryr.org annotations edited or removed, and a load balancer deleted in Octavia: Raven repairs. The shipped
// admission policy refuses such edits from anyone but Raven (TestAdmissionOnlyRavenWritesPortAnnotations); they
// are made here as Raven's service account, as a cluster without the policy, or a faulty Raven, would leave them.
func TestChaosOutOfBandChanges(t *testing.T) {
	ensureRaven(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createPod(t, ns, "edited")
	createPod(t, ns, "stripped")
	good := waitAnnotated(t, ns, "edited")
	waitAnnotated(t, ns, "stripped")
	asRaven := impersonating(t, ravenIdentity)
	patch := func(name, body string) {
		if _, err := asRaven.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	patch("edited", `{"metadata":{"annotations":{"kuryr.org/neutron-port":"{not json"}}}`)
	patch("stripped", `{"metadata":{"annotations":{"kuryr.org/neutron-port":null,"kuryr.org/neutron-subnet":null}}}`)
	eventually(t, 30*time.Second, "both annotations restored", func() (bool, error) {
		_, a := portAnnotation(t, ns, "edited")
		_, b := portAnnotation(t, ns, "stripped")
		return a != nil && a.ID == good.ID && b != nil, nil
	})
	report(t, "annotation edited to garbage and another removed: both restored in %.1f s, same port", time.Since(start).Seconds())

	createDeployment(t, ns, "oob", 1)
	svc := createService(t, ns, "oob", nil)
	lb, _, _ := waitMembers(t, ns, "oob", svc.UID, 1, 80)
	// Octavia refuses while it still applies Raven's last change (PENDING_UPDATE): try until it accepts.
	eventually(t, 30*time.Second, "Octavia to accept the deletion", func() (bool, error) {
		err := env.os.LoadBalancing.DeleteLoadBalancer(ctx, lb.ID)
		return err == nil, err
	})
	start = time.Now()
	eventually(t, 90*time.Second, "a new load balancer with its member", func() (bool, error) {
		cur := serviceLB(t, svc.UID)
		return cur != nil && cur.ID != lb.ID && cur.ProvisioningStatus == "ACTIVE", nil
	})
	waitMembers(t, ns, "oob", svc.UID, 1, 80)
	report(t, "load balancer deleted in Octavia: rebuilt with its members in %.1f s", time.Since(start).Seconds())
	checkInvariant(t, time.Minute)
}

// Bad input gets a Warning event while everything else keeps flowing.
func TestChaosBadInput(t *testing.T) {
	ensureRaven(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createDeployment(t, ns, "bad", 1)
	svc := createService(t, ns, "bad", func(s *corev1.Service) {
		s.Spec.ExternalIPs = []string{"192.0.2.1", "172.24.4.77", "172.24.4.78"}
		s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "b", Port: 81, Protocol: corev1.ProtocolUDP}, {Name: "c", Port: 82, Protocol: corev1.ProtocolSCTP}}
	})
	eventually(t, 90*time.Second, "the first external IP inside the subnet as floating IP, and a warning for the others", func() (bool, error) {
		f := serviceFIPs(t, svc.UID)
		return len(f) == 1 && f[0].FloatingIP == "172.24.4.77" && hasWarning(t, ns, "bad", "ExternalIPIgnored"), nil
	})
	report(t, "externalIPs [outside, inside, inside]: one floating IP (172.24.4.77), ExternalIPIgnored warnings for the others")

	// Names at Kubernetes' limits: a 63-character namespace and a 253-character pod name.
	long := strings.Repeat("n", 63-7) + "-" + randSuffix()
	if _, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: long}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.kube.CoreV1().Namespaces().Delete(context.Background(), long, metav1.DeleteOptions{}) })
	podName := strings.Repeat("p", 253)
	longPod := podSpec("x")
	longPod.Name, longPod.Labels = podName, nil // a label value is limited to 63 characters
	if _, err := env.kube.CoreV1().Pods(long).Create(ctx, longPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ann := waitAnnotated(t, long, podName)
	if ann.Name != podName {
		t.Errorf("port name %q, want the 253-character pod name", ann.Name)
	}
	report(t, "63-character namespace and 253-character pod name: port created and named after the pod")
	checkInvariant(t, time.Minute)
}

// Raven never modifies or deletes what is not its cluster's: another cluster's port, a user's port on a
// Raven network, and both survive resyncs and the deletion of that namespace.
func TestChaosForeignObjectsUntouched(t *testing.T) {
	ensureRaven(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createPod(t, ns, "mine")
	ann := waitAnnotated(t, ns, "mine")
	other := ownership.Owner{Cluster: "other", Kind: ownership.KindPod, UID: "00000000-0000-0000-0000-000000000001", Name: ns + "/ghost"}
	foreign, err := env.os.Networking.CreatePort(ctx, openstack.PortSpec{Name: "other-cluster", NetworkID: ann.NetworkID, DeviceOwner: "raven:pod",
		DeviceID: other.UID, Tags: other.Tags()})
	if err != nil {
		t.Fatal(err)
	}
	user, err := env.os.Networking.CreatePort(ctx, openstack.PortSpec{Name: "users-own", NetworkID: ann.NetworkID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.os.Networking.DeletePort(context.Background(), foreign.ID)
		_ = env.os.Networking.DeletePort(context.Background(), user.ID)
	})
	// Two whole resyncs after the foreign ports exist, the later one past the orphan grace period: had Raven
	// wanted to sweep them, it would have.
	made := time.Now()
	from := env.raven.resyncs(t)
	eventually(t, time.Minute, "two whole resyncs past the orphan grace period", func() (bool, error) {
		return env.raven.resyncs(t) >= from+3 && time.Since(made) > 2*time.Second, nil
	})
	if err := env.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "a NetworkDelete warning (the network is in use by ports Raven does not own)", func() (bool, error) {
		evs, err := env.kube.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == ns && strings.HasPrefix(e.Reason, "NetworkDelete") {
				return true, nil
			}
		}
		return false, nil
	})
	for _, p := range []*openstack.Port{foreign, user} {
		got, err := env.os.Networking.GetPort(ctx, p.ID)
		if err != nil {
			t.Fatalf("port %s (%s) was deleted: %v", p.Name, p.ID, err)
		}
		if got.RevisionNumber != p.RevisionNumber || got.Name != p.Name || got.DeviceID != p.DeviceID {
			t.Errorf("port %s was modified: %+v", p.Name, got)
		}
	}
	// Once they are gone, the namespace finishes.
	_ = env.os.Networking.DeletePort(ctx, foreign.ID)
	_ = env.os.Networking.DeletePort(ctx, user.ID)
	eventually(t, 60*time.Second, "the namespace to go", func() (bool, error) {
		_, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	report(t, "another cluster's port and a user's port on a Raven network: untouched through resyncs; the namespace waited for them with a NetworkDelete warning")
}
