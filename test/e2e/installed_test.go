//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// On real nodes the suite's Raven is the one an operator runs: installed from deploy/ by hack/stack.sh
// install-raven (the command make run uses), in raven-system, with its ServiceAccount and leader election.
// A test stops it by scaling the Deployment to nothing, crashes it by killing its container's process (the
// kubelet restarts it), reconfigures it by applying a changed raven.yaml (which rolls its pods), and restarts
// it by a rollout. A test that needs flags or an identity of its own starts a process instead (startRaven).

const ravenSelector = "app.kubernetes.io/name=raven"

// installable says a Raven with these options runs as the installed Deployment.
func installable(o ravenOpts) bool {
	return realNodes() && !o.process && !o.second && o.kubeconfig == "" && len(o.args) == 0
}

// installedConfig writes the raven.yaml the installed Raven gets: the stack's (or the test's) configuration
// with the harness's short resync, port audit and grace periods, which let tests see repairs and sweeps quickly, and a
// shorter Lease.
func installedConfig(t testing.TB, o ravenOpts) string {
	t.Helper()
	src := env.vars["RAVEN_CONFIG"]
	if o.config != "" {
		src = o.config
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	resync, audit, grace := o.periods()
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		if !strings.HasPrefix(l, "resyncPeriod:") && !strings.HasPrefix(l, "orphanGracePeriod:") && !strings.HasPrefix(l, "portAuditPeriod:") {
			lines = append(lines, l)
		}
	}
	lines = append(lines, "resyncPeriod: "+resync.String(), "portAuditPeriod: "+audit.String(), "orphanGracePeriod: "+grace.String(),
		// A Lease of 8 s instead of 15: the successor of a crashed Raven writes sooner.
		"leaderElection: {enabled: true, namespace: raven-system, leaseDuration: 8s, renewDeadline: 6s, retryPeriod: 1s}")
	p := filepath.Join(env.repo, "bin", "raven-e2e-installed.yaml")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startInstalled brings the installed Raven up with the options' configuration: a changed raven.yaml is
// applied and rolls the pods (install-raven does that), a Raven that ran is restarted by a rollout, a
// Deployment scaled to nothing is scaled to one, and a crashed one is left to the kubelet. It returns once
// the new Raven is ready and holds the Lease.
func startInstalled(t testing.TB, o ravenOpts) *Raven {
	t.Helper()
	wasRunning := env.raven != nil
	if env.raven != nil && !env.raven.installed {
		env.raven.stop()
		wasRunning = false
	}
	env.raven = nil
	ctx := context.Background()
	replicas := int32(-1)
	if d, err := env.kube.AppsV1().Deployments("raven-system").Get(ctx, "raven", metav1.GetOptions{}); err == nil && d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	began := time.Now()
	defer func() { waited(t, "the installed Raven to start", time.Since(began)) }()
	before := installedRavenYAML(ctx)
	if err := stackCmd(env.vars["STACK_DIR"], []string{"RAVEN_INSTALL_CONFIG=" + installedConfig(t, o)}, "install-raven"); err != nil {
		t.Fatal(err)
	}
	rolled := replicas > 0 && before != "" && before != installedRavenYAML(ctx)
	switch {
	case replicas == 0:
		kubectl(t, "-n", "raven-system", "scale", "deployment/raven", "--replicas=1")
	case wasRunning && !rolled:
		kubectl(t, "-n", "raven-system", "rollout", "restart", "deployment/raven")
	}
	kubectl(t, "-n", "raven-system", "rollout", "status", "deployment/raven", "--timeout=3m")
	r := installedOn(t, env.vars["STACK_NODE_NAME"])
	// After a crash the new process waits out the old one's Lease, and the kubelet's back-off.
	deadline := time.Now().Add(2 * time.Minute)
	for !r.ready() || !r.leading() {
		if time.Now().After(deadline) {
			t.Fatalf("the installed Raven is not ready and leading 2 min after it was started; log:\n%s", r.logTail(40))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Its process, to tell a crash or a restart from a Raven that is up but not ready.
	pid, _, err := installedProcess(context.Background(), r.node)
	if err != nil {
		t.Fatal(err)
	}
	r.pid = pid
	r.suite = o.isSuite()
	env.raven = r
	return r
}

// installedOn is the installed Raven's replica on a node: the shipped Deployment's ports on the node's address.
func installedOn(t testing.TB, node string) *Raven {
	t.Helper()
	host, err := nodeAddress(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	return &Raven{installed: true, node: node, metrics: net.JoinHostPort(host, "9477"), health: net.JoinHostPort(host, "9478")}
}

// installedRavenYAML is the raven.yaml of the installed Raven's ConfigMap, "" when there is none.
func installedRavenYAML(ctx context.Context) string {
	cm, err := env.kube.CoreV1().ConfigMaps("raven-system").Get(ctx, "raven-config", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return cm.Data["raven.yaml"]
}

// nodeAddress is a node's InternalIP, where a pod in its network listens.
func nodeAddress(ctx context.Context, node string) (string, error) {
	n, err := env.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address, nil
		}
	}
	return "", fmt.Errorf("node %s has no InternalIP", node)
}

// leading says Raven holds its Lease (controller-runtime's leader_election_master_status).
func (r *Raven) leading() bool {
	resp, err := httpGet("http://" + r.metrics + "/metrics")
	if err != nil {
		return false
	}
	return strings.Contains(resp, `leader_election_master_status{name="raven-`+env.cluster+`"} 1`)
}

// stopInstalled scales the installed Raven to nothing and waits until its pods are gone, so that no two
// Ravens write.
func stopInstalled() error {
	ctx := context.Background()
	deployments := env.kube.AppsV1().Deployments("raven-system")
	scale, err := deployments.GetScale(ctx, "raven", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if scale.Spec.Replicas != 0 {
		scale.Spec.Replicas = 0
		if _, err := deployments.UpdateScale(ctx, "raven", scale, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		pods, err := env.kube.CoreV1().Pods("raven-system").List(ctx, metav1.ListOptions{LabelSelector: ravenSelector})
		if err == nil && len(pods.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the installed Raven's pods are not gone 1 min after it was scaled to nothing (last list: %w)", err)
		}
	}
}

// httpGet returns the body of a 200 answer.
func httpGet(url string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}

// installedProcess finds the process of the installed Raven's running container on a node: its PID on this
// machine, through the node's container runtime, and its pod.
func installedProcess(ctx context.Context, node string) (int, *corev1.Pod, error) {
	pods, err := env.kube.CoreV1().Pods("raven-system").List(ctx, metav1.ListOptions{LabelSelector: ravenSelector})
	if err != nil {
		return 0, nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node || p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			continue
		}
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		out, err := crictl(p.Spec.NodeName, "inspect", "-o", "go-template", "--template", "{{.info.pid}}", id)
		if err != nil {
			return 0, nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		return pid, p, err
	}
	return 0, nil, fmt.Errorf("no running pod of the installed Raven on %s", node)
}

// signalInstalled ends the installed Raven's process as the world does: SIGKILL is a crash (the kubelet
// restarts the container), any other signal is the kubelet's SIGTERM of a deleted pod (the Deployment
// makes a new one). It returns how long the process took to exit.
func (r *Raven) signalInstalled(sig syscall.Signal, limit time.Duration) (time.Duration, error) {
	ctx := context.Background()
	pid, pod, err := installedProcess(ctx, r.node)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if sig == syscall.SIGKILL {
		err = syscall.Kill(pid, syscall.SIGKILL)
	} else {
		err = env.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	}
	if err != nil {
		return 0, err
	}
	for processAlive(pid) {
		if time.Since(start) > limit {
			return time.Since(start), fmt.Errorf("the process of pod %s (pid %d) did not exit within %s", pod.Name, pid, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), nil
}

// processAlive says pid names a process that has not exited (a zombie has).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// logTail is the last n lines of Raven's log: the process's file, or the installed pod's log.
func (r *Raven) logTail(n int) string {
	if !r.installed {
		return r.logPath + ":\n" + tail(r.logPath, n)
	}
	out, err := exec.Command("kubectl", "--kubeconfig="+env.vars["KUBECONFIG"], "-n", "raven-system", "logs",
		"--tail="+strconv.Itoa(n), "deployment/raven").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("kubectl logs deployment/raven: %v: %s", err, out)
	}
	return "kubectl -n raven-system logs deployment/raven:\n" + string(out)
}
