//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	case env.vars["STACK_VM_NAME"]:
		return env.vars["STACK_VM_RUNTIME_ENDPOINT"], nil
	case env.vars["STACK_VM2_NAME"]:
		return env.vars["STACK_VM2_RUNTIME_ENDPOINT"], nil
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
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return nil, fmt.Errorf("crictl %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
	}
	return out, err
}

// pauseImage is the nodes' sandbox image (pinned in hack/stack-nodes.sh, served by the stack's registry).
const pauseImage = "registry.k8s.io/pause:3.10.1"

// waitSandboxesGone waits until no node runs a ready sandbox of the namespaces. Pods deleted with a grace
// period of 0 leave the API at once; their kubelets stop the sandboxes (the CNI DEL among it) afterwards, and a
// phase that starts before they are done shares the node with that work.
func waitSandboxesGone(t testing.TB, timeout time.Duration, nss ...string) {
	t.Helper()
	if !realNodes() {
		return
	}
	eventually(t, timeout, "the nodes to stop the sandboxes of "+strings.Join(nss, ", "), func() (bool, error) {
		for _, ns := range nss {
			pods, err := podsWithNetns(ns)
			if err != nil || len(pods) > 0 {
				return false, err
			}
		}
		return true, nil
	})
}

// hollowNode registers a Node that no kubelet runs, for the rest of the test: pods bound to it get their
// ports and never run. Without the Node, the pod garbage collector deletes pods bound to it; with it, nothing
// evicts them (the stack runs no taint-eviction controller).
func hollowNode(t testing.TB, name string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"raven.io/hollow": "true"}}}
	if _, err := env.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
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
	_, path, err := readySandbox(pod)
	if err != nil {
		return "", err
	}
	sandboxes.Store(pod.UID, path)
	return path, nil
}

// readySandbox returns the ID and the network namespace path of the pod's ready sandbox on its node.
func readySandbox(pod *corev1.Pod) (id, netns string, err error) {
	if pod.Spec.NodeName == "" {
		return "", "", fmt.Errorf("pod %s/%s is not scheduled", pod.Namespace, pod.Name)
	}
	out, err := crictl(pod.Spec.NodeName, "pods", "--state=ready", "--label=io.kubernetes.pod.uid="+string(pod.UID), "-q")
	if err != nil {
		return "", "", err
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return "", "", fmt.Errorf("pod %s/%s has no ready sandbox on %s", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	out, err = crictl(pod.Spec.NodeName, "inspectp", "-o", "json", ids[0])
	if err != nil {
		return "", "", err
	}
	netns, err = netnsOfSandbox(out)
	if err != nil {
		return "", "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return ids[0], netns, nil
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

// podsWithNetns names the pods of the namespace that still have a network namespace on a node: those with a
// ready sandbox (a stopped sandbox's namespace is gone).
func podsWithNetns(ns string) ([]string, error) {
	var pods []string
	for _, node := range []string{env.vars["STACK_NODE_NAME"], env.vars["STACK_NODE2_NAME"]} {
		if node == "" {
			continue
		}
		out, err := crictl(node, "pods", "--state=ready", "--namespace=^"+ns+"$", "-o", "json")
		if err != nil {
			return nil, err
		}
		var v struct {
			Items []struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			return nil, fmt.Errorf("parsing crictl pods: %w", err)
		}
		for _, it := range v.Items {
			pods = append(pods, it.Metadata.Name)
		}
	}
	return pods, nil
}

// podExec runs the command in the pod's first container through the API server and the kubelet.
func podExec(t testing.TB, ns, pod string, command ...string) {
	t.Helper()
	kubectl(t, append([]string{"-n", ns, "exec", pod, "--"}, command...)...)
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

// ravenNodes takes raven-node off every node, or puts it back and waits until it is Ready on each, as an
// operator would: a nodeSelector no node matches on its DaemonSet, then none.
func ravenNodes(on bool) error {
	ctx := context.Background()
	patch := `{"spec":{"template":{"spec":{"nodeSelector":{"raven.io/e2e-raven-node-off":"true"}}}}}`
	if on {
		patch = `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`
	}
	ds := env.kube.AppsV1().DaemonSets("raven-system")
	if _, err := ds.Patch(ctx, "raven-node", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		d, err := ds.Get(ctx, "raven-node", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pods, err := env.kube.CoreV1().Pods("raven-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=raven-node"})
		if err != nil {
			return err
		}
		s := d.Status
		if !on && len(pods.Items) == 0 {
			return nil
		}
		if on && s.ObservedGeneration == d.Generation && s.DesiredNumberScheduled > 0 && s.NumberReady == s.DesiredNumberScheduled &&
			s.UpdatedNumberScheduled == s.DesiredNumberScheduled && len(pods.Items) == int(s.DesiredNumberScheduled) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raven-node (on=%v) not settled after 3 minutes: %+v, %d pods", on, s, len(pods.Items))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// sandboxOf is what the runtime knows of the pod's current sandbox, from CRI.
func sandboxOf(t testing.TB, ns, name string) sandboxState {
	t.Helper()
	pod, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id, netns, err := readySandbox(pod)
	if err != nil {
		t.Fatal(err)
	}
	return sandboxState{Namespace: ns, Name: name, UID: string(pod.UID), Netns: netns, ID: id, IfName: "eth0"}
}

// sandboxHeld counts the kubelet's Warning events that hold the pod's sandbox back for its network: a failed
// ADD (FailedCreatePodSandBox), or none tried while the plugin's STATUS says the network is not ready
// (NetworkNotReady). The kubelet retries either.
func sandboxHeld(ns, name string) (int, error) {
	evs, err := env.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == "FailedCreatePodSandBox" || e.Reason == "NetworkNotReady" {
			n += max(int(e.Count), 1)
		}
	}
	return n, nil
}

// cniAfterTheDaemonWasDown is TestCNIAfterTheDaemonWasDown: while
// raven-node is off, the plugin's STATUS says the network is not ready, and the kubelet holds a new pod back
// (or its ADD fails); it runs the pod once raven-node is back, and retries the DEL of a pod deleted meanwhile, which
// then leaves nothing on the node; DEL is idempotent, and a DEL for an older sandbox of a live pod leaves it
// plugged.
func cniAfterTheDaemonWasDown(t *testing.T) {
	ctx := context.Background()
	nsName := newNamespace(t)
	anns := createServingPods(t, nsName, "stay", "gone")
	stay, gone := anns["stay"], anns["gone"]
	goneSandbox := sandboxOf(t, nsName, "gone")
	stayAddr := net.JoinHostPort(stay.FixedIPs[0].IPAddress, "80")

	stopStackService(t, "raven-node")
	// Bound to the node at once: once the kubelet reports the network not ready, the node is tainted not-ready and
	// the scheduler keeps a new pod off it (a CI run saw the pod unschedulable for the whole wait); what is
	// tested here is the kubelet's part.
	latePod := servingPod("late")
	latePod.Spec.NodeName = env.vars["STACK_NODE_NAME"]
	if _, err := env.kube.CoreV1().Pods(nsName).Create(ctx, latePod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the kubelet to hold the late pod back for its network", func() (bool, error) {
		n, err := sandboxHeld(nsName, "late")
		return n > 0, err
	})
	if err := env.kube.CoreV1().Pods(nsName).Delete(ctx, "gone", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if !contains(ovsPorts(t), tapOf(gone.ID)) {
		t.Fatal("the deleted pod's OVS port went while raven-node was off: the retried DEL would not be tested")
	}

	stackService(t, "start-service", "raven-node")
	waitPodReady(t, nsName, "late", 3*time.Minute)
	_, late := portAnnotation(t, nsName, "late")
	expectAnswer(t, podNetns(nsName, "stay"), "tcp", net.JoinHostPort(late.FixedIPs[0].IPAddress, "80"), "late")
	expectAnswer(t, podNetns(nsName, "late"), "udp", stayAddr, "stay")
	eventually(t, 2*time.Minute, "the kubelet's retried DEL to remove the deleted pod's OVS port, veth and namespace", func() (bool, error) {
		_, linkErr := netlink.LinkByName(tapOf(gone.ID))
		_, nsErr := os.Stat(goneSandbox.Netns)
		return !contains(ovsPorts(t), tapOf(gone.ID)) && linkErr != nil && errors.Is(nsErr, os.ErrNotExist), nil
	})
	checkDELsAfterTheDaemonWasDown(t, nsName, stay, late, goneSandbox)
}
