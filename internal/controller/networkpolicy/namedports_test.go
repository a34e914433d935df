package networkpolicy

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/policy"
)

// namedPolicy is webPolicy on the port named http.
func namedPolicy() *networkingv1.NetworkPolicy {
	np := webPolicy()
	port := intstr.FromString("http")
	np.Spec.Ingress[0].Ports[0].Port = &port
	return np
}

// addNamedPod adds a pod of app whose TCP port named http is n.
func (w *world) addNamedPod(t *testing.T, name, app string, n int32) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: n}}}}}}
	if err := w.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	w.reconcilePod(t, name)
}

// policyGroupOf is the key of the one group of the pod's port that is its policy's (np1's).
func (w *world) policyGroupOf(t *testing.T, name string) string {
	t.Helper()
	var out []string
	for _, k := range w.groupsOf(t, name) {
		if policy.OwnerKey(k) == "np-np1" {
			out = append(out, k)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%s carries %v: want one group of the policy", name, w.groupsOf(t, name))
	}
	return out[0]
}

// Two pods that number the named port differently each open only their own number, in groups of their own;
// a pod made afterwards gets its number's group from its port's first moment (the pod controller resolves
// the name on the pod alone, as the policy controller does).
func TestANamedPortOpensEachPodsOwnNumber(t *testing.T) {
	w := newWorld(t)
	w.addPod(t, "client", "client")
	w.addNamedPod(t, "web80", "web", 80)
	w.addNamedPod(t, "web81", "web", 81)
	if err := w.c.Create(context.Background(), namedPolicy()); err != nil {
		t.Fatal(err)
	}
	w.reconcile(t)
	gs := w.policyGroups()
	for _, tc := range []struct {
		pod  string
		port int
	}{{"web80", 80}, {"web81", 81}} {
		key := w.policyGroupOf(t, tc.pod)
		w.expectGroups(t, tc.pod, policy.BaseEgress, policy.BaseInfra, key)
		rules := gs[key].Rules
		if len(rules) != 1 || rules[0].PortRangeMin != tc.port || rules[0].PortRangeMax != tc.port || rules[0].RemoteGroupID == "" {
			t.Fatalf("%s's group %s has rules %+v; want one, tcp %d from the clients", tc.pod, key, rules, tc.port)
		}
	}
	if w.policyGroupOf(t, "web80") == w.policyGroupOf(t, "web81") {
		t.Fatal("web80 and web81 share a group")
	}
	if _, ok := gs["np-np1"]; ok {
		t.Fatal("np-np1 made although every pod of the policy names the port")
	}
	w.addNamedPod(t, "web80b", "web", 80)
	w.expectGroups(t, "web80b", policy.BaseEgress, policy.BaseInfra, w.policyGroupOf(t, "web80"))
	w.expectNoCalls(t, "a reconcile in step")
}

// Neutron refusing the rules of the group a policy has for the pods that number its named port one way is
// reported on the policy, as for its own group.
func TestARefusedNamedPortGroupIsAWarningOnItsPolicy(t *testing.T) {
	w := newWorld(t)
	w.addNamedPod(t, "web", "web", 80)
	if err := w.c.Create(context.Background(), namedPolicy()); err != nil {
		t.Fatal(err)
	}
	w.n.Fail("CreateSecurityGroupRules", -1, openstack.NewError("neutron security_group_rule bulk_create", openstack.KindQuota, 409, "Quota exceeded for resources: [security_group_rule]"))
	if _, err := w.np.Reconcile(context.Background(), Key); err != nil {
		t.Fatal(err)
	}
	var events []string
	for len(w.rec.Events) > 0 {
		events = append(events, <-w.rec.Events)
	}
	for _, e := range events {
		if strings.Contains(e, "PolicyRules") && strings.Contains(e, "np-np1-ports-") {
			return
		}
	}
	t.Fatalf("no Warning on the policy for its named port group's refused rules; events: %v", events)
}
