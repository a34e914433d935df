//go:build e2e

package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Raven installed by hand as docs/operations.md has it, on the local stack, with the docs' commands as
// written: first the uninstall's `kubectl delete -k overlay/` takes the whole of deploy/ away (raven-node and
// raven-system with it) and must not hang; then the Install section's commands run in a directory holding the
// operator's clouds.yaml and overlay/, the stack's overlay of deploy/ (hack/stack.sh raven-overlay: the image
// tags, the configuration, one replica for the one node labelled control-plane, and where the API server is, as
// this machine has no kube-proxy). The Deployment becomes Available with the shipped RBAC, holds the Lease in
// raven-system, pods of a new namespace get ports and talk, and they keep talking while Raven and raven-node are
// rolled.
func TestInstalledFromDeploy(t *testing.T) {
	needDatapath(t)
	if !realNodes() {
		t.Skip("the install needs real nodes (kubelets running raven-node)")
	}
	if env.raven != nil {
		env.raven.stop()
	}
	dir := t.TempDir()
	if err := stackCmd(env.vars["STACK_DIR"], nil, "raven-overlay", filepath.Join(dir, "overlay")); err != nil {
		t.Fatal(err)
	}
	clouds, err := os.ReadFile(env.vars["OS_CLIENT_CONFIG_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "clouds.yaml"), clouds, 0o600); err != nil {
		t.Fatal(err)
	}
	// What a real cluster has already: a node labelled as the control plane's.
	kubectl(t, "label", "node", env.vars["STACK_NODE_NAME"], "node-role.kubernetes.io/control-plane=", "--overwrite")

	install, uninstall := docsInstallCommands(t)
	took := runDocs(t, dir, uninstall)
	if _, err := env.kube.CoreV1().Namespaces().Get(context.Background(), "raven-system", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("raven-system is still there after %q (%v)", uninstall, err)
	}
	t.Logf("%q removed the whole of deploy/ in %.1f s", uninstall, took.Seconds())
	took = runDocs(t, dir, install)
	t.Logf("the Install section's commands ran in %.1f s; the Deployment is Available", took.Seconds())

	lease := "raven-system/raven-" + env.cluster
	eventually(t, time.Minute, "the installed Raven to take the Lease "+lease, func() (bool, error) {
		out, err := exec.Command("kubectl", "--kubeconfig="+env.vars["KUBECONFIG"], "-n", "raven-system", "logs", "deployment/raven").CombinedOutput()
		return strings.Contains(grepLines(string(out), "successfully acquired lease"), `lock="`+lease+`"`), err
	})
	ns := newNamespace(t)
	ports := createServingPods(t, ns, "a", "b")
	addr := net.JoinHostPort(ports["b"].FixedIPs[0].IPAddress, "80")
	expectAnswer(t, podNetns(ns, "a"), "tcp", addr, "b")

	// Day 2: Raven and raven-node rolled as an operator rolls a new image (kubectl rollout restart replaces
	// the pods as a new tag does), while a and b talk: one UDP flow on one source port (an established
	// conntrack entry) and a new TCP connection every 100 ms.
	traffic := startTraffic(t, podNetns(ns, "a"), addr, "b", true)
	rolled := time.Now()
	kubectl(t, "-n", "raven-system", "rollout", "restart", "daemonset/raven-node", "deployment/raven")
	kubectl(t, "-n", "raven-system", "rollout", "status", "daemonset/raven-node", "--timeout=3m")
	kubectl(t, "-n", "raven-system", "rollout", "status", "deployment/raven", "--timeout=3m")
	t.Logf("raven-node and Raven rolled out in %.1f s", time.Since(rolled).Seconds())
	expectAnswer(t, podNetns(ns, "a"), "tcp", addr, "b")
	r := traffic.stop()
	t.Logf("across the rollout: %d of %d datagrams of the established UDP flow unanswered; %d of %d new TCP connections failed, the longest stretch %.1f s",
		r.lost, r.sent, r.failed, r.tried, r.longest.Seconds())
	if r.lost > 0 || r.longest > time.Second {
		t.Errorf("the rollout cost running pods their network: %d datagrams lost (want none), new connections refused for %.1f s (want at most 1 s)", r.lost, r.longest.Seconds())
	}
	// RBAC denials name the user; "forbidden" alone also covers events into a namespace being deleted.
	if l := grepLines(kubectl(t, "-n", "raven-system", "logs", "deployment/raven"), "forbidden: user"); strings.Contains(l, "system:serviceaccount:raven-system:raven") {
		t.Errorf("the installed Raven hit a forbidden call with the shipped RBAC:\n%s", l)
	}
}

// docsInstallCommands returns, from docs/operations.md, the Install section's first shell block and the
// uninstall's `kubectl delete -k` line.
func docsInstallCommands(t *testing.T) (install, uninstall string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.repo, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	block := func(after string) string {
		i := strings.Index(doc, after)
		if i < 0 {
			t.Fatalf("docs/operations.md has no %q", after)
		}
		rest := doc[i:]
		start := strings.Index(rest, "```sh\n")
		if start < 0 {
			t.Fatalf("docs/operations.md has no shell block after %q", after)
		}
		body := rest[start+len("```sh\n"):]
		return body[:strings.Index(body, "```")]
	}
	install = block("\n## Install\n")
	for _, l := range strings.Split(block("**Uninstall.**"), "\n") {
		if strings.HasPrefix(l, "kubectl delete -k ") {
			uninstall = l
		}
	}
	if uninstall == "" {
		t.Fatal("the uninstall in docs/operations.md has no `kubectl delete -k` line")
	}
	return install, uninstall
}

// runDocs runs commands from the docs with bash in dir, against the stack's cluster, and returns how long
// they took; three minutes is a hang.
func runDocs(t *testing.T, dir, commands string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", commands)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.vars["KUBECONFIG"])
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the docs' commands failed after %.1f s (%v):\n%s\noutput:\n%s", time.Since(start).Seconds(), err, commands, out)
	}
	return time.Since(start)
}
