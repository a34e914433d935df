//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/pkg/annotations"
)

// sandboxState is what the node stand-in (the container runtime here) records for a pod's sandbox.
type sandboxState struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Netns     string `json:"netns"`
	ID        string `json:"id"`
	IfName    string `json:"ifname"`
	PID       int    `json:"pid"`
}

func standinStateFile(ns, name string) string {
	return filepath.Join(env.vars["STACK_DIR"], "node-standin", podNetns(ns, name)+".json")
}

func standinState(t testing.TB, ns, name string) sandboxState {
	t.Helper()
	b, err := os.ReadFile(standinStateFile(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	var s sandboxState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// cniDel runs a CNI DEL for the sandbox through libcni, with the first node's conflist and plugin, as a
// runtime does.
func cniDel(t testing.TB, s sandboxState) error {
	t.Helper()
	c, list, rt := cniCall(t, 1, s)
	return c.DelNetworkList(context.Background(), list, rt)
}

// cniDir is the CNI directory (bin and net.d) of the stack's first or second node.
func cniDir(node int) string {
	if realNodes() {
		name := env.vars["STACK_NODE_NAME"]
		if node == 2 {
			name = env.vars["STACK_NODE2_NAME"]
		}
		return filepath.Join(env.vars["STACK_DIR"], "nodes", name, "cni")
	}
	if node == 2 {
		return filepath.Join(env.vars["STACK_DIR"], "cni2")
	}
	return filepath.Join(env.vars["STACK_DIR"], "cni")
}

// cniCall loads the conflist and plugin of a node's CNI directory (node 1 or 2) and the runtime configuration
// of the sandbox.
func cniCall(t testing.TB, node int, s sandboxState) (*libcni.CNIConfig, *libcni.NetworkConfigList, *libcni.RuntimeConf) {
	t.Helper()
	dir := cniDir(node)
	files, err := libcni.ConfFiles(filepath.Join(dir, "net.d"), []string{".conflist"})
	if err != nil || len(files) == 0 {
		t.Fatalf("no conflist in %s/net.d (%v)", dir, err)
	}
	list, err := libcni.ConfListFromFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	c := libcni.NewCNIConfigWithCacheDir([]string{filepath.Join(dir, "bin")}, t.TempDir(), nil)
	return c, list, &libcni.RuntimeConf{
		ContainerID: s.ID, NetNS: netnsPath(s.Netns), IfName: s.IfName,
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", s.Namespace}, {"K8S_POD_NAME", s.Name}, {"K8S_POD_UID", s.UID}},
	}
}

// stopStackService stops a service of the stack for the test; it runs again afterwards, whatever happened.
func stopStackService(t testing.TB, name string) {
	t.Helper()
	stackService(t, "stop-service", name)
	t.Cleanup(func() { _ = switchStackService("start-service", name) })
}

// checkDELsAfterTheDaemonWasDown is the end of TestCNIAfterTheDaemonWasDown on either kind of node: the late pod
// has one OVS port after its held or failed ADDs, DEL of the gone pod's sandbox succeeds twice, and a DEL for
// an older sandbox of the live pod stay leaves it plugged and answering.
func checkDELsAfterTheDaemonWasDown(t *testing.T, nsName string, stay, late *annotations.Port, gone sandboxState) {
	t.Helper()
	if n := count(ovsPorts(t), tapOf(late.ID)); n != 1 {
		t.Errorf("the late pod has %d OVS ports after its failed and retried ADDs, want 1", n)
	}
	for i := range 2 {
		if err := cniDel(t, gone); err != nil {
			t.Errorf("DEL %d of a gone pod's sandbox: %v", i+1, err)
		}
	}
	older := sandboxOf(t, nsName, "stay")
	older.ID = strings.Repeat("0", 64)
	if err := cniDel(t, older); err != nil {
		t.Errorf("DEL of an older sandbox of a live pod: %v", err)
	}
	if !contains(ovsPorts(t), tapOf(stay.ID)) {
		t.Error("a DEL for an older sandbox unplugged the live pod")
	}
	expectAnswer(t, podNetns(nsName, "late"), "tcp", net.JoinHostPort(stay.FixedIPs[0].IPAddress, "80"), "stay")
}

// forgetSandbox does what a runtime that lost a sandbox leaves done: its server, state and namespace are
// gone, and no DEL was run.
func forgetSandbox(t testing.TB, s sandboxState) {
	t.Helper()
	if s.PID > 0 {
		_ = syscall.Kill(s.PID, syscall.SIGKILL)
	}
	if err := os.Remove(standinStateFile(s.Namespace, s.Name)); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "del", s.Netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v: %s", s.Netns, err, out)
	}
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// standinRetried says the node stand-in has logged a failed attempt at the pod's sandbox.
func standinRetried(ns, name string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(env.vars["STACK_DIR"], "logs/node-standin.log"))
	if err != nil {
		return false, err
	}
	return strings.Contains(string(b), `"Retrying pod" pod="`+ns+"/"+name+`"`), nil
}

// The node side after its daemon was down: an ADD that failed while raven-node was stopped succeeds when the
// runtime retries; the attachment of a pod that the runtime forgot while the daemon was down is removed by
// GC (OVS port and veth); DEL is idempotent (twice for a gone pod), and a DEL for an older sandbox of a live
// pod leaves that pod plugged. Every claim is checked on the node and with packets.
func TestCNIAfterTheDaemonWasDown(t *testing.T) {
	needDatapath(t)
	ensureRaven(t)
	if realNodes() {
		cniAfterTheDaemonWasDownOnRealNodes(t)
		return
	}
	ctx := context.Background()
	nsName := newNamespace(t)
	anns := createServingPods(t, nsName, "stay", "gone")
	stay, gone := anns["stay"], anns["gone"]
	goneSandbox := standinState(t, nsName, "gone")
	stayAddr := net.JoinHostPort(stay.FixedIPs[0].IPAddress, "80")

	stopStackService(t, "raven-node")
	// ADD fails while the daemon is down; the runtime retries it.
	if _, err := env.kube.CoreV1().Pods(nsName).Create(ctx, servingPod("late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the stand-in to retry the late pod's failed ADD", func() (bool, error) { return standinRetried(nsName, "late") })

	// The runtime forgets the gone pod while the daemon is down: its sandbox state, server and namespace go,
	// without a DEL. Only GC can remove its OVS port now.
	stopStackService(t, "node-standin")
	if err := env.kube.CoreV1().Pods(nsName).Delete(ctx, "gone", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	forgetSandbox(t, goneSandbox)
	if !contains(ovsPorts(t), tapOf(gone.ID)) {
		t.Fatal("the forgotten pod's OVS port is already gone: GC would not be tested")
	}

	stackService(t, "start-service", "raven-node")
	stackService(t, "start-service", "node-standin") // its start-up runs GC with the sandboxes it still knows
	waitPodReady(t, nsName, "late", 3*time.Minute)
	_, late := portAnnotation(t, nsName, "late")
	expectAnswer(t, podNetns(nsName, "stay"), "tcp", net.JoinHostPort(late.FixedIPs[0].IPAddress, "80"), "late")
	expectAnswer(t, podNetns(nsName, "late"), "udp", stayAddr, "stay")
	eventually(t, time.Minute, "GC to remove the forgotten pod's OVS port", func() (bool, error) {
		return !contains(ovsPorts(t), tapOf(gone.ID)), nil
	})
	if _, err := netlink.LinkByName(tapOf(gone.ID)); err == nil {
		t.Errorf("the host end %s of the forgotten pod's veth is left", tapOf(gone.ID))
	}
	checkDELsAfterTheDaemonWasDown(t, nsName, stay, late, goneSandbox)
	if _, err := os.Stat(filepath.Join("/var/run/netns", goneSandbox.Netns)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the forgotten pod's namespace %s is still there", goneSandbox.Netns)
	}
}
