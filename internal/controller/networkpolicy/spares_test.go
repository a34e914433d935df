package networkpolicy

import (
	"context"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/internal/policy"
)

// spares are the keys of the spare groups in Neutron, with the rule count of each.
func (w *world) spares() map[string]int {
	out := map[string]int{}
	for key, g := range w.policyGroups() {
		if policy.IsSpare(key) {
			out[key] = len(g.Rules)
		}
	}
	return out
}

// spareWorld is a world that keeps spares spare groups, with the pods web and client.
func spareWorld(t *testing.T, spares int) *world {
	t.Helper()
	w := newWorld(t)
	w.np.SpareGroups = spares
	w.addPod(t, "web", "web")
	w.addPod(t, "client", "client")
	return w
}

// spareIDs are the IDs of the spare groups in Neutron.
func (w *world) spareIDs() map[string]bool {
	out := map[string]bool{}
	for key, g := range w.policyGroups() {
		if policy.IsSpare(key) {
			out[g.ID] = true
		}
	}
	return out
}

// settle reconciles until a reconcile is calm, as the requeues would, and waits for the spare refill it started.
func (w *world) settle(t *testing.T) {
	t.Helper()
	for range 5 {
		res, err := w.np.Reconcile(context.Background(), Key)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != spareCalm {
			break
		}
	}
	w.np.waitSpares()
}

func denyPolicy() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "deny", UID: "np0"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
}

func TestANewPolicyTakesSpareGroups(t *testing.T) {
	ctx := context.Background()
	w := spareWorld(t, 3)

	// No policy: no spare either.
	w.settle(t)
	if s := w.spares(); len(s) != 0 {
		t.Fatalf("spares %v without any policy", s)
	}
	// The first policy makes its groups, then the spares are made, empty.
	if err := w.c.Create(ctx, denyPolicy()); err != nil {
		t.Fatal(err)
	}
	w.settle(t)
	if s := w.spares(); len(s) != 3 || s["spare-0"]+s["spare-1"]+s["spare-2"] != 0 {
		t.Fatalf("spares %v, want spare-0 to spare-2 without rules", s)
	}
	spareIDs := w.spareIDs()

	// A policy with a peer takes two spares: its groups are the spares, not groups made for it.
	if err := w.c.Create(ctx, webPolicy()); err != nil {
		t.Fatal(err)
	}
	w.settle(t)
	np, peer := w.expectPolicyGroups2(t)
	if !spareIDs[np.ID] || !spareIDs[w.policyGroups()[peer].ID] {
		t.Fatalf("the policy's groups %s and %s are not spares taken", np.ID, w.policyGroups()[peer].ID)
	}
	if np.Name != "raven-"+w.np.Neutron.C.ID+"-np-np1" || np.Description != "NetworkPolicy ns/web" {
		t.Fatalf("taken spare named %q (%q), want the policy group's name and description", np.Name, np.Description)
	}
	w.expectGroups(t, "web", policy.BaseEgress, policy.BaseInfra, "np-np0", "np-np1")
	w.expectGroups(t, "client", peer, "pods")
	// The refill brought the spares back to three, in the slots the takes freed.
	if s := w.spares(); len(s) != 3 {
		t.Fatalf("spares %v after the refill, want three", s)
	}
	w.expectNoCalls(t, "a reconcile in step with its spares")

	// Every policy gone: the spares go too.
	for _, np := range []*networkingv1.NetworkPolicy{webPolicy(), denyPolicy()} {
		if err := w.c.Delete(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	w.settle(t)
	if gs := w.policyGroups(); len(gs) != 0 {
		t.Fatalf("groups %v left without policies", keys(gs))
	}
}

// expectPolicyGroups2 is expectPolicyGroups beside the deny policy's group (six groups in all).
func (w *world) expectPolicyGroups2(t *testing.T) (*openstack.SecurityGroup, string) {
	t.Helper()
	gs := w.policyGroups()
	np := gs["np-np1"]
	if np == nil || len(np.Rules) != 1 || gs["np-np0"] == nil {
		t.Fatalf("groups %v; want np-np0, and np-np1 with one rule", keys(gs))
	}
	peer := w.keyOf(np.Rules[0].RemoteGroupID)
	if !strings.HasPrefix(peer, "peer-") {
		t.Fatalf("rule %+v; want one from the peer group", np.Rules[0])
	}
	return np, peer
}

func TestASpareLeftHalfTakenIsNotHandedOut(t *testing.T) {
	ctx := context.Background()
	w := spareWorld(t, 1)
	if err := w.c.Create(ctx, denyPolicy()); err != nil {
		t.Fatal(err)
	}
	w.settle(t)
	// A take that failed after the rules went in: the spare still has its spare tag, and a rule.
	var spare *openstack.SecurityGroup
	for id := range w.spareIDs() {
		spare = w.n.SGs[id]
	}
	if spare == nil {
		t.Fatal("no spare made")
	}
	if _, err := w.n.CreateSecurityGroupRule(ctx, openstack.SecurityGroupRule{SecurityGroupID: spare.ID, Direction: "ingress", EtherType: "IPv4", RemoteIPPrefix: "0.0.0.0/0"}); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Create(ctx, webPolicy()); err != nil {
		t.Fatal(err)
	}
	w.settle(t)
	gs := w.policyGroups()
	if gs["np-np1"] == nil || gs["np-np1"].ID == spare.ID {
		t.Fatalf("np-np1 is %+v: the spare with a rule was handed out", gs["np-np1"])
	}
	if _, ok := w.n.SGs[spare.ID]; ok {
		t.Fatal("the spare with a rule was kept")
	}
	if s := w.spares(); len(s) != 1 || s["spare-0"] != 0 {
		t.Fatalf("spares %v, want spare-0 made again, empty", s)
	}
	w.expectGroups(t, "web", policy.BaseEgress, policy.BaseInfra, "np-np0", "np-np1")
}

func TestASpareCreateThatLostItsTagsIsFinished(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	// A spare create that never got to its tags (Raven stopped): a group of the slot's name, with Neutron's rules.
	left, err := w.n.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "raven-" + w.np.Neutron.C.ID + "-spare-0"})
	if err != nil {
		t.Fatal(err)
	}
	sg, err := policy.CreateSpare(ctx, w.n, w.np.Neutron.C.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ownership.Parse(w.n.SGs[left.ID].Tags)
	if sg.ID != left.ID || len(w.n.SGs[left.ID].Rules) != 0 || o.UID != "spare-0" {
		t.Fatalf("spare %s (%d rules, key %q), want %s finished: no rules, tagged spare-0", sg.ID, len(w.n.SGs[left.ID].Rules), o.UID, left.ID)
	}
	var named []string
	for _, g := range w.n.SGs {
		if g.Name == left.Name {
			named = append(named, g.ID)
		}
	}
	if !slices.Equal(named, []string{left.ID}) {
		t.Fatalf("groups named %s: %v, want only the one left over", left.Name, named)
	}
}

func TestAGroupNoPolicyWantsBecomesASpare(t *testing.T) {
	ctx := context.Background()
	w := spareWorld(t, 2)
	for _, np := range []*networkingv1.NetworkPolicy{denyPolicy(), webPolicy()} {
		if err := w.c.Create(ctx, np); err != nil {
			t.Fatal(err)
		}
		w.settle(t)
	}
	np, peer := w.expectPolicyGroups2(t)
	peerID := w.policyGroups()[peer].ID
	// The spares are full: the web policy took two and the refill made two more. Take one out of the way.
	spareIDs := w.spareIDs()
	for id := range spareIDs {
		if err := w.n.DeleteSecurityGroup(ctx, id); err != nil {
			t.Fatal(err)
		}
		delete(spareIDs, id)
		break
	}
	// The web policy deleted: its group and its peer's leave the ports; one becomes the missing spare, the
	// other is deleted, and no group is made.
	creates := w.n.Called("CreateSecurityGroup")
	if err := w.c.Delete(ctx, webPolicy()); err != nil {
		t.Fatal(err)
	}
	w.settle(t)
	if n := w.n.Called("CreateSecurityGroup") - creates; n != 0 {
		t.Fatalf("%d groups made after the policy went, want its group recycled", n)
	}
	w.expectGroups(t, "web", policy.BaseEgress, policy.BaseInfra, "np-np0")
	w.expectGroups(t, "client", "pods")
	got := w.spareIDs()
	recycled := ""
	for id := range got {
		if !spareIDs[id] {
			recycled = id
		}
	}
	if len(got) != 2 || (recycled != np.ID && recycled != peerID) {
		t.Fatalf("spares %v, want the one left and %s or %s recycled", got, np.ID, peerID)
	}
	if g := w.n.SGs[recycled]; len(g.Rules) != 0 || !strings.Contains(g.Name, "-spare-") {
		t.Fatalf("recycled spare %+v, want no rules and a spare's name", g)
	}
	if s := w.spares(); len(s) != 2 {
		t.Fatalf("spares %v, want two slots", s)
	}
}
