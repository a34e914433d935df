//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectl runs kubectl against the stack and returns its combined output, failing the test on an error.
func kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("kubectl", append([]string{"--kubeconfig=" + env.vars["KUBECONFIG"]}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The seed 001 walkthrough as an operator runs it on the local stack's real nodes: every node Ready on
// containerd, raven-node Ready on each chassis node and raven-node-nested on the nested ones, `kubectl run nginx
// --image=nginx` answers HTTP on port 80 from another pod (through `kubectl exec`), and `kubectl logs` shows the
// server's log.
func TestNginxWalkthroughOnRealNodes(t *testing.T) {
	shared(t)
	ctx := context.Background()
	checkNodes(ctx, t)

	ns := newNamespace(t)
	kubectl(t, "-n", ns, "run", "nginx", "--image=nginx")
	kubectl(t, "-n", ns, "run", "client", "--image=nginx")
	nginx := waitPodReady(t, ns, "nginx", 3*time.Minute)
	waitPodReady(t, ns, "client", 3*time.Minute)
	eventually(t, 30*time.Second, "nginx to answer HTTP on port 80 from the client pod", func() (bool, error) {
		out, err := exec.Command("kubectl", "--kubeconfig="+env.vars["KUBECONFIG"], "-n", ns, "exec", "client", "--",
			"/testserver", "--get", "http://"+nginx.Status.PodIP+"/").CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "nginx" {
			return false, fmt.Errorf("answered %q", got)
		}
		return true, nil
	})
	if logs := kubectl(t, "-n", ns, "logs", "nginx"); !strings.Contains(logs, `"Serving" name="nginx"`) {
		t.Errorf("kubectl logs nginx: %q, want the server's start line", logs)
	}
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkNodes checks that every node runs containerd 2 and is Ready, and that raven-node is Ready on each chassis
// node and raven-node-nested on the nested ones.
func checkNodes(ctx context.Context, t *testing.T) {
	t.Helper()
	nodes, err := env.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chassis, err := strconv.Atoi(env.vars["STACK_NODES"])
	nested := 0
	for _, vm := range []string{"STACK_VM_NAME", "STACK_VM2_NAME"} {
		if env.vars[vm] != "" {
			nested++
		}
	}
	if err != nil || len(nodes.Items) != chassis+nested {
		t.Fatalf("%d nodes, want STACK_NODES=%q and %d nested", len(nodes.Items), env.vars["STACK_NODES"], nested)
	}
	for _, n := range nodes.Items {
		if rt := n.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rt, "containerd://2.") {
			t.Errorf("node %s runs %q, want containerd 2", n.Name, rt)
		}
		if !nodeReady(n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
	}
	ds, err := env.kube.AppsV1().DaemonSets("raven-system").Get(ctx, "raven-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if int(ds.Status.NumberReady) != chassis {
		t.Errorf("raven-node is Ready on %d of %d chassis nodes", ds.Status.NumberReady, chassis)
	}
	if nested > 0 {
		nds, err := env.kube.AppsV1().DaemonSets("raven-system").Get(ctx, "raven-node-nested", metav1.GetOptions{})
		if err != nil || int(nds.Status.NumberReady) != nested {
			t.Errorf("raven-node-nested: %v, want it Ready on the %d nested nodes (%v)", nds, nested, err)
		}
	}
}
