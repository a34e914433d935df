package daemon

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// nestedDir is deploy/'s optional component for nested nodes.
const nestedDir = "../../../deploy/nested"

// component is a kustomize Component's kustomization.yaml.
type component struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Patches    []struct {
		Path string `json:"path"`
	} `json:"patches"`
}

// renderNested renders the DaemonSets of deploy/ with deploy/nested as kustomize does: the component's own
// DaemonSet as it is, and the base's raven-node with the component's strategic-merge patches applied.
func renderNested(t *testing.T) (base, chassis, nested appsv1.DaemonSet) {
	t.Helper()
	var k component
	if err := yaml.UnmarshalStrict(readDeploy(t, nestedDir, "kustomization.yaml"), &k); err != nil {
		t.Fatalf("deploy/nested/kustomization.yaml: %v", err)
	}
	if k.Kind != "Component" || k.APIVersion != "kustomize.config.k8s.io/v1alpha1" {
		t.Fatalf("deploy/nested is a %s of %s, want a kustomize Component an overlay opts into", k.Kind, k.APIVersion)
	}
	if len(k.Resources) != 1 || len(k.Patches) != 1 {
		t.Fatalf("deploy/nested has resources %v and patches %v, want its DaemonSet and raven-node's patch", k.Resources, k.Patches)
	}
	if err := yaml.UnmarshalStrict(readDeploy(t, nestedDir, k.Resources[0]), &nested); err != nil {
		t.Fatalf("deploy/nested/%s: %v", k.Resources[0], err)
	}
	rawBase := readDeploy(t, "../../../deploy/node", "daemonset.yaml")
	if err := yaml.UnmarshalStrict(rawBase, &base); err != nil {
		t.Fatal(err)
	}
	return base, patchDaemonSet(t, rawBase, k.Patches[0].Path), nested
}

// patchDaemonSet applies the component's strategic-merge patch of that path to the DaemonSet raw, which it must
// name.
func patchDaemonSet(t *testing.T, raw []byte, path string) appsv1.DaemonSet {
	t.Helper()
	var base, target metav1.PartialObjectMetadata
	patch := readDeploy(t, nestedDir, path)
	if err := yaml.Unmarshal(raw, &base); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(patch, &target); err != nil {
		t.Fatal(err)
	}
	if target.Kind != "DaemonSet" || target.Name != base.Name || target.Namespace != base.Namespace {
		t.Fatalf("the patch targets %s %s/%s, want raven-node's DaemonSet %s/%s", target.Kind, target.Namespace, target.Name, base.Namespace, base.Name)
	}
	baseJSON, err1 := yaml.YAMLToJSON(raw)
	patchJSON, err2 := yaml.YAMLToJSON(patch)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	out, err := strategicpatch.StrategicMergePatch(baseJSON, patchJSON, appsv1.DaemonSet{})
	if err != nil {
		t.Fatalf("applying %s: %v", path, err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(out, &ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

func readDeploy(t *testing.T, dir, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// deploy/nested ships raven-node for nested nodes on the kernel-VLAN path: --nested --vlan-uplink=eth0 on the
// nodes labelled raven.io/nested=true, without Open vSwitch or OVN, as the chassis DaemonSet otherwise; and
// raven-node keeps off those nodes, so that every node has exactly one of the two.
func TestShippedNestedComponent(t *testing.T) {
	base, chassis, nested := renderNested(t)
	c := nested.Spec.Template.Spec.Containers[0]
	o := parseArgs(t, c)
	if !o.Nested || o.VLANUplink != "eth0" || o.OVSDB != "" || o.OVSRunDir != "" || o.OVNRunDir != "" {
		t.Errorf("args %v: want --nested --vlan-uplink=eth0 and no Open vSwitch or OVN", c.Args)
	}
	checkMounts(t, c, o)
	checkShippedConflist(t, o)
	checkNoOVS(t, nested)
	checkMirrors(t, base, nested)
	checkPlacement(t, chassis, nested)
	patched := chassis.DeepCopy()
	patched.Spec.Template.Spec.Affinity = nil
	if !reflect.DeepEqual(*patched, base) {
		t.Error("the component changes more of raven-node than its node affinity")
	}
}

// parseArgs parses and validates the container's args as raven-node's flags.
func parseArgs(t *testing.T, c corev1.Container) *Options {
	t.Helper()
	fs := flag.NewFlagSet("raven-node", flag.ContinueOnError)
	o := BindFlags(fs)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = strings.ReplaceAll(a, "$(NODE_NAME)", "vm-1")
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the DaemonSet's args do not parse: %v", err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("the DaemonSet's args do not validate: %v", err)
	}
	return o
}

// checkNoOVS: nothing of Open vSwitch or OVN is mounted.
func checkNoOVS(t *testing.T, ds appsv1.DaemonSet) {
	t.Helper()
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if p := v.HostPath; p != nil && (strings.Contains(p.Path, "openvswitch") || strings.Contains(p.Path, "ovn")) {
			t.Errorf("volume %s mounts %s: the kernel-VLAN path has no Open vSwitch or OVN", v.Name, p.Path)
		}
	}
}

// checkMirrors: the nested DaemonSet runs raven-node as the chassis one does: same image, service account,
// priority, tolerations, host network, environment, ports, probes, resources and security context.
func checkMirrors(t *testing.T, base, nested appsv1.DaemonSet) {
	t.Helper()
	b, n := base.Spec.Template.Spec, nested.Spec.Template.Spec
	bc, nc := b.Containers[0], n.Containers[0]
	same := map[string][2]any{
		"namespace":       {base.Namespace, nested.Namespace},
		"image":           {bc.Image, nc.Image},
		"service account": {b.ServiceAccountName, n.ServiceAccountName},
		"priority class":  {b.PriorityClassName, n.PriorityClassName},
		"tolerations":     {b.Tolerations, n.Tolerations},
		"host network":    {[]any{b.HostNetwork, b.DNSPolicy}, []any{n.HostNetwork, n.DNSPolicy}},
		"env":             {bc.Env, nc.Env},
		"ports":           {bc.Ports, nc.Ports},
		"probes":          {[]any{bc.LivenessProbe, bc.ReadinessProbe}, []any{nc.LivenessProbe, nc.ReadinessProbe}},
		"resources":       {bc.Resources, nc.Resources},
		"security":        {bc.SecurityContext, nc.SecurityContext},
		"update strategy": {base.Spec.UpdateStrategy, nested.Spec.UpdateStrategy},
	}
	for what, v := range same {
		if !reflect.DeepEqual(v[0], v[1]) {
			t.Errorf("%s: raven-node-nested has %+v, raven-node %+v", what, v[1], v[0])
		}
	}
	if nested.Name != "raven-node-nested" {
		t.Errorf("the nested DaemonSet is %s, want raven-node-nested", nested.Name)
	}
}

// checkPlacement: a VM node (raven.io/nested=true) gets raven-node-nested alone, any other node raven-node
// alone; and neither DaemonSet's selector takes the other's pods.
func checkPlacement(t *testing.T, chassis, nested appsv1.DaemonSet) {
	t.Helper()
	for _, node := range []map[string]string{{"raven.io/nested": "true"}, {}, {"raven.io/nested": "false"}, {"node-role.kubernetes.io/control-plane": ""}} {
		vm := node["raven.io/nested"] == "true"
		if got := schedules(t, nested, node); got != vm {
			t.Errorf("raven-node-nested on a node labelled %v: %v, want %v", node, got, vm)
		}
		if got := schedules(t, chassis, node); got == vm {
			t.Errorf("raven-node on a node labelled %v: %v, want %v", node, got, !vm)
		}
	}
	for _, p := range []struct {
		ds   appsv1.DaemonSet
		pods map[string]string
		want bool
	}{
		{nested, nested.Spec.Template.Labels, true}, {chassis, chassis.Spec.Template.Labels, true},
		{nested, chassis.Spec.Template.Labels, false}, {chassis, nested.Spec.Template.Labels, false},
	} {
		sel, err := metav1.LabelSelectorAsSelector(p.ds.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if sel.Matches(labels.Set(p.pods)) != p.want {
			t.Errorf("%s's selector %v on pods labelled %v: want a match %v", p.ds.Name, sel, p.pods, p.want)
		}
	}
}

// schedules says whether a DaemonSet's pods may run on a node with these labels: its node selector, and one
// term of its required node affinity.
func schedules(t *testing.T, ds appsv1.DaemonSet, node map[string]string) bool {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(node)) {
		return false
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		ls := &metav1.LabelSelector{}
		for _, e := range term.MatchExpressions {
			ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
				Key: e.Key, Operator: metav1.LabelSelectorOperator(e.Operator), Values: e.Values,
			})
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			t.Fatalf("%s's node affinity: %v", ds.Name, err)
		}
		if sel.Matches(labels.Set(node)) {
			return true
		}
	}
	return false
}
