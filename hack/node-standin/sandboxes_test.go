package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// fakePlugin is a CNI plugin that logs every call and answers ADD with 10.99.0.5/24.
const fakePlugin = `#!/bin/sh
stdin=$(cat)
echo "$CNI_COMMAND $CNI_CONTAINERID $CNI_ARGS" >> "$(dirname "$0")/calls.log"
case "$CNI_COMMAND" in
ADD) printf '{"cniVersion":"1.1.0","ips":[{"address":"10.99.0.5/24"}]}' ;;
GC) printf '%s' "$stdin" > "$(dirname "$0")/gc.json" ;;
VERSION) printf '{"cniVersion":"1.1.0","supportedVersions":["1.0.0","1.1.0"]}' ;;
esac
`

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces under /var/run/netns (run the tests as root to cover the sandboxes)")
	}
}

func testSandboxes(t *testing.T) (*sandboxes, string) {
	t.Helper()
	dir := t.TempDir()
	bin, conf := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d")
	for _, d := range []string{bin, conf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "fake-cni"), []byte(fakePlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	list := `{"cniVersion":"1.1.0","name":"raven","plugins":[{"type":"fake-cni"}]}`
	if err := os.WriteFile(filepath.Join(conf, "10-raven.conflist"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	return &sandboxes{store: store{dir: state}, cni: newCNIRuntime(conf, bin, filepath.Join(state, "cni-cache")), self: self}, bin
}

func testPod(name string, port int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "standintest", Name: name, UID: k8stypes.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
			{ContainerPort: port}, {ContainerPort: port, Protocol: corev1.ProtocolUDP},
		}}}},
	}
}

func calls(t *testing.T, bin string) []string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(bin, "calls.log"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestSandboxLifecycle(t *testing.T) {
	needRoot(t)
	s, bin := testSandboxes(t)
	pod := testPod("web", 8080)
	t.Cleanup(func() { _ = s.removeByName(context.Background(), pod.Namespace, pod.Name) })

	ip, err := s.ensure(t.Context(), pod)
	if err != nil || ip != "10.99.0.5" {
		t.Fatalf("ensure = %q, %v", ip, err)
	}
	netnsPath := filepath.Join(netnsDir, "standintest_web")
	if err := ns.IsNSorErr(netnsPath); err != nil {
		t.Fatalf("no namespace at %s: %v", netnsPath, err)
	}
	sb, _ := s.store.load("standintest_web")
	if c := calls(t, bin); len(c) != 1 || !strings.HasPrefix(c[0], "ADD "+sb.ID) ||
		!strings.Contains(c[0], "K8S_POD_NAMESPACE=standintest;K8S_POD_NAME=web;K8S_POD_UID=uid-web;K8S_POD_INFRA_CONTAINER_ID="+sb.ID) {
		t.Errorf("plugin calls %q", c)
	}
	if !serverAlive(sb.PID, sb.ID) {
		t.Fatalf("no server process (pid %d)", sb.PID)
	}
	// The fake plugin leaves lo down; the real one sets it up.
	if err := ns.WithNetNSPath(netnsPath, loUpAndAnswering(t)); err != nil {
		t.Fatal(err)
	}

	// A second ensure keeps the sandbox.
	if ip, err := s.ensure(t.Context(), pod); err != nil || ip != "10.99.0.5" || len(calls(t, bin)) != 1 {
		t.Errorf("second ensure = %q, %v, calls %q", ip, err, calls(t, bin))
	}

	checkRemove(t, s, pod, bin, sb, netnsPath)
}

// loUpAndAnswering runs in the pod's namespace: it sets lo up (the fake plugin leaves it down; the real one
// sets it up) and checks that the pod's server answers on port 8080.
func loUpAndAnswering(t *testing.T) func(ns.NetNS) error {
	return func(ns.NetNS) error {
		lo, err := netlinksafe.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		waitListening(t, 8080)
		expectAnswers(t, "127.0.0.1", 8080, "web\n")
		return nil
	}
}

// checkRemove removes the pod's sandbox: the plugin gets a DEL, the namespace and the server go, and a
// second remove is fine.
func checkRemove(t *testing.T, s *sandboxes, pod *corev1.Pod, bin string, sb *sandbox, netnsPath string) {
	t.Helper()
	if err := s.removeByName(t.Context(), pod.Namespace, pod.Name); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, bin); len(c) != 2 || !strings.HasPrefix(c[1], "DEL "+sb.ID) {
		t.Errorf("plugin calls %q", c)
	}
	if _, err := os.Stat(netnsPath); !os.IsNotExist(err) {
		t.Errorf("namespace still at %s", netnsPath)
	}
	waitDead(t, sb)
	if err := s.removeByName(t.Context(), pod.Namespace, pod.Name); err != nil {
		t.Errorf("second remove: %v", err)
	}
}

func TestCleanupAtStart(t *testing.T) {
	needRoot(t)
	s, bin := testSandboxes(t)
	kept, gone := testPod("kept", 8090), testPod("gone", 8091)
	for _, p := range []*corev1.Pod{kept, gone} {
		t.Cleanup(func() { _ = s.removeByName(context.Background(), p.Namespace, p.Name) })
		if _, err := s.ensure(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	keptSB, _ := s.store.load("standintest_kept")
	goneSB, _ := s.store.load("standintest_gone")
	// A namespace that is not the stand-in's is never touched.
	foreign := "standintest_foreign"
	if _, err := createNetns(foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeNetns(foreign) })

	if err := s.cleanup(t.Context(), map[string]string{"standintest/kept": "uid-kept"}); err != nil {
		t.Fatal(err)
	}
	var gc struct {
		Valid []struct{ ContainerID, IfName string } `json:"cni.dev/valid-attachments"`
	}
	b, _ := os.ReadFile(filepath.Join(bin, "gc.json"))
	if err := json.Unmarshal(b, &gc); err != nil || len(gc.Valid) != 1 || gc.Valid[0].ContainerID != keptSB.ID || gc.Valid[0].IfName != "eth0" {
		t.Errorf("GC config %s (%v)", b, err)
	}
	for _, c := range []struct {
		netns string
		want  bool
	}{{"standintest_kept", true}, {"standintest_gone", false}, {foreign, true}} {
		if _, err := os.Stat(filepath.Join(netnsDir, c.netns)); (err == nil) != c.want {
			t.Errorf("namespace %s exists = %v, want %v", c.netns, err == nil, c.want)
		}
	}
	waitDead(t, goneSB)
	if !serverAlive(keptSB.PID, keptSB.ID) {
		t.Error("the kept pod's server was stopped")
	}
}

func waitListening(t *testing.T, port int) {
	t.Helper()
	for range 100 {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %d", port)
}

func waitDead(t *testing.T, sb *sandbox) {
	t.Helper()
	for range 100 {
		if !serverAlive(sb.PID, sb.ID) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("server %d of %s still runs", sb.PID, sb.Name)
}
