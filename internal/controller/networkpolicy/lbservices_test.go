package networkpolicy

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/pkg/annotations"
)

// toDBPolicy isolates the pods of app web for egress and lets them out to the pods of app db on tcp 8080.
func toDBPolicy() *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(8080)
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "np1"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
		}},
	}}
}

// dbService is the Service db (clusterIP 10.0.0.20, port 80 to 8080) with an externalIP and a status ingress
// address its editor wrote, and its EndpointSlice with the ready backends: the pods of ready, by name.
func (w *world) dbService(t *testing.T, ready ...string) (*corev1.Service, *discoveryv1.EndpointSlice) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "db-uid"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.20", ClusterIPs: []string{"10.0.0.20"}, ExternalIPs: []string{"203.0.113.5"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}}}}
	name, port, yes := "http", int32(8080), true
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}}}
	for _, pod := range ready {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{w.ipOf(t, pod)}, Conditions: discoveryv1.EndpointConditions{Ready: &yes},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: pod}})
	}
	return svc, es
}

// members is db's load balancer as Octavia lists it: its listener TCP 80 sends to addrs on 8080.
func members(addrs ...string) octavia.Current {
	cur := octavia.Current{Listeners: []openstack.Listener{{ID: "l", Protocol: "TCP", ProtocolPort: 80, DefaultPoolID: "p"}},
		Pools: []openstack.Pool{{ID: "p", ListenerID: "l"}}, Members: map[string][]openstack.Member{}}
	for _, a := range addrs {
		cur.Members["p"] = append(cur.Members["p"], openstack.Member{Address: a, ProtocolPort: 8080})
	}
	return cur
}

// ipOf is the address of the pod's port.
func (w *world) ipOf(t *testing.T, name string) string {
	t.Helper()
	var p corev1.Pod
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	var port annotations.Port
	if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &port); !ok || err != nil || len(port.FixedIPs) == 0 {
		t.Fatalf("pod %s has no port (%v)", name, err)
	}
	return port.FixedIPs[0].IPAddress
}

func (w *world) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := w.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// A Service lets an egress-isolated pod out only to the addresses that lead to its load balancer: its clusterIP
// and the floating IP Raven made for it; not to an externalIP or a status ingress address anyone who edits the
// Service may write.
func TestAServiceOpensEgressOnlyToItsLoadBalancer(t *testing.T) {
	w := newWorld(t)
	w.np.LoadBalancers = &octavia.Backends{}
	w.addPod(t, "web", "web")
	w.addPod(t, "db", "db")
	svc, es := w.dbService(t, "db")
	w.create(t, svc, es, toDBPolicy())
	w.np.LoadBalancers.Observe("db-uid", members(w.ipOf(t, "db")))
	w.np.LoadBalancers.ObserveFloatingIPs("db-uid", []string{"172.24.4.60"})
	w.reconcile(t)
	for _, tc := range []struct {
		what, addr string
		want       bool
	}{
		{"its clusterIP", "10.0.0.20", true},
		{"the floating IP Raven made for it", "172.24.4.60", true},
		{"an externalIP its editor wrote", "203.0.113.5", false},
		{"a status ingress address someone else wrote", "198.51.100.7", false},
	} {
		if got := w.admits(t, "web", "egress", tc.addr); got != tc.want {
			t.Errorf("%s (%s): admitted %v, want %v", tc.what, tc.addr, got, tc.want)
		}
	}
	w.np.LoadBalancers.Forget("db-uid")
	w.reconcile(t)
	if w.admits(t, "web", "egress", "172.24.4.60") {
		t.Error("the floating IP of a load balancer that is gone is still admitted")
	}
}

// A Service port is admitted only while every backend its load balancer may send to is: the ready endpoints and
// the members Octavia still lists. A backend the client's policy forbids stays closed to it through the VIP until
// Octavia drops it, whatever the EndpointSlice says.
func TestAServiceIsJudgedByTheMembersOctaviaStillHas(t *testing.T) {
	w := newWorld(t)
	w.np.LoadBalancers = &octavia.Backends{}
	w.addPod(t, "web", "web")
	w.addPod(t, "db", "db")
	w.addPod(t, "evil", "evil")
	svc, es := w.dbService(t, "db")
	w.create(t, svc, es, toDBPolicy())
	// evil was a backend: its endpoint left the slice, but Octavia still lists it as a member.
	w.np.LoadBalancers.Observe("db-uid", members(w.ipOf(t, "db"), w.ipOf(t, "evil")))
	w.reconcile(t)
	if w.admits(t, "web", "egress", "10.0.0.20") {
		t.Fatal("the clusterIP is admitted while its load balancer may still send to a backend the policy forbids")
	}
	w.np.LoadBalancers.Observe("db-uid", members(w.ipOf(t, "db")))
	w.reconcile(t)
	if !w.admits(t, "web", "egress", "10.0.0.20") {
		t.Fatal("the clusterIP is not admitted once every member is a backend the policy admits")
	}
}

// What a load balancer serves changing brings the cluster-wide request back.
func TestALoadBalancerChangeBringsTheRequestBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lbs octavia.Backends
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := signals(lbs.Changed()).Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	lbs.ObserveFloatingIPs("db-uid", []string{"172.24.4.60"})
	if got, shutdown := q.Get(); shutdown || got != Key {
		t.Fatalf("queued %v (shut down %v), want the cluster-wide request", got, shutdown)
	}
}
