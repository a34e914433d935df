//go:build e2e

package e2e

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/raven-net/raven/pkg/annotations"
)

// sandboxState is a pod's sandbox as the runtime knows it, what a CNI call names.
type sandboxState struct {
	Namespace, Name, UID string
	Netns, ID, IfName    string
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
	name := env.vars["STACK_NODE_NAME"]
	if node == 2 {
		name = env.vars["STACK_NODE2_NAME"]
	}
	return filepath.Join(env.vars["STACK_DIR"], "nodes", name, "cni")
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

// checkDELsAfterTheDaemonWasDown is the end of TestCNIAfterTheDaemonWasDown: the late pod
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

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// The node side after its daemon was down: while raven-node is off, the plugin's STATUS says the network is
// not ready and the kubelet holds a new pod back (or its ADD fails); the pod runs once raven-node is back, and
// the DEL of a pod deleted meanwhile is retried and leaves nothing on the node; DEL is idempotent, and a DEL
// for an older sandbox of a live pod leaves that pod plugged. Every claim is checked on the node and with
// packets.
func TestCNIAfterTheDaemonWasDown(t *testing.T) {
	needDatapath(t)
	ensureRaven(t)
	cniAfterTheDaemonWasDown(t)
}
