package manager

import (
	"bytes"
	"flag"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/raven-net/raven/internal/config"
)

// deployDir is the kustomize base an operator applies.
const deployDir = "../../deploy"

// shipped reads every document of the base's own files (deploy/node has its own test), keyed by kind.
func shipped(t *testing.T) map[string][][]byte {
	t.Helper()
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(readFile(t, "kustomization.yaml"), &k); err != nil {
		t.Fatal(err)
	}
	docs := map[string][][]byte{}
	for _, r := range k.Resources {
		if !strings.HasSuffix(r, ".yaml") {
			continue
		}
		for _, doc := range bytes.Split(readFile(t, r), []byte("\n---\n")) {
			var meta struct{ Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			docs[meta.Kind] = append(docs[meta.Kind], doc)
		}
	}
	return docs
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// deployedOptions are the options the shipped Deployment runs Raven with, on a node whose address is hostIP.
func deployedOptions(t *testing.T, docs map[string][][]byte, c corev1.Container, hostIP string) config.Options {
	t.Helper()
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(docs["ConfigMap"][0], &cm); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "raven.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["raven.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("raven", flag.ContinueOnError)
	flags := config.BindFlags(fs)
	var args []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--config=") {
			a = "--config=" + file
		}
		args = append(args, strings.ReplaceAll(a, "$(HOST_IP)", hostIP))
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the Deployment's args do not parse: %v", err)
	}
	o, err := flags.Options()
	if err != nil {
		t.Fatalf("the Deployment's configuration does not validate: %v", err)
	}
	return o
}

// The shipped Deployment can run where an operator puts it: in the node's network (its own pod would wait
// for a port only it makes), on the control plane's nodes, its endpoints on the node's address only and
// its probes on them.
func TestShippedDeployment(t *testing.T) {
	docs := shipped(t)
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(docs["Deployment"][0], &d); err != nil {
		t.Fatalf("deploy/deployment.yaml: %v", err)
	}
	checkPlacement(t, &d)
	c := d.Spec.Template.Spec.Containers[0]
	const hostIP = "192.0.2.10"
	o := deployedOptions(t, docs, c, hostIP)
	checkListenAddrs(t, c, o, hostIP)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.StrVal != "health" {
			t.Errorf("probe %+v: want an HTTP probe on the health port", p)
		}
	}
	checkImage(t, c.Image, "ghcr.io/raven-net/raven")
	if !slices.Contains(o.Namespaces.Exclude, d.Namespace) {
		t.Errorf("namespaces.exclude %v leaves out %s: Raven's finalizer on its own namespace would hold that namespace's deletion after Raven is gone", o.Namespaces.Exclude, d.Namespace)
	}
	if o.ClusterID != "" {
		t.Errorf("clusterID %q is shipped: two clusters that keep it share their tags and sweep each other's objects", o.ClusterID)
	}
}

// The base holds no Secret: applying it must not replace the operator's clouds.yaml with a placeholder.
func TestShippedBaseHasNoSecret(t *testing.T) {
	if n := len(shipped(t)["Secret"]); n > 0 {
		t.Fatalf("deploy/ ships %d Secret(s); kubectl apply -k deploy/ would overwrite the operator's clouds.yaml", n)
	}
}

// Leader election's Lease is granted in Raven's own namespace only, not in every namespace.
func TestShippedLeaseRightsAreNamespaced(t *testing.T) {
	docs := shipped(t)
	for _, doc := range docs["ClusterRole"] {
		var r rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(doc, &r); err != nil {
			t.Fatal(err)
		}
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, "leases") {
				t.Errorf("ClusterRole %s grants leases in every namespace: %+v", r.Name, rule)
			}
		}
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(docs["Deployment"][0], &d); err != nil {
		t.Fatal(err)
	}
	o := deployedOptions(t, docs, d.Spec.Template.Spec.Containers[0], "192.0.2.10")
	sa := d.Spec.Template.Spec.ServiceAccountName
	if o.LeaderElection.Enabled && !leaseBound(t, docs, o.LeaderElection.Namespace, sa) {
		t.Errorf("no Role bound to %s grants the Lease in %s, the leader election namespace", sa, o.LeaderElection.Namespace)
	}
}

// leaseBound says whether a RoleBinding of ns binds the service account sa to a Role of ns that lets it
// create and update Leases.
func leaseBound(t *testing.T, docs map[string][][]byte, ns, sa string) bool {
	t.Helper()
	roles := map[string]bool{}
	for _, doc := range docs["Role"] {
		var r rbacv1.Role
		if err := yaml.UnmarshalStrict(doc, &r); err != nil {
			t.Fatal(err)
		}
		for _, rule := range r.Rules {
			roles[r.Name] = roles[r.Name] || (r.Namespace == ns && slices.Contains(rule.Resources, "leases") &&
				slices.Contains(rule.Verbs, "create") && slices.Contains(rule.Verbs, "update"))
		}
	}
	for _, doc := range docs["RoleBinding"] {
		var b rbacv1.RoleBinding
		if err := yaml.UnmarshalStrict(doc, &b); err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Subjects {
			if roles[b.RoleRef.Name] && b.Namespace == ns && s.Kind == "ServiceAccount" && s.Name == sa {
				return true
			}
		}
	}
	return false
}

// checkImage: the shipped image is repo at the release the VERSION file names, never :latest (which no
// build makes, and which would move under a running cluster).
func checkImage(t *testing.T, image, repo string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if want := repo + ":" + strings.TrimSpace(string(raw)); image != want {
		t.Errorf("image %q, want %q", image, want)
	}
}

// checkListenAddrs: metrics and probes listen on the node's address hostIP only, on the container's named
// ports.
func checkListenAddrs(t *testing.T, c corev1.Container, o config.Options, hostIP string) {
	t.Helper()
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = net.JoinHostPort(hostIP, strconv.Itoa(int(p.ContainerPort)))
	}
	for _, e := range []struct{ what, addr, port string }{{"metrics", o.MetricsAddr, "metrics"}, {"probes", o.HealthAddr, "health"}} {
		if host, _, err := net.SplitHostPort(e.addr); err != nil || host != hostIP {
			t.Errorf("%s listen on %q: want the node's address only (%s)", e.what, e.addr, hostIP)
		}
		if ports[e.port] != e.addr {
			t.Errorf("%s listen on %q, but the container's port %q is %q", e.what, e.addr, e.port, ports[e.port])
		}
	}
}

// checkPlacement: in the node's network, on the control plane's nodes, rolled without a surge.
func checkPlacement(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v, dnsPolicy %q: Raven's own pod would wait for a Neutron port that only Raven makes", spec.HostNetwork, spec.DNSPolicy)
	}
	if _, ok := spec.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok {
		t.Errorf("node selector %v: nothing keeps Raven and its cloud credentials off the workers", spec.NodeSelector)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxSurge == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() < 1 {
		t.Errorf("rolling update %+v: in the node's network a surge replica waits for ports its old one holds, and the rollout never ends; want maxSurge 0, maxUnavailable ≥ 1", ru)
	}
}

// deploy/nested is opt-in: the base neither lists it as a resource nor as a component, and what the component
// adds is in the base's namespace (a Component does not get the base's namespace: an overlay without one of its
// own applies it as written).
func TestNestedComponentIsOptional(t *testing.T) {
	var base struct {
		Namespace  string
		Resources  []string
		Components []string
	}
	if err := yaml.Unmarshal(readFile(t, "kustomization.yaml"), &base); err != nil {
		t.Fatal(err)
	}
	for _, r := range append(base.Resources, base.Components...) {
		if strings.TrimSuffix(filepath.Clean(r), "/") == "nested" {
			t.Errorf("deploy/kustomization.yaml includes %s: every cluster would get raven-node-nested and lose raven-node on VM nodes", r)
		}
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(readFile(t, "nested/kustomization.yaml"), &k); err != nil {
		t.Fatal(err)
	}
	for _, r := range k.Resources {
		var meta struct {
			Metadata struct{ Namespace string }
		}
		if err := yaml.Unmarshal(readFile(t, filepath.Join("nested", r)), &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Metadata.Namespace != base.Namespace {
			t.Errorf("deploy/nested/%s is in namespace %q, want the base's %q", r, meta.Metadata.Namespace, base.Namespace)
		}
	}
}
