package networkpolicy

import (
	"context"
	"iter"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/controller/pod"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/internal/policy"
)

type world struct {
	np   *Reconciler
	pods *pod.Reconciler
	n    *fake.Neutron
	c    client.Client
	rec  *events.FakeRecorder
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	ctx := context.Background()
	n := fake.NewNeutron()
	cl, err := neutron.EnsureCluster(ctx, n, "c1", config.Neutron{ExternalNetwork: "public", PodSubnetPoolCIDR: "10.244.0.0/16",
		PodSubnetPrefixLength: 24, ServiceSubnetCIDR: "10.0.0.0/24"}, true)
	if err != nil {
		t.Fatal(err)
	}
	m := &neutron.Manager{N: n, C: cl, X: neutron.NewIndex()}
	if _, err := m.EnsureNamespace(ctx, "ns-uid", "ns"); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", UID: "ns-uid"}}
	c := crfake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(append(objs, ns)...).Build()
	gate := controller.NewGate()
	gate.Open()
	rec := events.NewFakeRecorder(100)
	state := &State{}
	return &world{
		np:   &Reconciler{Client: c, Neutron: m, State: state, Gate: gate, Recorder: rec, ServiceCIDR: "10.0.0.0/24"},
		pods: &pod.Reconciler{Client: c, Neutron: m, Gate: gate, Recorder: rec, Policies: state},
		n:    n, c: c, rec: rec,
	}
}

func (w *world) addPod(t *testing.T, name, app string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
	if err := w.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	w.reconcilePod(t, name)
}

func (w *world) reconcilePod(t *testing.T, name string) {
	t.Helper()
	if _, err := w.pods.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func (w *world) reconcile(t *testing.T) {
	t.Helper()
	if _, err := w.np.Reconcile(context.Background(), Key); err != nil {
		t.Fatal(err)
	}
}

// groupsOf are the keys of the groups on the pod's port ("pods" for the cluster pod group).
func (w *world) groupsOf(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, p := range w.n.Ports {
		if p.DeviceID != name+"-uid" {
			continue
		}
		for _, id := range p.SecurityGroups {
			out = append(out, w.keyOf(id))
		}
	}
	slices.Sort(out)
	return out
}

func (w *world) keyOf(id string) string {
	if slices.Contains(w.np.Neutron.C.PodSecurityGroups, id) {
		return "pods"
	}
	o, _ := ownership.Parse(w.n.SGs[id].Tags)
	return o.UID
}

func (w *world) policyGroups() map[string]*openstack.SecurityGroup {
	out := map[string]*openstack.SecurityGroup{}
	for _, g := range w.n.SGs {
		if o, ok := ownership.Parse(g.Tags); ok && o.Kind == ownership.KindPolicy {
			out[o.UID] = g
		}
	}
	return out
}

// webPolicy admits the clients on tcp 8080 (named ports: namedports_test.go).
func webPolicy() *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(8080)
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "np1"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
		}},
	}}
}

func TestPolicyLifecycle(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.addPod(t, "web", "web")
	w.addPod(t, "client", "client")
	w.reconcile(t)
	if gs := w.policyGroups(); len(gs) != 0 {
		t.Fatalf("policy groups %v without any policy", gs)
	}
	w.expectNoCalls(t, "a cluster without policies", "ListSecurityGroups")

	// A policy: its group, the peer group, the base groups; web isolated, client a peer.
	if err := w.c.Create(ctx, webPolicy()); err != nil {
		t.Fatal(err)
	}
	w.reconcile(t)
	np, peer := w.expectPolicyGroups(t)
	isolated := []string{policy.BaseEgress, policy.BaseInfra, "np-np1"}
	w.expectGroups(t, "web", isolated...)
	w.expectGroups(t, "client", peer, "pods")
	w.expectNoCalls(t, "a reconcile in step")

	// A pod created while the policy exists carries its groups from its port's first moment.
	w.addPod(t, "web2", "web")
	w.expectGroups(t, "web2", isolated...)

	// A rule removed in Neutron comes back; one added by hand goes.
	if err := w.n.DeleteSecurityGroupRule(ctx, np.Rules[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.n.CreateSecurityGroupRule(ctx, openstack.SecurityGroupRule{SecurityGroupID: np.ID, Direction: "ingress", EtherType: "IPv4", RemoteIPPrefix: "0.0.0.0/0"}); err != nil {
		t.Fatal(err)
	}
	w.reconcile(t)
	if np := w.policyGroups()["np-np1"]; len(np.Rules) != 1 || np.Rules[0].RemoteGroupID == "" {
		t.Fatalf("rules after repair %+v, want the one peer rule", np.Rules)
	}

	// The policy deleted: every port back on the pod group, every policy group gone.
	if err := w.c.Delete(ctx, webPolicy()); err != nil {
		t.Fatal(err)
	}
	w.reconcile(t)
	for _, name := range []string{"web", "web2", "client"} {
		w.expectGroups(t, name, "pods")
	}
	if gs := w.policyGroups(); len(gs) != 0 {
		t.Fatalf("groups %v left after the policy was deleted", keys(gs))
	}
}

// expectNoCalls reconciles again and fails on any Neutron write, or any call of the methods named.
func (w *world) expectNoCalls(t *testing.T, what string, methods ...string) {
	t.Helper()
	writes := w.n.Wrote()
	calls := map[string]int{}
	for _, m := range methods {
		calls[m] = w.n.Called(m)
	}
	w.reconcile(t)
	if w.n.Wrote() != writes {
		t.Fatalf("%s: a reconcile made %d Neutron writes", what, w.n.Wrote()-writes)
	}
	for _, m := range methods {
		if w.n.Called(m) != calls[m] {
			t.Fatalf("%s: a reconcile made %d %s calls", what, w.n.Called(m)-calls[m], m)
		}
	}
}

// expectPolicyGroups checks the groups of webPolicy: its own with one rule (tcp 8080 from the peer group), a
// peer group and the three base groups. It returns the policy's group and the peer's key.
func (w *world) expectPolicyGroups(t *testing.T) (*openstack.SecurityGroup, string) {
	t.Helper()
	gs := w.policyGroups()
	np := gs["np-np1"]
	if np == nil || len(np.Rules) != 1 || len(gs) != 5 {
		t.Fatalf("groups %v; want np-np1 with one rule, a peer group and three base groups", keys(gs))
	}
	r := np.Rules[0]
	want := openstack.SecurityGroupRule{ID: r.ID, SecurityGroupID: np.ID, Direction: "ingress", EtherType: "IPv4", Protocol: "tcp",
		PortRangeMin: 8080, PortRangeMax: 8080, RemoteGroupID: r.RemoteGroupID}
	peer := w.keyOf(r.RemoteGroupID)
	if r != want || !strings.HasPrefix(peer, "peer-") {
		t.Fatalf("rule %+v; want ingress tcp 8080 from the peer group", r)
	}
	return np, peer
}

// expectGroups checks the keys of the groups on a pod's port.
func (w *world) expectGroups(t *testing.T, name string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := w.groupsOf(t, name); !slices.Equal(got, want) {
		t.Fatalf("%s carries %v, want %v", name, got, want)
	}
}

func TestPodWaitsForItsPolicyGroups(t *testing.T) {
	w := newWorld(t)
	if err := w.c.Create(context.Background(), webPolicy()); err != nil {
		t.Fatal(err)
	}
	// The policy controller has not made the groups yet: the pod gets no port, so no CNI can plug it.
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "web-uid", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node-a"}}
	if err := w.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	res, err := w.pods.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}})
	if err != nil || res.RequeueAfter == 0 || len(w.groupsOf(t, "web")) != 0 {
		t.Fatalf("reconcile = %v, %v; port groups %v: want a requeue and no port yet", res, err, w.groupsOf(t, "web"))
	}
	w.reconcile(t)
	w.reconcilePod(t, "web")
	if got := w.groupsOf(t, "web"); !slices.Contains(got, "np-np1") {
		t.Fatalf("web carries %v, want its policy's group", got)
	}
}

func TestPolicyGroupQuotaIsAWarning(t *testing.T) {
	w := newWorld(t)
	w.addPod(t, "web", "web")
	if err := w.c.Create(context.Background(), webPolicy()); err != nil {
		t.Fatal(err)
	}
	w.n.Fail("CreateSecurityGroupRules", -1, openstack.NewError("neutron security_group_rule bulk_create", openstack.KindQuota, 409, "Quota exceeded for resources: [security_group_rule]"))
	res, err := w.np.Reconcile(context.Background(), Key)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("reconcile = %v, %v; want a retry later", res, err)
	}
	found := false
	for len(w.rec.Events) > 0 {
		if e := <-w.rec.Events; contains(e, "PolicyRules") && contains(e, "Quota") {
			found = true
		}
	}
	if !found {
		t.Fatal("no Warning on the policy for the refused rules")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func keys(m map[string]*openstack.SecurityGroup) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A narrowed policy whose new rule Neutron refuses must not keep admitting what it admitted before.
func TestRefusedRuleDoesNotKeepTheOldOne(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.addPod(t, "web", "web")
	w.addPod(t, "client", "client")
	np := webPolicy()
	if err := w.c.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	w.reconcile(t)
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Ingress[0].From[0].PodSelector.MatchLabels = map[string]string{"app": "other"}
	if err := w.c.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	w.n.Fail("CreateSecurityGroupRules", -1, openstack.NewError("neutron security_group_rule bulk_create", openstack.KindQuota, 409, "Quota exceeded"))
	if _, err := w.np.Reconcile(ctx, Key); err != nil {
		t.Fatal(err)
	}
	if rules := w.policyGroups()["np-np1"].Rules; len(rules) != 0 {
		t.Fatalf("rules %+v left after the new one was refused; want none (the old peer no longer admitted)", rules)
	}
}

// ordered wraps Neutron to see the order of rule and port writes: rule creates wait (up to a bound) for a
// port update to begin, and every rule delete and port update is recorded in order.
type ordered struct {
	openstack.Networking
	mu        sync.Mutex
	log       []string
	portBegun chan struct{}
	once      sync.Once
	waited    bool // a rule create gave up waiting for a port update
}

func (o *ordered) record(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, s)
}

func (o *ordered) CreateSecurityGroupRules(ctx context.Context, rs []openstack.SecurityGroupRule) ([]openstack.SecurityGroupRule, error) {
	select {
	case <-o.portBegun:
	case <-time.After(5 * time.Second):
		o.mu.Lock()
		o.waited = true
		o.mu.Unlock()
	}
	return o.Networking.CreateSecurityGroupRules(ctx, rs)
}

func (o *ordered) DeleteSecurityGroupRule(ctx context.Context, id string) error {
	o.record("delete-rule " + id)
	return o.Networking.DeleteSecurityGroupRule(ctx, id)
}

func (o *ordered) UpdatePort(ctx context.Context, id string, u openstack.PortUpdate) (*openstack.Port, error) {
	o.record("update-port " + id)
	o.once.Do(func() { close(o.portBegun) })
	return o.Networking.UpdatePort(ctx, id, u)
}

func TestRulesAndPortsGoTogether(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.addPod(t, "web", "web")
	w.addPod(t, "client", "client")
	w.addPod(t, "other", "other")
	o := &ordered{Networking: w.np.Neutron.N, portBegun: make(chan struct{})}
	w.np.Neutron.N = o

	// A new policy: the ports take their new groups while the groups' rules are being added, not after.
	if err := w.c.Create(ctx, webPolicy()); err != nil {
		t.Fatal(err)
	}
	w.reconcile(t)
	if o.waited {
		t.Fatalf("the rules of a new policy were added before any port update began (%v)", o.log)
	}
	w.expectGroups(t, "web", policy.BaseEgress, policy.BaseInfra, "np-np1")

	// The policy narrowed (its rule replaced) while another pod joins it: that pod's port update waits
	// until the old rule is gone.
	old := w.policyGroups()["np-np1"].Rules[0].ID
	np := webPolicy()
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatal(err)
	}
	port := intstr.FromInt32(9090)
	np.Spec.Ingress[0].Ports[0].Port = &port
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
	o.mu.Lock()
	o.log = nil
	o.mu.Unlock()
	w.reconcile(t)
	w.expectGroups(t, "other", policy.BaseEgress, policy.BaseInfra, "np-np1")
	deleted, joined := slices.Index(o.log, "delete-rule "+old), -1
	for i, s := range o.log {
		if strings.HasPrefix(s, "update-port ") && joined < 0 {
			joined = i
		}
	}
	if deleted < 0 || joined < 0 || joined < deleted {
		t.Fatalf("writes %v: the joining port's update must follow the narrowed rule's delete", o.log)
	}
}

// unanswered wraps Neutron so that the first port update is never answered: it returns only when its
// context ends.
type unanswered struct {
	openstack.Networking
	once sync.Once
}

func (u *unanswered) UpdatePort(ctx context.Context, id string, up openstack.PortUpdate) (*openstack.Port, error) {
	hang := false
	u.once.Do(func() { hang = true })
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return u.Networking.UpdatePort(ctx, id, up)
}

func TestAnUnansweredPortUpdateDoesNotHoldEnforcement(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.addPod(t, "web", "web")
	w.addPod(t, "client", "client")
	w.np.Neutron.N = &unanswered{Networking: w.np.Neutron.N}
	w.np.PortUpdateTimeout = 50 * time.Millisecond
	if err := w.c.Create(ctx, webPolicy()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.np.Reconcile(ctx, Key)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a reconcile whose port update went unanswered reported success")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a reconcile still waits on an unanswered port update after 5 s")
	}
	w.reconcile(t) // the next one finishes the job
	w.expectGroups(t, "web", policy.BaseEgress, policy.BaseInfra, "np-np1")
}

// drain returns the events recorded so far.
func (w *world) drain() []string {
	var out []string
	for len(w.rec.Events) > 0 {
		out = append(out, <-w.rec.Events)
	}
	return out
}

func hasEvent(events []string, subs ...string) bool {
	for _, e := range events {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(e, s)
		}
		if all {
			return true
		}
	}
	return false
}

// A pod a policy selects is never more open than the policy says: when Neutron refuses to make its groups
// (the default quota is 10 groups per project), the running pod leaves the cluster pod group all the same,
// isolated with the groups that exist, and hears about it; once the groups can be made, it gets them.
func TestAGroupThatCannotBeMadeLeavesTheRunningPodClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// refuse makes Neutron refuse the groups; the base groups exist in the second case.
		baseFirst  bool
		closedWith []string
	}{
		{name: "no group of the policy can be made", closedWith: nil},
		{name: "the base groups exist but the policy's own cannot be made", baseFirst: true, closedWith: []string{"base-egress", "base-infra"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.addPod(t, "web", "web")
			w.expectGroups(t, "web", "pods")
			if tc.baseFirst {
				other := numericPolicy()
				other.Name, other.UID = "other", "np0"
				other.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "none"}}
				if err := w.c.Create(context.Background(), other); err != nil {
					t.Fatal(err)
				}
				w.reconcile(t)
			}
			if err := w.c.Create(context.Background(), numericPolicy()); err != nil {
				t.Fatal(err)
			}
			w.n.Fail("CreateSecurityGroup", -1, openstack.NewError("neutron security_group create", openstack.KindQuota, 409, "Quota exceeded for resources: [security_group]"))
			w.np.SpareGroups = 0
			res, err := w.np.Reconcile(context.Background(), Key)
			if err != nil || res.RequeueAfter == 0 {
				t.Fatalf("reconcile = %v, %v; want a retry later", res, err)
			}
			w.expectGroups(t, "web", tc.closedWith...)
			if ev := w.drain(); !hasEvent(ev, "Warning", "PolicyGroupsMissing", "np-np1") {
				t.Fatalf("no Warning on the pod naming its missing group; events: %v", ev)
			}
			w.n.Fail("CreateSecurityGroup", 0, nil)
			w.reconcile(t)
			w.expectGroups(t, "web", "base-egress", "base-infra", "np-np1")
		})
	}
}

// A new pod whose policy group Neutron refused does not wait for ever: it gets its port with the groups that
// exist (never the cluster pod group), and a Warning says which are missing.
func TestANewPodWhosePolicyGroupIsRefusedStartsClosed(t *testing.T) {
	w := newWorld(t)
	if err := w.c.Create(context.Background(), numericPolicy()); err != nil {
		t.Fatal(err)
	}
	w.n.Fail("CreateSecurityGroup", -1, openstack.NewError("neutron security_group create", openstack.KindQuota, 409, "Quota exceeded for resources: [security_group]"))
	w.reconcile(t)
	w.drain()
	w.addPod(t, "web", "web")
	w.expectGroups(t, "web")
	if ev := w.drain(); !hasEvent(ev, "Warning", "PolicyGroupsMissing", "np-np1") {
		t.Fatalf("no Warning on the pod naming its missing group; events: %v", ev)
	}
}

// numericPolicy is webPolicy with its port by number.
func numericPolicy() *networkingv1.NetworkPolicy {
	np := webPolicy()
	port := intstr.FromInt32(8080)
	np.Spec.Ingress[0].Ports[0].Port = &port
	return np
}

// admits says whether the groups on the pod's port admit traffic in direction dir from or to addr, on any
// port (prefix rules only).
func (w *world) admits(t *testing.T, name, dir, addr string) bool {
	t.Helper()
	a := netip.MustParseAddr(addr)
	for _, r := range w.podRules(name) {
		if r.Direction != dir || r.RemoteIPPrefix == "" {
			continue
		}
		if pfx, err := netip.ParsePrefix(r.RemoteIPPrefix); err == nil && pfx.Contains(a) {
			return true
		}
	}
	return false
}

// podRules yields each rule of the groups on the pod's port, with its group. The caller holds w.n when other
// goroutines may change it.
func (w *world) podRules(name string) iter.Seq2[*openstack.SecurityGroup, openstack.SecurityGroupRule] {
	return func(yield func(*openstack.SecurityGroup, openstack.SecurityGroupRule) bool) {
		for _, p := range w.n.Ports {
			if p.DeviceID != name+"-uid" {
				continue
			}
			for _, id := range p.SecurityGroups {
				sg := w.n.SGs[id]
				if sg == nil {
					continue
				}
				for _, r := range sg.Rules {
					if !yield(sg, r) {
						return
					}
				}
			}
		}
	}
}

// An isolated pod admits its own node (kubelet probes), as Kubernetes does whatever the policies say, and
// no other node: podIngressCIDRs only says where nodes' addresses lie.
func TestAnIsolatedPodAdmitsItsOwnNodeOnly(t *testing.T) {
	node := func(name, ip string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
	}
	w := newWorld(t, node("node-a", "192.168.0.10"), node("node-b", "192.168.0.11"), node("node-far", "10.9.9.9"))
	w.np.NodeCIDRs = []string{"192.168.0.0/24"}
	w.np.State.NodeCIDRs = w.np.NodeCIDRs
	w.addPod(t, "web", "web") // on node-a
	if err := w.c.Create(context.Background(), numericPolicy()); err != nil {
		t.Fatal(err)
	}
	w.reconcile(t)
	for _, tc := range []struct {
		what, dir, addr string
		want            bool
	}{
		{"its own node in", "ingress", "192.168.0.10", true},
		{"its own node out", "egress", "192.168.0.10", true},
		{"another node in", "ingress", "192.168.0.11", false},
		{"another node's range in", "ingress", "192.168.0.99", false},
		{"a node address outside podIngressCIDRs", "ingress", "10.9.9.9", false},
	} {
		if got := w.admits(t, "web", tc.dir, tc.addr); got != tc.want {
			t.Errorf("%s (%s %s): admitted %v, want %v", tc.what, tc.dir, tc.addr, got, tc.want)
		}
	}
}
