//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/raven-net/raven/pkg/annotations"
)

// Raven runs as an unprivileged user bound only to the ClusterRole and the leader election Role of
// deploy/rbac.yaml: it does all its work, and reading Secrets is forbidden.
func TestLeastPrivilegeClusterRole(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(env.repo, "deploy/rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	var lease rbacv1.Role
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var probe struct{ Kind string }
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			t.Fatal(err)
		}
		switch probe.Kind {
		case "ClusterRole":
			err = yaml.Unmarshal(doc, &role)
		case "Role":
			err = yaml.Unmarshal(doc, &lease)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(role.Rules) == 0 || len(lease.Rules) == 0 {
		t.Fatal("deploy/rbac.yaml lacks the ClusterRole or the leader election Role")
	}
	bindUnprivileged(t, &role)
	bindUnprivilegedIn(t, &lease)

	r := startRaven(t, ravenOpts{kubeconfig: env.vars["STACK_UNPRIVILEGED_KUBECONFIG"],
		args: []string{"--leader-elect", "--leader-election-namespace=" + lease.Namespace}})
	ns := newNamespace(t)
	createDeployment(t, ns, "rbac", 2)
	svc := createService(t, ns, "rbac", nil)
	waitAllAnnotated(t, ns, 2, 60*time.Second)
	waitMembers(t, ns, "rbac", svc.UID, 2, 80)
	checkOnePortPerPod(t, ns)

	cfg, err := clientcmd.BuildConfigFromFlags("", env.vars["STACK_UNPRIVILEGED_KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	unpriv, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unpriv.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing secrets with Raven's role: %v, want Forbidden", err)
	}
	// RBAC denials name the user; "forbidden" alone also covers writes into a namespace being deleted.
	if l := tail(r.logPath, 400); strings.Contains(l, `forbidden: User \"`+unprivilegedUser+`\"`) {
		t.Errorf("Raven hit a forbidden call with its own role:\n%s", grepLines(l, "forbidden: user"))
	}
	r.stop()
}

// Failover as an operator runs it: the installed Deployment scaled to two replicas, one on each node labelled
// control-plane; the leader's container is killed (SIGKILL) during a burst of pod creates. A replica takes the
// Lease once it runs out, never two at once, and finishes: every pod has exactly one port.
func TestLeaderFailoverDuringBurst(t *testing.T) {
	if !realNodes() {
		t.Skip("the installed Deployment needs real nodes")
	}
	ensureRaven(t)
	node1, node2 := env.vars["STACK_NODE_NAME"], env.vars["STACK_NODE2_NAME"]
	kubectl(t, "label", "node", node2, "node-role.kubernetes.io/control-plane=", "--overwrite")
	t.Cleanup(func() {
		// Nothing, then the harness's one replica on node-1 again at the next start.
		if err := stopInstalled(); err != nil {
			t.Error(err)
		}
		env.raven = nil
		kubectl(t, "label", "node", node2, "node-role.kubernetes.io/control-plane-")
	})
	kubectl(t, "-n", "raven-system", "scale", "deployment/raven", "--replicas=2")
	kubectl(t, "-n", "raven-system", "rollout", "status", "deployment/raven", "--timeout=2m")
	leader, standby := leaderAndStandby(t, installedOn(t, node1), installedOn(t, node2))
	env.raven = leader
	t.Logf("the replica on %s leads, the one on %s stands by", leader.node, standby.node)
	ns := newNamespace(t)
	namespaceSubnet(t, ns)
	const n = 40
	done := make(chan struct{})
	go func() { createPods(t, ns, "burst", n); close(done) }()
	eventually(t, time.Minute, "the leader to have annotated a pod of the burst", func() (bool, error) {
		return anyAnnotated(ns)
	})
	if _, err := leader.signal(syscall.SIGKILL, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	<-done
	// The Lease of a killed leader runs out (8 s here); then the standby, or the killed replica that the
	// kubelet restarted meanwhile, takes it: whichever asks first.
	eventually(t, 60*time.Second, "a replica to take the lease", func() (bool, error) {
		a, b := standby.leading(), leader.leading()
		if a && b {
			fatalf(t, "both replicas lead at once")
		}
		switch {
		case a:
			env.raven = standby
		case b:
			env.raven = leader
		}
		return a || b, nil
	})
	t.Logf("the replica on %s led %s after the leader was killed (restarts of the killed one: %s)", env.raven.node,
		time.Since(killedAt).Round(100*time.Millisecond), kubectl(t, "-n", "raven-system", "get", "pods", "-l", ravenSelector,
			"--field-selector=spec.nodeName="+leader.node, "-o", "jsonpath={.items[*].status.containerStatuses[0].restartCount}"))
	waitAllAnnotated(t, ns, n, 90*time.Second)
	checkOnePortPerPod(t, ns)
}

// leaderAndStandby waits until one of two replicas leads and the other is ready and stands by.
func leaderAndStandby(t *testing.T, a, b *Raven) (leader, standby *Raven) {
	t.Helper()
	eventually(t, 30*time.Second, "one replica to lead and the other to stand by", func() (bool, error) {
		switch {
		case a.leading() && b.ready() && !b.leading():
			leader, standby = a, b
		case b.leading() && a.ready() && !a.leading():
			leader, standby = b, a
		}
		return leader != nil, nil
	})
	return leader, standby
}

// anyAnnotated says a pod of the namespace has its port annotation.
func anyAnnotated(ns string) (bool, error) {
	pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	for _, p := range pods.Items {
		if p.Annotations[annotations.PodPort] != "" {
			return true, err
		}
	}
	return false, err
}

// After a run the metrics endpoint serves the histograms operators alert on, with counts.
func TestMetricsAfterARun(t *testing.T) {
	r := ensureRaven(t)
	ns := newNamespace(t)
	createPods(t, ns, "m", 5)
	waitAllAnnotated(t, ns, 5, 60*time.Second)
	for _, m := range []struct{ name, label string }{
		{"raven_pod_port_latency_seconds_count", ""},
		{"raven_openstack_request_duration_seconds_count", `operation="neutron port create"`},
		{"controller_runtime_reconcile_time_seconds_count", `controller="pod"`},
		{"controller_runtime_reconcile_total", `controller="pod"`},
		{"workqueue_adds_total", `name="pod"`},
	} {
		v := r.metric(t, m.name, func(l string) bool { return strings.Contains(l, m.label) })
		t.Logf("%s{%s} = %v", m.name, m.label, v)
		if v <= 0 {
			t.Errorf("%s{%s} = %v, want > 0", m.name, m.label, v)
		}
	}
	// The pod queue's depth is exported and drains after the burst: 0 on three reads in a row, 200 ms apart
	// (a reconcile that keeps re-adding its pod would not get there).
	var exported bool
	depth := func() float64 {
		return r.metric(t, "workqueue_depth", func(l string) bool {
			if strings.Contains(l, `name="pod"`) {
				exported = true
				return true
			}
			return false
		})
	}
	zeros := 0
	eventually(t, 30*time.Second, `workqueue_depth{name="pod"} back to 0 after the burst`, func() (bool, error) {
		if depth() == 0 {
			zeros++
		} else {
			zeros = 0
		}
		time.Sleep(200 * time.Millisecond)
		return zeros >= 3, nil
	})
	if !exported {
		t.Error(`workqueue_depth{name="pod"} is not exported`)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(l), sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Raven authenticates with a clouds.yaml password against a real Keystone: a second stack with
// STACK_KEYSTONE=1, where Neutron and Octavia validate every token.
func TestKeystoneAuthenticatedRun(t *testing.T) {
	ctx := context.Background()
	vars := keystoneStack(t)
	clouds, err := os.ReadFile(vars["OS_CLIENT_CONFIG_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(clouds), "auth_type: password") {
		t.Fatalf("the keystone stack's clouds.yaml does not use password auth:\n%s", clouds)
	}
	// Without a token, Neutron refuses: the services really check.
	resp, err := http.Get(vars["NEUTRON_URL"] + "/v2.0/networks")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Neutron without a token answered %d, want 401", resp.StatusCode)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", vars["KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := startRaven(t, ravenOpts{config: vars["RAVEN_CONFIG"], kubeconfig: vars["KUBECONFIG"], second: true})
	if _, err := kube.CoreV1().Pods("default").Create(ctx, podSpec("keystone"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the pod annotated through Keystone-authenticated Neutron", func() (bool, error) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, "keystone", metav1.GetOptions{})
		return err == nil && p.Annotations["kuryr.org/neutron-port"] != "", err
	})
	if v := r.metric(t, "raven_openstack_request_duration_seconds_count", func(l string) bool { return strings.Contains(l, "keystone") }); v < 1 {
		t.Errorf("no Keystone token request seen (%v)", v)
	}
	leastPrivilege(ctx, t, vars, kube, r)
	if v := r.metric(t, "raven_openstack_request_errors_total", func(l string) bool { return strings.Contains(l, "Unauthorized") }); v != 0 {
		t.Errorf("%v requests were refused as unauthorized", v)
	}
	r.stop()

	// The same with an application credential instead of a password.
	r = startRaven(t, ravenOpts{config: vars["RAVEN_CONFIG"], kubeconfig: vars["KUBECONFIG"], second: true, args: []string{"--cloud=raven-appcred"}})
	if _, err := kube.CoreV1().Pods("default").Create(ctx, podSpec("appcred"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the pod annotated by Raven authenticated with an application credential", func() (bool, error) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, "appcred", metav1.GetOptions{})
		return err == nil && p.Annotations["kuryr.org/neutron-port"] != "", err
	})
	r.stop()
}

// leastPrivilege: on 2025.1 Raven's Keystone user holds neither admin nor the cloud-wide service role, only
// raven-port-binder of Neutron's policy override (deploy/openstack/neutron-policy.yaml), and still binds a pod's
// port to its node (binding:host_id), reads that binding back, and gives a Service the external IP it asks for
// (a floating IP's address), without a refused request.
func leastPrivilege(ctx context.Context, t *testing.T, vars map[string]string, kube kubernetes.Interface, r *Raven) {
	t.Helper()
	if vars["STACK_OPENSTACK"] == "zed" {
		t.Log("Zed's Neutron binds ports and picks floating IP addresses for admins only: Raven's user is admin there")
		return
	}
	if roles := keystoneRoles(t, vars["KEYSTONE_URL"], "raven", "raven"); slices.Contains(roles, "admin") || slices.Contains(roles, "service") || !slices.Contains(roles, "raven-port-binder") {
		t.Fatalf("Raven's user holds %v in its project; want raven-port-binder (and manager), neither admin nor service", roles)
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("the keystone stack has no node to bind a port to (%v)", err)
	}
	pod := podSpec("bound")
	pod.Spec.NodeName = nodes.Items[0].Name
	if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "fip"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "bound"}, ExternalIPs: []string{"172.24.4.71"},
		Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the bound pod annotated and the Service's floating IP at 172.24.4.71, as a user without admin", func() (bool, error) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, "bound", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s, err := kube.CoreV1().Services("default").Get(ctx, "fip", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Annotations[annotations.PodPort] != "" && strings.Contains(s.Annotations[annotations.ServiceVIP], `"floating_ip":"172.24.4.71"`), nil
	})
	if v := r.metric(t, "raven_openstack_request_errors_total", func(l string) bool { return strings.Contains(l, "Forbidden") }); v != 0 {
		t.Errorf("%v requests were refused as forbidden to Raven's user", v)
	}
	bindingSeenByRaven(ctx, t, vars, kube, pod.Spec.NodeName)
}

// bindingSeenByRaven: Raven's user sees the binding it made on the pod "bound" (Neutron hides binding:host_id
// from a plain member), so that it can tell a port bound to its node from one that is not.
func bindingSeenByRaven(ctx context.Context, t *testing.T, vars map[string]string, kube kubernetes.Interface, node string) {
	t.Helper()
	p, err := kube.CoreV1().Pods("default").Get(ctx, "bound", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ann annotations.Port
	if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &ann); !ok || err != nil {
		t.Fatalf("the bound pod's port annotation: %v", err)
	}
	var port struct {
		Port struct {
			HostID string `json:"binding:host_id"`
		}
	}
	neutronGet(t, vars["NEUTRON_URL"], keystoneToken(t, vars["KEYSTONE_URL"], "raven", "raven"), "/v2.0/ports/"+ann.ID, &port)
	if port.Port.HostID != node {
		t.Errorf("Raven's user reads binding:host_id %q on the bound pod's port, want %q", port.Port.HostID, node)
	}
}

// keystoneRoles names the roles user holds in project, as Keystone's admin sees them.
func keystoneRoles(t *testing.T, keystone, user, project string) []string {
	t.Helper()
	tok := keystoneAdminToken(t, keystone)
	var users struct{ Users []struct{ ID string } }
	keystoneGet(t, keystone, tok, "/users?name="+user, &users)
	var projects struct{ Projects []struct{ ID string } }
	keystoneGet(t, keystone, tok, "/projects?name="+project, &projects)
	if len(users.Users) != 1 || len(projects.Projects) != 1 {
		t.Fatalf("Keystone has %d users %s and %d projects %s", len(users.Users), user, len(projects.Projects), project)
	}
	var roles struct{ Roles []struct{ Name string } }
	keystoneGet(t, keystone, tok, "/projects/"+projects.Projects[0].ID+"/users/"+users.Users[0].ID+"/roles", &roles)
	var out []string
	for _, r := range roles.Roles {
		out = append(out, r.Name)
	}
	return out
}

// keystoneAdminToken is a token of the Keystone stack's admin, scoped to the admin project.
func keystoneAdminToken(t testing.TB, keystone string) string {
	t.Helper()
	return keystoneToken(t, keystone, "admin", "admin")
}

// keystoneToken is a token of the Keystone stack's user (password "secret"), scoped to project.
func keystoneToken(t testing.TB, keystone, user, project string) string {
	t.Helper()
	body := `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"` + user + `","domain":{"id":"default"},"password":"secret"}}},"scope":{"project":{"name":"` + project + `","domain":{"id":"default"}}}}}`
	resp, err := http.Post(keystone+"/auth/tokens", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("Keystone admin token: %s", resp.Status)
	}
	return resp.Header.Get("X-Subject-Token")
}

// neutronGet decodes Neutron's JSON answer to a GET of path with token into into.
func neutronGet(t testing.TB, neutron, token, path string, into any) {
	t.Helper()
	keystoneGet(t, neutron, token, path, into)
}

// keystoneGet decodes Keystone's JSON answer to a GET of path with token into into.
func keystoneGet(t testing.TB, keystone, token, path string, into any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, keystone+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("Keystone GET %s: %s: %v", path, resp.Status, err)
	}
}

// bindUnprivilegedIn binds role, in its namespace (made when missing, and left), to the unprivileged user.
// unprivilegedUser is the stack's unprivileged identity (STACK_UNPRIVILEGED_KUBECONFIG): named as Raven's service
// account, which the shipped admission policy lets write the kuryr.org annotations, with no right but those the
// test binds to it.
const unprivilegedUser = "system:serviceaccount:raven-system:raven"

func bindUnprivilegedIn(t testing.TB, role *rbacv1.Role) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: role.Namespace}}
	if _, err := env.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	role.Name = "e2e-raven-" + randSuffix()
	role.ResourceVersion = ""
	if _, err := env.kube.RbacV1().Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: unprivilegedUser}},
	}
	if _, err := env.kube.RbacV1().RoleBindings(role.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.RbacV1().RoleBindings(role.Namespace).Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = env.kube.RbacV1().Roles(role.Namespace).Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
}

// bindUnprivileged creates the ClusterRole under a fresh name and binds the stack's unprivileged user to
// it, for the rest of the test.
func bindUnprivileged(t testing.TB, role *rbacv1.ClusterRole) {
	t.Helper()
	bindUser(t, role, unprivilegedUser)
}

// bindUser creates the ClusterRole under a fresh name and binds user to it, for the rest of the test.
func bindUser(t testing.TB, role *rbacv1.ClusterRole, user string) {
	t.Helper()
	ctx := context.Background()
	role.Name = "e2e-raven-" + randSuffix()
	role.ResourceVersion = ""
	if _, err := env.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
	}
	if _, err := env.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = env.kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
}
