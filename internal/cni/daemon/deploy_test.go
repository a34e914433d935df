package daemon

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/raven-net/raven/internal/cni/wire"
)

// The DaemonSet and conflist shipped in deploy/node must agree with raven-node's flags.
func TestShippedDaemonSet(t *testing.T) {
	raw, err := os.ReadFile("../../../deploy/node/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(raw, &ds); err != nil {
		t.Fatalf("deploy/node/daemonset.yaml: %v", err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	fs := flag.NewFlagSet("raven-node", flag.ContinueOnError)
	o := BindFlags(fs)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = strings.ReplaceAll(a, "$(NODE_NAME)", "node-a")
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the DaemonSet's args do not parse: %v", err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("the DaemonSet's args do not validate: %v", err)
	}
	checkMounts(t, c, o)
	checkShippedConflist(t, o)
	if raw, err := os.ReadFile("../../../VERSION"); err != nil || c.Image != "ghcr.io/raven-net/raven-node:"+strings.TrimSpace(string(raw)) {
		t.Errorf("image %q (VERSION %q, %v): want raven-node at the release VERSION names, never :latest", c.Image, raw, err)
	}
	if p := c.LivenessProbe; o.MetricsAddr == "" || p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/livez" || p.HTTPGet.Port.StrVal != "metrics" {
		t.Errorf("liveness probe %+v (metrics on %q): want /livez on the metrics port, or a wedged raven-node fails every ADD until someone notices", p, o.MetricsAddr)
	}
}

// mountOf is the volume mount of c that holds path, or nil.
func mountOf(c corev1.Container, path string) *corev1.VolumeMount {
	for i, m := range c.VolumeMounts {
		if path == m.MountPath || strings.HasPrefix(path, m.MountPath+"/") {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// checkMounts: every path the daemon uses (of those set) is on a volume of c, and the network namespaces are
// mounted with HostToContainer propagation.
func checkMounts(t *testing.T, c corev1.Container, o *Options) {
	t.Helper()
	for _, p := range []string{o.Socket, o.CNIBinDir, o.CNIConfDir, o.CNIConflist, strings.TrimPrefix(o.OVSDB, "unix:"), "/run/netns/x", "/var/run/netns/x"} {
		if p != "" && mountOf(c, p) == nil {
			t.Errorf("%s is not on a volume", p)
		}
	}
	for _, p := range []string{"/run/netns/x", "/var/run/netns/x"} {
		if m := mountOf(c, p); m != nil && (m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer) {
			t.Errorf("%s is mounted without HostToContainer propagation", m.MountPath)
		}
	}
}

// checkShippedConflist: the conflist deploy/node's configMapGenerator makes the ConfigMap raven-node-cni of
// fits the daemon's socket.
func checkShippedConflist(t *testing.T, o *Options) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("../../../deploy/node", ConflistName))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), ConflistName)
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := conflistBytes(file, o.Socket); err != nil {
		t.Errorf("the shipped conflist does not fit the DaemonSet: %v", err)
	}
	checkConflistVersions(t, raw, o)
}

// checkConflistVersions: the DaemonSet installs the shipped file under raven-node's name, and the file offers the
// versions the generated conflist does (cniVersion 1.0.0, for containerd 1.7's libcni).
func checkConflistVersions(t *testing.T, shippedRaw []byte, o *Options) {
	t.Helper()
	if filepath.Base(o.CNIConflist) != ConflistName {
		t.Errorf("--cni-conflist=%s: want the file %s, the name raven-node installs", o.CNIConflist, ConflistName)
	}
	type versions struct {
		CNIVersion  string   `json:"cniVersion"`
		CNIVersions []string `json:"cniVersions"`
	}
	var shipped, generated versions
	gen, _ := wire.Conflist(o.Socket)
	if err := json.Unmarshal(shippedRaw, &shipped); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(gen, &generated); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shipped, generated) {
		t.Errorf("the shipped conflist's versions %+v, want the generated one's %+v", shipped, generated)
	}
}
