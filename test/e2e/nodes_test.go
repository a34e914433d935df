//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// On a stack with real nodes (STACK_NODE_RUNTIME=kubelet), pods are started by each node's kubelet and
// containerd: the test server image (hack/testserver) answers with the pod's name, a pod's network namespace
// is found through the container runtime (CRI), and a pod's readiness and serving are switched by running the
// test server's own command in the pod, as `kubectl exec` does.

// realNodes says the stack's nodes are kubelets with containerd.
func realNodes() bool { return env.vars["STACK_NODE_RUNTIME"] == "kubelet" }

// runtimeEndpoint is the CRI endpoint of the named node.
func runtimeEndpoint(node string) (string, error) {
	switch node {
	case env.vars["STACK_NODE_NAME"]:
		return env.vars["CONTAINER_RUNTIME_ENDPOINT"], nil
	case env.vars["STACK_NODE2_NAME"]:
		return env.vars["STACK_NODE2_RUNTIME_ENDPOINT"], nil
	}
	return "", fmt.Errorf("node %q is not one of the stack's", node)
}

// crictl runs crictl against a node's runtime and returns its standard output.
func crictl(node string, args ...string) ([]byte, error) {
	ep, err := runtimeEndpoint(node)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(env.vars["STACK_NODE_BINS"], "crictl"), append([]string{"--runtime-endpoint=" + ep, "--timeout=10s"}, args...)...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return nil, fmt.Errorf("crictl %s: %v: %s", strings.Join(args, " "), err, ee.Stderr)
	}
	return out, err
}

// timeoutDefaultSA bounds the wait for a new namespace's default ServiceAccount.
const timeoutDefaultSA = 30 * time.Second

// sandboxes remembers the network namespace of each pod's sandbox by pod UID; a sandbox made again (after a
// restart) has a namespace of its own, so a remembered path is used only while it exists.
var sandboxes sync.Map

// sandboxNetns returns the path of the network namespace of the pod's ready sandbox on its node.
func sandboxNetns(ns, name string) (string, error) {
	pod, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if v, ok := sandboxes.Load(pod.UID); ok {
		if _, err := os.Stat(v.(string)); err == nil {
			return v.(string), nil
		}
	}
	if pod.Spec.NodeName == "" {
		return "", fmt.Errorf("pod %s/%s is not scheduled", ns, name)
	}
	out, err := crictl(pod.Spec.NodeName, "pods", "--state=ready", "--label=io.kubernetes.pod.uid="+string(pod.UID), "-q")
	if err != nil {
		return "", err
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return "", fmt.Errorf("pod %s/%s has no ready sandbox on %s", ns, name, pod.Spec.NodeName)
	}
	out, err = crictl(pod.Spec.NodeName, "inspectp", "-o", "json", ids[0])
	if err != nil {
		return "", err
	}
	path, err := netnsOfSandbox(out)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	sandboxes.Store(pod.UID, path)
	return path, nil
}

// netnsOfSandbox reads the network namespace path out of `crictl inspectp -o json`.
func netnsOfSandbox(inspect []byte) (string, error) {
	var v struct {
		Info struct {
			RuntimeSpec struct {
				Linux struct {
					Namespaces []struct{ Type, Path string } `json:"namespaces"`
				} `json:"linux"`
			} `json:"runtimeSpec"`
		} `json:"info"`
	}
	if err := json.Unmarshal(inspect, &v); err != nil {
		return "", fmt.Errorf("parsing crictl inspectp: %w", err)
	}
	for _, n := range v.Info.RuntimeSpec.Linux.Namespaces {
		if n.Type == "network" && n.Path != "" {
			return n.Path, nil
		}
	}
	return "", fmt.Errorf("the sandbox has no network namespace of its own")
}

// podExec runs the command in the pod's first container through the API server and the kubelet.
func podExec(t testing.TB, ns, pod string, command ...string) {
	t.Helper()
	args := append([]string{"--kubeconfig=" + env.vars["KUBECONFIG"], "-n", ns, "exec", pod, "--"}, command...)
	if out, err := exec.Command("kubectl", args...).CombinedOutput(); err != nil {
		t.Fatalf("kubectl exec %s/%s %v: %v: %s", ns, pod, command, err, out)
	}
}

// waitDefaultServiceAccount waits for the namespace's default ServiceAccount, without which the API server
// refuses pods (the ServiceAccount admission plugin), as the upstream e2e framework does.
func waitDefaultServiceAccount(t testing.TB, ns string) {
	t.Helper()
	eventually(t, timeoutDefaultSA, "the default ServiceAccount of "+ns, func() (bool, error) {
		_, err := env.kube.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// serveDeclaredPorts tells the test server of each container which ports the container declares: it
// always answers on TCP and UDP port 80, and on these as well.
func serveDeclaredPorts(spec *corev1.PodSpec) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		var ports []string
		for _, p := range c.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			ports = append(ports, fmt.Sprintf("%d/%s", p.ContainerPort, proto))
		}
		if len(ports) > 0 {
			c.Env = append(c.Env, corev1.EnvVar{Name: "SERVE_PORTS", Value: strings.Join(ports, ",")})
		}
	}
}

// switchableReadiness gives the pod's first container the test server's readiness probe, which setReady
// turns off and on.
func switchableReadiness(spec *corev1.PodSpec) {
	spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/testserver", "--probe"}}},
		PeriodSeconds:    1,
		FailureThreshold: 1,
	}
}
