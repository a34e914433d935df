package networkpolicy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/policy"
)

// dbClientPolicy isolates the clients for egress and lets them out to the pods of app db on the port they name
// db.
func dbClientPolicy() *networkingv1.NetworkPolicy {
	port := intstr.FromString("db")
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "clients", UID: "np2"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
		}},
	}}
}

// dbPolicy isolates the pods of app db for ingress and admits the clients on tcp 5432.
func dbPolicy() *networkingv1.NetworkPolicy {
	np := numericPolicy()
	np.Name, np.UID = "db", "np3"
	port := intstr.FromInt32(5432)
	np.Spec.PodSelector.MatchLabels = map[string]string{"app": "db"}
	np.Spec.Ingress[0].Ports[0].Port = &port
	return np
}

// newPod makes a pod of app whose TCP port named portName is n, without reconciling it.
func (w *world) newPod(t *testing.T, name, app, portName string, n int32, created time.Time) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": app},
		CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: n}}}}}}
	if err := w.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// reconcilePodResult reconciles a pod and returns the outcome.
func (w *world) reconcilePodResult(t *testing.T, name string) reconcile.Result {
	t.Helper()
	res, err := w.pods.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The groups a pod needs are made whatever came first, the policy or the pod: a pod that waits for a group of
// its policies (one for its numbering of a named port, or a peer group for the number it gives a port another
// policy's egress names) gets it from the next policy reconcile, however many pods with a port already number
// that port otherwise.
func TestTheGroupsAWaitingPodNeedsAreMade(t *testing.T) {
	for _, tc := range []struct {
		name string
		nps  []*networkingv1.NetworkPolicy
		// before are the pods with a port when the policy comes (app web, port http at the number given).
		before map[string]int32
		// pod is the pod made afterwards.
		pod, app, port string
		number         int32
		// carries says what the pod's port must carry: a group whose key passes.
		carries func(w *world, key string) bool
	}{
		{
			name: "a policy applied before its pods", nps: []*networkingv1.NetworkPolicy{namedPolicy()},
			pod: "web80", app: "web", port: "http", number: 80,
			carries: func(w *world, key string) bool { return opensPort(w, key, 80) },
		},
		{
			name: "a rolling update renumbers the named port", nps: []*networkingv1.NetworkPolicy{namedPolicy()}, before: map[string]int32{"web-old": 80},
			pod: "web-new", app: "web", port: "http", number: 81,
			carries: func(w *world, key string) bool { return opensPort(w, key, 81) },
		},
		{
			// The database is isolated (by a policy of its own), so it waits for the peer group of its number.
			name: "a database made after the egress policy naming its port", nps: []*networkingv1.NetworkPolicy{dbClientPolicy(), dbPolicy()},
			pod: "db", app: "db", port: "db", number: 5432,
			carries: func(w *world, key string) bool {
				return strings.HasPrefix(key, "peer-") && strings.Contains(w.policyGroups()[key].Description, "port db is 5432")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			for name, n := range tc.before {
				w.addNamedPod(t, name, "web", n)
			}
			for _, np := range tc.nps {
				if err := w.c.Create(context.Background(), np); err != nil {
					t.Fatal(err)
				}
			}
			w.reconcile(t)
			w.newPod(t, tc.pod, tc.app, tc.port, tc.number, time.Now())
			if res := w.reconcilePodResult(t, tc.pod); res.RequeueAfter == 0 && len(w.groupsOf(t, tc.pod)) == 0 {
				t.Fatalf("the pod neither got a port nor waits (%v)", res)
			}
			w.reconcile(t) // the pod's creation brings the policy reconcile
			w.reconcilePod(t, tc.pod)
			got := w.groupsOf(t, tc.pod)
			if !slices.ContainsFunc(got, func(k string) bool { return tc.carries(w, k) }) {
				t.Fatalf("%s carries %v after a policy reconcile; want the group made for it (groups: %v)", tc.pod, got, keys(w.policyGroups()))
			}
		})
	}
}

// opensPort says whether the group of key is a group of np1 with an ingress rule on tcp port n.
func opensPort(w *world, key string, n int) bool {
	if policy.OwnerKey(key) != "np-np1" {
		return false
	}
	g := w.policyGroups()[key]
	return g != nil && slices.ContainsFunc(g.Rules, func(r openstack.SecurityGroupRule) bool {
		return r.Direction == "ingress" && r.Protocol == "tcp" && r.PortRangeMin == n && r.PortRangeMax == n
	})
}

// A pod that has waited long for a group of its policies says so, on the pod, naming the group and its policy;
// a pod that has just come waits quietly (the policy reconcile it brings makes the group at once).
func TestAPodWaitingForAPolicyGroupSaysWhich(t *testing.T) {
	for _, tc := range []struct {
		name    string
		created time.Time
		warned  bool
	}{
		{"a pod made an hour ago", time.Now().Add(-time.Hour), true},
		{"a pod made now", time.Now(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			if err := w.c.Create(context.Background(), numericPolicy()); err != nil {
				t.Fatal(err)
			}
			w.newPod(t, "web", "web", "http", 8080, tc.created)
			if res := w.reconcilePodResult(t, "web"); res.RequeueAfter == 0 || len(w.groupsOf(t, "web")) != 0 {
				t.Fatalf("reconcile = %v, groups %v: want the pod to wait for its policy's group", res, w.groupsOf(t, "web"))
			}
			ev := w.drain()
			if got := hasEvent(ev, "Warning", "PolicyGroupsPending", "np-np1", "NetworkPolicy ns/web"); got != tc.warned {
				t.Fatalf("a Warning naming the group np-np1 and its policy ns/web: %v, want %v; events: %v", got, tc.warned, ev)
			}
		})
	}
}
