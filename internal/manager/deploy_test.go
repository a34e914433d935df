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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/raven-net/raven/internal/config"
)

// deployDir is the kustomize base an operator applies.
const deployDir = "../../deploy"

// kustomization is what these tests read of a kustomization.yaml.
type kustomization struct {
	Namespace          string
	Resources          []string
	ConfigMapGenerator []struct {
		Name    string
		Files   []string
		Options *generatorOptions
	} `json:"configMapGenerator"`
	GeneratorOptions *generatorOptions `json:"generatorOptions"`
}

type generatorOptions struct {
	DisableNameSuffixHash bool `json:"disableNameSuffixHash"`
}

// readKustomization reads dir's kustomization.yaml (dir relative to deploy/).
func readKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	var k kustomization
	if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, "kustomization.yaml")), &k); err != nil {
		t.Fatal(err)
	}
	return k
}

// shipped reads every document of the base's own files (deploy/node has its own test), keyed by kind, and the
// ConfigMaps its generators make (without the name suffix kustomize gives them).
func shipped(t *testing.T) map[string][][]byte {
	t.Helper()
	k := readKustomization(t, ".")
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
	for _, g := range k.ConfigMapGenerator {
		cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Data: map[string]string{}}
		cm.Name, cm.Namespace = g.Name, k.Namespace
		for _, f := range g.Files {
			key, path, ok := strings.Cut(f, "=")
			if !ok {
				key, path = filepath.Base(f), f
			}
			cm.Data[key] = string(readFile(t, path))
		}
		doc, err := yaml.Marshal(cm)
		if err != nil {
			t.Fatal(err)
		}
		docs["ConfigMap"] = append(docs["ConfigMap"], doc)
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
	for _, doc := range docs["ConfigMap"] {
		if err := yaml.Unmarshal(doc, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Name == "raven-config" {
			break
		}
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
	if !spec.HostNetwork {
		t.Error("hostNetwork is off: Raven's own pod would wait for a Neutron port that only Raven makes")
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

// Raven and raven-node run in the node's network and resolve names (Keystone's and the catalog's endpoints, the
// API server's) with the node's resolver: cluster DNS is a Service whose pods get their network from Raven, so
// ClusterFirstWithHostNet would leave them without a name server until Raven runs.
func TestShippedDNSPolicyIsTheNodes(t *testing.T) {
	for _, file := range []string{"deployment.yaml", "node/daemonset.yaml", "nested/daemonset.yaml"} {
		t.Run(file, func(t *testing.T) {
			var w struct {
				Spec struct{ Template corev1.PodTemplateSpec }
			}
			if err := yaml.Unmarshal(readFile(t, file), &w); err != nil {
				t.Fatal(err)
			}
			spec := w.Spec.Template.Spec
			if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSDefault {
				t.Errorf("hostNetwork %v, dnsPolicy %q: want the node's network and its resolver (dnsPolicy Default), which do not wait for the pod network Raven makes", spec.HostNetwork, spec.DNSPolicy)
			}
		})
	}
}

// raven-system holds raven-node, privileged in the node's network: a cluster whose Pod Security admission
// enforces baseline or restricted by default would refuse its pods unless the namespace says privileged, and says
// it for audit and warn too, so that nothing reports the DaemonSet as a violation.
func TestShippedNamespaceIsPrivileged(t *testing.T) {
	var ns corev1.Namespace
	if err := yaml.UnmarshalStrict(readFile(t, "node/namespace.yaml"), &ns); err != nil {
		t.Fatal(err)
	}
	if ns.Name != readKustomization(t, ".").Namespace {
		t.Fatalf("deploy/node/namespace.yaml holds %q, not the base's namespace", ns.Name)
	}
	for _, mode := range []string{"enforce", "audit", "warn"} {
		if l := "pod-security.kubernetes.io/" + mode; ns.Labels[l] != "privileged" {
			t.Errorf("label %s=%q: want privileged, or Pod Security admission refuses (or reports) raven-node", l, ns.Labels[l])
		}
	}
}

// A configuration applied again with a changed content rolls the pods that read it: each shipped ConfigMap is
// made by a configMapGenerator whose name suffix (a hash of the content) is kept, and every workload that mounts
// it names it, so that kustomize gives the pod template the new name.
func TestShippedConfigRollsItsPods(t *testing.T) {
	for _, tc := range []struct {
		dir, configMap string
		workloads      []string
	}{
		{".", "raven-config", []string{"deployment.yaml"}},
		{"node", "raven-node-cni", []string{"node/daemonset.yaml", "nested/daemonset.yaml"}},
	} {
		t.Run(tc.configMap, func(t *testing.T) {
			k := readKustomization(t, tc.dir)
			generated := false
			for _, g := range k.ConfigMapGenerator {
				if g.Name != tc.configMap {
					continue
				}
				generated = true
				if (g.Options != nil && g.Options.DisableNameSuffixHash) || (k.GeneratorOptions != nil && k.GeneratorOptions.DisableNameSuffixHash) {
					t.Errorf("%s is generated without its name suffix: a changed content leaves the pods as they are", tc.configMap)
				}
			}
			if !generated {
				t.Errorf("%s makes no %s with a configMapGenerator: a change to it needs a manual restart", filepath.Join("deploy", tc.dir), tc.configMap)
			}
			noPlainConfigMap(t, tc.dir, k.Resources, tc.configMap)
			for _, w := range tc.workloads {
				var obj struct {
					Spec struct{ Template corev1.PodTemplateSpec }
				}
				if err := yaml.Unmarshal(readFile(t, w), &obj); err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(obj.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
					return v.ConfigMap != nil && v.ConfigMap.Name == tc.configMap
				}) {
					t.Errorf("deploy/%s mounts no %s", w, tc.configMap)
				}
			}
		})
	}
}

// noPlainConfigMap fails t when one of the kustomization's resources in dir holds configMap as a plain
// ConfigMap, which kustomize never renames.
func noPlainConfigMap(t *testing.T, dir string, resources []string, configMap string) {
	t.Helper()
	for _, r := range resources {
		if !strings.HasSuffix(r, ".yaml") {
			continue
		}
		for _, doc := range bytes.Split(readFile(t, filepath.Join(dir, r)), []byte("\n---\n")) {
			var meta metav1.PartialObjectMetadata
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatal(err)
			}
			if meta.Kind == "ConfigMap" && meta.Name == configMap {
				t.Errorf("%s holds %s as a plain resource, which kustomize never renames", filepath.Join("deploy", dir, r), configMap)
			}
		}
	}
}
