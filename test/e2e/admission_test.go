//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/raven-net/raven/pkg/annotations"
)

// The admission policies shipped in deploy/node/admission.yaml, against the stack's API server, which installed
// them with raven-node (hack/stack-nodes.sh applies deploy/node, deploy/ includes it).

// needAdmission fails the test on a stack without raven-node: the policies are installed with it.
func needAdmission(t testing.TB) {
	t.Helper()
	if !realNodes() {
		t.Fatal("the stack runs without the node side (STACK_CNI=1): deploy/node and its admission policies are not installed")
	}
}

// impersonating is a client of the stack's API server as another identity: the admin kubeconfig impersonating it.
func impersonating(t testing.TB, as rest.ImpersonationConfig) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.vars["KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = as
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// asRavenNode is raven-node of a node: its service account, with a token bound to that node (the request's user
// extra authentication.kubernetes.io/node-name, which the API server sets from a pod's projected token), or to no
// node when node is "".
func asRavenNode(t testing.TB, node string) kubernetes.Interface {
	t.Helper()
	as := rest.ImpersonationConfig{
		UserName: "system:serviceaccount:raven-system:raven-node",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:raven-system", "system:authenticated"},
	}
	if node != "" {
		as.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	}
	return impersonating(t, as)
}

// wantRefused fails the test unless err is a refusal of what by one of the named policies.
func wantRefused(t testing.TB, err error, what string, policies ...string) {
	t.Helper()
	if err == nil {
		errorf(t, "%s: admitted, want refused by the ValidatingAdmissionPolicy %s", what, strings.Join(policies, " or "))
		return
	}
	for _, p := range policies {
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), fmt.Sprintf("ValidatingAdmissionPolicy '%s'", p)) {
			t.Logf("%s: refused: %v", what, err)
			return
		}
	}
	errorf(t, "%s: %v; want refused by the ValidatingAdmissionPolicy %s", what, err, strings.Join(policies, " or "))
}

// bindEditor makes user an editor of ns: a RoleBinding to the ClusterRole edit. The stack's
// kube-controller-manager runs no clusterrole-aggregation controller, which fills edit with the rules of the
// ClusterRoles its aggregationRule selects, so the user is bound to those as well: the rights edit has in a
// cluster, no more.
func bindEditor(t testing.TB, ns, user string) {
	t.Helper()
	ctx := context.Background()
	var roles []string
	seen := map[string]bool{}
	var add func(name string)
	add = func(name string) { // edit, and what it aggregates, transitively (view, which aggregates more)
		if seen[name] {
			return
		}
		seen[name] = true
		roles = append(roles, name)
		r, err := env.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.AggregationRule == nil {
			return
		}
		for _, sel := range r.AggregationRule.ClusterRoleSelectors {
			l, err := env.kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&sel)})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range l.Items {
				add(m.Name)
			}
		}
	}
	add("edit")
	for i, role := range roles {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("editor-%d", i)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if _, err := env.kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s is bound in %s to the ClusterRoles %v", user, ns, roles)
}

// raven-node may ask a port check (raven.io/port-check, the patch internal/cni/server's askCheck sends) on a pod
// of its own node, and nothing else: not on another node's pod, not with a token bound to no node, and no label,
// image or other annotation of any pod.
func TestAdmissionRavenNodeOnlyAsksPortChecksOnItsNode(t *testing.T) {
	shared(t)
	needAdmission(t)
	ctx := context.Background()
	ns := newNamespace(t)
	node, other := env.vars["STACK_NODE_NAME"], env.vars["STACK_NODE2_NAME"]
	if other == "" {
		other = "not-" + node // the node a token is bound to is a name: any other than the pod's
	}
	p := podSpec("on-node")
	p.Spec.NodeName = node
	if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	port := waitAnnotated(t, ns, "on-node")
	pod, err := env.kube.CoreV1().Pods(ns).Get(ctx, "on-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(c kubernetes.Interface, pt types.PatchType, body string) error {
		_, err := c.CoreV1().Pods(ns).Patch(ctx, "on-node", pt, []byte(body), metav1.PatchOptions{FieldManager: "raven-node"})
		return err
	}
	check := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, pod.UID, annotations.PodPortCheck, port.ID)

	own := asRavenNode(t, node)
	if err := patch(own, types.MergePatchType, check); err != nil {
		errorf(t, "raven-node of the pod's node asking a check of the pod's port: %v; want admitted", err)
	}
	refused := []struct {
		what   string
		client kubernetes.Interface
		pt     types.PatchType
		body   string
	}{
		{"raven-node of another node asking a port check", asRavenNode(t, other), types.MergePatchType, check},
		{"raven-node with a token bound to no node asking a port check", asRavenNode(t, ""), types.MergePatchType, check},
		{"raven-node of the pod's node changing its labels", own, types.MergePatchType, `{"metadata":{"labels":{"app":"elsewhere"}}}`},
		{"raven-node of the pod's node changing its image", own, types.StrategicMergePatchType,
			`{"spec":{"containers":[{"name":"nginx","image":"registry.invalid/raven-node-was-here"}]}}`},
		{"raven-node of the pod's node writing another annotation", own, types.MergePatchType, `{"metadata":{"annotations":{"e2e.raven.io/other":"x"}}}`},
		{"raven-node of the pod's node removing its port annotation", own, types.MergePatchType,
			fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, annotations.PodPort)},
	}
	for _, c := range refused {
		// A change of the port annotation is also raven-pod-annotations' to refuse.
		wantRefused(t, patch(c.client, c.pt, c.body), c.what, "raven-node-pods", "raven-pod-annotations")
	}

	after, err := env.kube.CoreV1().Pods(ns).Get(ctx, "on-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, now := portAnnotation(t, ns, "on-node"); now == nil || now.ID != port.ID || after.Labels["app"] != "on-node" ||
		after.Spec.Containers[0].Image != pod.Spec.Containers[0].Image || after.Annotations["e2e.raven.io/other"] != "" {
		errorf(t, "the pod changed: labels %v, image %s, annotations %v", after.Labels, after.Spec.Containers[0].Image, after.Annotations)
	}
}

// A namespace editor (the edit ClusterRole in one namespace) may not set, change or remove a pod's
// kuryr.org/neutron-port or kuryr.org/neutron-subnet, on create or update; only Raven may, so that no tenant
// points raven-node at another pod's port. The editor still creates ordinary pods and changes their labels, and
// Raven annotates them.
func TestAdmissionOnlyRavenWritesPortAnnotations(t *testing.T) {
	shared(t)
	needAdmission(t)
	ctx := context.Background()
	ns := newNamespace(t)
	user := "e2e-editor-" + randSuffix()
	bindEditor(t, ns, user)
	editor := impersonating(t, rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}})
	pods := editor.CoreV1().Pods(ns)

	// An ordinary pod; the RoleBinding reaches the API server's authorizer within moments.
	eventually(t, 30*time.Second, "the editor to create an ordinary pod", func() (bool, error) {
		_, err := pods.Create(ctx, podSpec("ordinary"), metav1.CreateOptions{})
		return err == nil, err
	})
	port := waitAnnotated(t, ns, "ordinary")
	if _, err := pods.Patch(ctx, "ordinary", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"web"}}}`), metav1.PatchOptions{}); err != nil {
		errorf(t, "the editor relabelling the annotated pod: %v; want admitted", err)
	}
	victim, err := env.kube.CoreV1().Pods(ns).Get(ctx, "ordinary", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stolen := map[string]string{ // another pod's annotations, what a tenant who can read them would write
		annotations.PodPort: victim.Annotations[annotations.PodPort], annotations.PodSubnet: victim.Annotations[annotations.PodSubnet],
	}

	// Creates that carry either annotation.
	for i, key := range []string{annotations.PodPort, annotations.PodSubnet} {
		p := podSpec(fmt.Sprintf("forged-%d", i))
		p.Annotations = map[string]string{key: stolen[key]}
		_, err := pods.Create(ctx, p, metav1.CreateOptions{})
		wantRefused(t, err, "the editor creating a pod with "+key, "raven-pod-annotations")
	}

	// Updates of the annotated pod: each annotation changed, then removed.
	for _, key := range []string{annotations.PodPort, annotations.PodSubnet} {
		for _, value := range []string{`"{}"`, "null"} {
			body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, value)
			_, err := pods.Patch(ctx, "ordinary", types.MergePatchType, []byte(body), metav1.PatchOptions{})
			wantRefused(t, err, "the editor patching "+body, "raven-pod-annotations")
		}
	}

	// An update that adds them to a pod that has none: a host-network pod, which Raven gives no port, held
	// unscheduled.
	bare := podSpec("bare")
	bare.Spec.HostNetwork = true
	bare.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "e2e.raven.io/never"}}
	if _, err := pods.Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the editor creating a host-network pod: %v", err)
	}
	for key, value := range stolen {
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
		_, err := pods.Patch(ctx, "bare", types.MergePatchType, []byte(body), metav1.PatchOptions{})
		wantRefused(t, err, "the editor adding "+key+" to a pod that has none", "raven-pod-annotations")
	}

	after, now := portAnnotation(t, ns, "ordinary")
	if now == nil || now.ID != port.ID || after.Annotations[annotations.PodSubnet] == "" {
		errorf(t, "the pod's annotations are %v, want Raven's, for port %s", after.Annotations, port.ID)
	}
	if after.Labels["tier"] != "web" {
		errorf(t, "the pod's labels are %v, want the editor's tier=web", after.Labels)
	}
}
