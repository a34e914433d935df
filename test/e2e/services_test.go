//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

func createDeployment(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	deploy(t, ns, name, replicas, corev1.PodSpec{
		Containers:                    []corev1.Container{{Name: "nginx", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}},
		TerminationGracePeriodSeconds: new(int64),
	})
}

// deploy creates the Deployment name of replicas pods with spec, labelled and selected by app=name.
func deploy(t testing.TB, ns, name string, replicas int32, spec corev1.PodSpec) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func scale(t testing.TB, ns, name string, replicas int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := env.kube.AppsV1().Deployments(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createService(t testing.TB, ns, name string, mutate func(*corev1.Service)) *corev1.Service {
	t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	s, err := env.kube.CoreV1().Services(ns).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func getService(t testing.TB, ns, name string) *corev1.Service {
	t.Helper()
	s, err := env.kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serviceLB returns the service's load balancer, or nil.
func serviceLB(t testing.TB, uid types.UID) *openstack.LoadBalancer {
	t.Helper()
	lbs, err := env.os.LoadBalancing.ListLoadBalancers(context.Background(),
		ownership.Owner{Cluster: env.cluster, Kind: ownership.KindService, UID: string(uid)}.Tags())
	if err != nil {
		t.Fatal(err)
	}
	// One that Octavia is still deleting (deleted out of band, or replaced) does not count.
	lbs = slices.DeleteFunc(lbs, func(lb openstack.LoadBalancer) bool { return lb.ProvisioningStatus == "PENDING_DELETE" })
	if len(lbs) > 1 {
		t.Fatalf("%d load balancers for service %s, want at most 1", len(lbs), uid)
	}
	if len(lbs) == 0 {
		return nil
	}
	return &lbs[0]
}

// readyPodIPs returns the IPs of the ready pods with app=name.
func readyPodIPs(t testing.TB, ns, name string) []string {
	t.Helper()
	pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			ips = append(ips, p.Status.PodIP)
		}
	}
	slices.Sort(ips)
	return ips
}

// waitMembers waits until the service's single pool has exactly n members, at the ready pods' IPs and port.
func waitMembers(t testing.TB, ns, name string, uid types.UID, n, port int) (lb *openstack.LoadBalancer, pool openstack.Pool, members []openstack.Member) {
	t.Helper()
	return waitMembersAt(t, ns+"/"+name, uid, func() []string { return readyPodIPs(t, ns, name) }, n, port)
}

// waitMembersAt waits until the service's single pool has exactly n members, at the addresses ips gives
// (sorted) and port.
func waitMembersAt(t testing.TB, what string, uid types.UID, ips func() []string, n, port int) (lb *openstack.LoadBalancer, pool openstack.Pool, members []openstack.Member) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 4*time.Minute, fmt.Sprintf("%d members in the pool of %s", n, what), func() (bool, error) {
		lb = serviceLB(t, uid)
		if lb == nil || lb.ProvisioningStatus != "ACTIVE" {
			return false, nil
		}
		pools, err := env.os.LoadBalancing.ListPools(ctx, lb.ID)
		if err != nil || len(pools) != 1 {
			return false, err
		}
		pool = pools[0]
		if members, err = env.os.LoadBalancing.ListMembers(ctx, pool.ID); err != nil {
			return false, err
		}
		var addrs []string
		for _, m := range members {
			if m.ProtocolPort != port {
				return false, nil
			}
			addrs = append(addrs, m.Address)
		}
		slices.Sort(addrs)
		want := ips()
		if len(members) != n || len(want) != n || !slices.Equal(addrs, want) {
			return false, nil
		}
		// Members show before Octavia has finished applying them; wait until it has (ACTIVE again).
		lb = serviceLB(t, uid)
		return lb != nil && lb.ProvisioningStatus == "ACTIVE", nil
	})
	return lb, pool, members
}

// The walkthrough of seed 004 on Octavia, followed by its external IP section and the deletion, on the main
// stack's provider (ovn when it has the datapath).
func TestServiceWalkthrough(t *testing.T) {
	shared(t)
	serviceWalkthrough(t)
}

// The same on the amphora provider, which a second stack runs (the Keystone stack: only the stack with the
// root namespace's datapath can run the ovn provider).
func TestServiceWalkthroughOnAmphora(t *testing.T) {
	useStack(t, keystoneStack(t))
	if p := env.vars["STACK_LB_PROVIDER"]; p != "amphora" {
		t.Fatalf("the second stack runs the %q provider, want amphora", p)
	}
	serviceWalkthrough(t)
}

// lbAlgorithm is the pool algorithm Raven asks the stack's provider for (no session affinity).
func lbAlgorithm() string {
	if env.vars["STACK_LB_PROVIDER"] == "ovn" {
		return "SOURCE_IP_PORT"
	}
	return "ROUND_ROBIN"
}

func serviceWalkthrough(t *testing.T) {
	ensureRaven(t)
	ns := newNamespace(t)
	createDeployment(t, ns, "demo", 3)
	svc := createService(t, ns, "demo", nil)

	lb, pool, members := waitMembers(t, ns, "demo", svc.UID, 3, 80)
	listener := checkWalkthroughLoadBalancer(t, svc, lb)

	// The annotations match Octavia.
	checkWalkthroughAnnotations(t, ns, lb, pool, listener)
	_ = members

	// An external IP inside the external subnet becomes a floating IP on the VIP.
	patchService(t, ns, "demo", `{"spec":{"externalIPs":["172.24.4.50"]}}`)
	eventually(t, 30*time.Second, "floating IP 172.24.4.50 on the VIP", func() (bool, error) {
		f := serviceFIPs(t, svc.UID)
		return len(f) == 1 && f[0].FloatingIP == "172.24.4.50" && f[0].FixedIP == svc.Spec.ClusterIP && f[0].PortID == lb.VipPortID, nil
	})
	// An address outside it is ignored with a Warning event, and the floating IP is released.
	patchService(t, ns, "demo", `{"spec":{"externalIPs":["192.0.2.7"]}}`)
	eventually(t, 30*time.Second, "the floating IP released and a Warning event", func() (bool, error) {
		return len(serviceFIPs(t, svc.UID)) == 0 && hasWarning(t, ns, "demo", "ExternalIPIgnored"), nil
	})

	// Deleting the service removes everything in OpenStack but the pods' ports.
	checkServiceDeletion(t, ns, svc, lb)
}

// checkWalkthroughLoadBalancer checks the walkthrough's load balancer: its VIP is the clusterIP, on a real
// Neutron port, with one TCP listener on 80, which it returns.
func checkWalkthroughLoadBalancer(t *testing.T, svc *corev1.Service, lb *openstack.LoadBalancer) openstack.Listener {
	t.Helper()
	ctx := context.Background()
	if lb.VipAddress != svc.Spec.ClusterIP {
		t.Errorf("VIP %s, want the clusterIP %s", lb.VipAddress, svc.Spec.ClusterIP)
	}
	listeners, err := env.os.LoadBalancing.ListListeners(ctx, lb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(listeners) != 1 || listeners[0].Protocol != "TCP" || listeners[0].ProtocolPort != 80 {
		t.Fatalf("listeners %+v, want one TCP listener on 80", listeners)
	}
	vipPort, err := env.os.Networking.GetPort(ctx, lb.VipPortID)
	if err != nil {
		t.Fatalf("the VIP port %s is not a real Neutron port: %v", lb.VipPortID, err)
	}
	if vipPort.FixedIPs[0].IPAddress != svc.Spec.ClusterIP {
		t.Errorf("VIP port address %s, want %s", vipPort.FixedIPs[0].IPAddress, svc.Spec.ClusterIP)
	}
	return listeners[0]
}

// checkWalkthroughAnnotations waits for the demo Service's annotations to list one pool of 3 members, then
// checks that they name lb, its pool and listener.
func checkWalkthroughAnnotations(t *testing.T, ns string, lb *openstack.LoadBalancer, pool openstack.Pool, listener openstack.Listener) {
	t.Helper()
	var vip annotations.VIP
	var pools []annotations.Pool
	eventually(t, 30*time.Second, "service annotations matching Octavia", func() (bool, error) {
		s := getService(t, ns, "demo")
		if ok, err := annotations.Decode(s.Annotations, annotations.ServiceVIP, &vip); !ok || err != nil {
			return false, err
		}
		if ok, err := annotations.Decode(s.Annotations, annotations.ServicePools, &pools); !ok || err != nil {
			return false, err
		}
		return len(pools) == 1 && len(pools[0].Members) == 3, nil
	})
	if vip.LoadBalancerID != lb.ID || vip.PortID != lb.VipPortID || vip.Address != lb.VipAddress {
		t.Errorf("vip annotation %+v does not match load balancer %+v", vip, lb)
	}
	if pools[0].ID != pool.ID || pools[0].ListenerID != listener.ID || pools[0].LBMethod != lbAlgorithm() {
		t.Errorf("pool annotation %+v does not match pool %s of listener %s", pools[0], pool.ID, listener.ID)
	}
}

// checkServiceDeletion deletes the demo Service and checks that its load balancer, listeners, VIP port and
// floating IP go, and the namespace's 3 pod ports stay.
func checkServiceDeletion(t *testing.T, ns string, svc *corev1.Service, lb *openstack.LoadBalancer) {
	t.Helper()
	ctx := context.Background()
	podPortsBefore := len(clusterPortsIn(t, ns))
	if err := env.kube.CoreV1().Services(ns).Delete(ctx, "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "load balancer, VIP port and floating IP gone", func() (bool, error) {
		_, lbErr := env.os.LoadBalancing.GetLoadBalancer(ctx, lb.ID)
		_, portErr := env.os.Networking.GetPort(ctx, lb.VipPortID)
		return openstack.IsNotFound(lbErr) && openstack.IsNotFound(portErr) && len(serviceFIPs(t, svc.UID)) == 0, nil
	})
	if _, err := env.os.LoadBalancing.ListListeners(ctx, lb.ID); err == nil {
		if ls, _ := env.os.LoadBalancing.ListListeners(ctx, lb.ID); len(ls) != 0 {
			t.Errorf("%d listeners survive their load balancer", len(ls))
		}
	}
	if n := len(clusterPortsIn(t, ns)); n != podPortsBefore || n != 3 {
		t.Errorf("%d pod ports after the service deletion, want the 3 from before", n)
	}
}

func TestMembersFollowReplicas(t *testing.T) {
	r := ensureRaven(t)
	ns := newNamespace(t)
	createDeployment(t, ns, "scale", 3)
	svc := createService(t, ns, "scale", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Port: 8080, TargetPort: intOrString(80)}}
	})
	waitMembers(t, ns, "scale", svc.UID, 3, 80)
	// Raven changes members through the pool's batch update (PUT /v2/lbaas/pools/ID/members), or, on the ovn
	// provider, a member delete of its own and a batch that removes none: at most one write per endpoint that
	// turns ready or leaves (scaling up, endpoints only turn ready, so n-3 writes at most; scaling down, only
	// leave). The counter is Raven's, for all Services: it is read once nothing else sends member writes.
	isBatch := func(l string) bool { return strings.Contains(l, `operation="octavia member `) && isWrite(l) }
	batches := func() float64 { return r.metric(t, "raven_openstack_request_duration_seconds_count", isBatch) }
	failed := func() float64 { return r.metric(t, "raven_openstack_request_errors_total", isBatch) }
	quiet := func() float64 {
		t.Helper()
		last := batches()
		eventually(t, 30*time.Second, "no member writes for 2s", func() (bool, error) {
			time.Sleep(2 * time.Second)
			now := batches()
			defer func() { last = now }()
			return now == last, nil
		})
		return last
	}
	failedBefore := failed()
	prev := 3
	for _, n := range []int{10, 1} {
		before := quiet()
		scale(t, ns, "scale", n)
		waitMembers(t, ns, "scale", svc.UID, n, 80)
		sent := quiet() - before
		changes := max(n-prev, prev-n)
		t.Logf("scaling from %d to %d took %v member writes", prev, n, sent)
		if sent < 1 || sent > float64(changes) {
			t.Errorf("%v member writes while scaling from %d to %d, want 1 to %d (one per endpoint that changes at most)", sent, prev, n, changes)
		}
		prev = n
	}
	// In sync, a reconcile of the Service sends no member update: poke it with a label and wait for the
	// service controller to have reconciled since.
	isService := func(l string) bool { return strings.Contains(l, `controller="service"`) }
	before, reconciles := quiet(), r.metric(t, "controller_runtime_reconcile_total", isService)
	patchService(t, ns, "scale", `{"metadata":{"labels":{"e2e-poke":"1"}}}`)
	eventually(t, 30*time.Second, "a reconcile of the poked Service", func() (bool, error) {
		return r.metric(t, "controller_runtime_reconcile_total", isService) > reconciles, nil
	})
	if sent := quiet() - before; sent != 0 {
		t.Errorf("%v member writes for a Service in sync, want 0", sent)
	}
	if f := failed() - failedBefore; f != 0 {
		t.Errorf("%v member writes failed", f)
	}
}

func TestLoadBalancerServiceGetsIngressIP(t *testing.T) {
	shared(t)
	ns := newNamespace(t)
	createDeployment(t, ns, "lb", 1)
	svc := createService(t, ns, "lb", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	var ip string
	eventually(t, 60*time.Second, "status.loadBalancer.ingress", func() (bool, error) {
		s := getService(t, ns, "lb")
		if len(s.Status.LoadBalancer.Ingress) != 1 {
			return false, nil
		}
		ip = s.Status.LoadBalancer.Ingress[0].IP
		return true, nil
	})
	fips := serviceFIPs(t, svc.UID)
	if len(fips) != 1 || fips[0].FloatingIP != ip || fips[0].FixedIP != svc.Spec.ClusterIP {
		t.Fatalf("floating IPs %+v, want one with address %s on %s", fips, ip, svc.Spec.ClusterIP)
	}
	if !strings.HasPrefix(ip, "172.24.4.") {
		t.Errorf("ingress IP %s is outside the external subnet", ip)
	}
}

func patchService(t testing.TB, ns, name, patch string) {
	t.Helper()
	if _, err := env.kube.CoreV1().Services(ns).Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func serviceFIPs(t testing.TB, uid types.UID) []openstack.FloatingIP {
	t.Helper()
	fips, err := env.os.Networking.ListFloatingIPs(context.Background(), openstack.Filter{
		Tags: ownership.Owner{Cluster: env.cluster, Kind: ownership.KindService, UID: string(uid)}.Tags()[:3]})
	if err != nil {
		t.Fatal(err)
	}
	return fips
}

func hasWarning(t testing.TB, ns, name, reasonPrefix string) bool {
	t.Helper()
	evs, err := env.kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning && e.Regarding.Name == name && strings.HasPrefix(e.Reason, reasonPrefix) {
			return true
		}
	}
	return false
}

// warnings lists Raven's Warning events about the object name in ns, as "reason: note" (not those of other
// controllers: the apiserver's clusterIP repair loop, for one, warns about Services too).
func warnings(t testing.TB, ns, name string) []string {
	t.Helper()
	evs, err := env.kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning && e.Regarding.Name == name && e.ReportingController == "raven" {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

func clusterPortsIn(t testing.TB, ns string) []openstack.Port {
	t.Helper()
	var out []openstack.Port
	for _, p := range clusterPorts(t) {
		if o, _ := ownership.Parse(p.Tags); strings.HasPrefix(o.Name, ns+"/") {
			out = append(out, p)
		}
	}
	return out
}

func intOrString(port int) intstr.IntOrString { return intstr.FromInt32(int32(port)) }
