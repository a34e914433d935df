//go:build e2e

package e2e

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Raven installed as an operator installs it, by the command make run uses (hack/stack.sh install-raven):
// deploy/ through an overlay that changes only what an operator changes here (the image tags, the
// configuration, the clouds.yaml Secret, one replica for the one node labelled control-plane, and where the
// API server is, as this machine has no kube-proxy). Its Deployment becomes Available with the shipped RBAC,
// it holds the Lease in raven-system, pods of a new namespace get ports and talk, and they keep talking while
// Raven and raven-node are rolled.
func TestInstalledFromDeploy(t *testing.T) {
	needDatapath(t)
	if !realNodes() {
		t.Skip("the install needs real nodes (kubelets running raven-node)")
	}
	if env.raven != nil {
		env.raven.stop() // one writer: the installed Raven
	}
	t.Cleanup(func() {
		if err := stackCmd(env.vars["STACK_DIR"], nil, "uninstall-raven"); err != nil {
			t.Error(err)
		}
	})
	applied := time.Now()
	if err := stackCmd(env.vars["STACK_DIR"], nil, "install-raven"); err != nil {
		t.Fatal(err)
	}
	t.Logf("the Deployment was Available %.1f s after hack/stack.sh install-raven began", time.Since(applied).Seconds())

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
