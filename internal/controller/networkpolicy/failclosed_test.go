package networkpolicy

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/policy"
)

// egressPolicy isolates the pods of app web for egress and lets them out to to on tcp 443 only.
func egressPolicy(to string) *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(443)
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "np1"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: to}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
		}},
	}}
}

// outside is an address no policy of these tests lets an egress-isolated pod reach.
const outside = "203.0.113.9"

// openEgress says which group on the pod's port lets it out to outside (IPv4) or to any IPv6 address: a rule
// without a remote group whose prefix is empty (Neutron's default rules) or holds the address. "" when none.
func (w *world) openEgress(t *testing.T, name string) string {
	t.Helper()
	w.n.Lock()
	defer w.n.Unlock()
	v4 := netip.MustParseAddr(outside)
	for sg, r := range w.podRules(name) {
		if r.Direction != "egress" || r.RemoteGroupID != "" {
			continue
		}
		if r.RemoteIPPrefix == "" || r.EtherType == "IPv6" {
			return sg.Name + " (" + r.EtherType + " to anywhere)"
		}
		if pfx, err := netip.ParsePrefix(r.RemoteIPPrefix); err == nil && pfx.Contains(v4) {
			return sg.Name + " (to " + r.RemoteIPPrefix + ")"
		}
	}
	return ""
}

// expectClosed fails when one of the pods may reach outside.
func (w *world) expectClosed(t *testing.T, when string, pods ...string) {
	t.Helper()
	for _, name := range pods {
		if g := w.openEgress(t, name); g != "" {
			t.Fatalf("%s: egress-isolated pod %s carries %s, which lets it out to what its policy does not admit", when, name, g)
		}
	}
}

// requeued says whether a reconcile's outcome makes it run again soon.
func requeued(res reconcile.Result, err error) bool {
	return err != nil || (res.RequeueAfter > 0 && res.RequeueAfter <= retry)
}

var (
	unavailable = openstack.NewError("neutron security_group_rule delete", openstack.KindServer, 503, "503 Service Unavailable")
	timedOut    = openstack.NewError("neutron security_group_rule delete", openstack.KindUnavailable, 0, "context deadline exceeded")
)

// Neutron gives every new group two rules that let it out anywhere (IPv4 and IPv6). A group whose default rules
// Neutron fails to delete is never handed to a port, nor to the pod controller, however many reconciles meet
// the failure: the pods it isolates stay closed, the reconcile comes back soon, and the policy hears about it.
// Once Neutron answers again, the pods get the group, without its default rules.
func TestAGroupWhoseDefaultRulesSurviveIsNeverCarried(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"the default rules' deletes fail with a 503", unavailable},
		{"the default rules' deletes time out", timedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t)
			w.addPod(t, "web", "web")
			if err := w.c.Create(ctx, egressPolicy("10.9.0.0/16")); err != nil {
				t.Fatal(err)
			}
			w.n.Fail("DeleteSecurityGroupRule", -1, tc.err)
			for i := range 3 {
				res, err := w.np.Reconcile(ctx, Key)
				if !requeued(res, err) {
					t.Fatalf("reconcile %d = %v, %v while Neutron fails: want it to come back soon", i, res, err)
				}
				w.expectClosed(t, "Neutron failing the rule deletes", "web")
			}
			if ev := w.drain(); !hasEvent(ev, "Warning", "PolicyGroupCreate", "np-np1", "default rules") {
				t.Fatalf("no Warning on the policy for the default rules Neutron would not delete; events: %v", ev)
			}
			// A pod made meanwhile gets no group with default rules from the pod controller.
			w.addPod(t, "web2", "web")
			w.expectClosed(t, "a pod made while Neutron fails", "web2")

			w.n.Fail("DeleteSecurityGroupRule", 0, nil)
			w.reconcile(t)
			w.reconcilePod(t, "web2")
			for _, name := range []string{"web", "web2"} {
				if !slices.Contains(w.groupsOf(t, name), "np-np1") {
					t.Fatalf("%s carries %v once Neutron answers; want its policy's group", name, w.groupsOf(t, name))
				}
			}
			w.expectClosed(t, "Neutron answering again", "web", "web2")
			if !w.admits(t, "web", "egress", "10.9.1.1") {
				t.Fatal("web is not let out to the block its policy admits")
			}
		})
	}
}

// A policy narrowed while Neutron fails to delete the rule it no longer has: no port joins the group while that
// rule is in it (a pod relabelled into the policy, a pod made meanwhile), the reconcile comes back soon and the
// policy hears about it; once the rule is gone, they join.
func TestANarrowedGroupIsJoinedOnlyOnceItsStaleRulesAreGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"the stale rule's delete fails with a 503", unavailable},
		{"the stale rule's delete times out", timedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t)
			w.addPod(t, "web", "web")
			w.addPod(t, "other", "other")
			np := egressPolicy("0.0.0.0/0")
			if err := w.c.Create(ctx, np); err != nil {
				t.Fatal(err)
			}
			w.reconcile(t)
			if !w.admits(t, "web", "egress", outside) {
				t.Fatal("the wide policy does not let web out")
			}
			// Narrowed to 10.9.0.0/16, and other relabelled into it.
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
				t.Fatal(err)
			}
			np.Spec.Egress[0].To[0].IPBlock.CIDR = "10.9.0.0/16"
			if err := w.c.Update(ctx, np); err != nil {
				t.Fatal(err)
			}
			other := &corev1.Pod{}
			if err := w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "other"}, other); err != nil {
				t.Fatal(err)
			}
			other.Labels["app"] = "web"
			if err := w.c.Update(ctx, other); err != nil {
				t.Fatal(err)
			}
			w.drain()
			w.n.Fail("DeleteSecurityGroupRule", -1, tc.err)
			for i := range 2 {
				res, err := w.np.Reconcile(ctx, Key)
				if !requeued(res, err) {
					t.Fatalf("reconcile %d = %v, %v while Neutron fails: want it to come back soon", i, res, err)
				}
				w.expectClosed(t, "the stale rule still in the group", "other")
			}
			if ev := w.drain(); !hasEvent(ev, "Warning", "PolicyRules", "np-np1") {
				t.Fatalf("no Warning on the policy for the rule Neutron would not delete; events: %v", ev)
			}
			w.addPod(t, "web2", "web")
			w.expectClosed(t, "a pod made while the stale rule is in its group", "web2")

			w.n.Fail("DeleteSecurityGroupRule", 0, nil)
			w.reconcile(t)
			w.reconcilePod(t, "web2")
			for _, name := range []string{"web", "other", "web2"} {
				w.expectGroups(t, name, policy.BaseIngress, policy.BaseInfra, "np-np1")
			}
			w.expectClosed(t, "the stale rule deleted", "web", "other", "web2")
		})
	}
}
