//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// Raven installed as an operator installs it: deploy/ through an overlay that changes only what an operator
// changes here (the image tags, the configuration, the clouds.yaml Secret, one replica for the one node
// labelled control-plane, and where the API server is, as this machine has no kube-proxy), on a node that
// the operator labelled control-plane. Its Deployment becomes Available with the shipped RBAC, it holds the
// Lease in raven-system, and pods of a new namespace get ports and talk.
func TestInstalledFromDeploy(t *testing.T) {
	needDatapath(t)
	if !realNodes() {
		t.Skip("the install needs real nodes (kubelets running raven-node)")
	}
	if env.raven != nil {
		env.raven.stop() // one writer: the installed Raven
	}
	node := env.vars["STACK_NODE_NAME"]
	dir := writeLocalOverlay(t)
	kubectl(t, "label", "node", node, "node-role.kubernetes.io/control-plane=", "--overwrite")
	t.Cleanup(func() {
		// What the overlay made, raven-node's objects apart (deploy/node is the stack's).
		for _, o := range []string{"deployment/raven", "configmap/raven-config", "secret/raven-clouds", "serviceaccount/raven",
			"role/raven-leader-election", "rolebinding/raven-leader-election"} {
			_ = runCmd("kubectl", "--kubeconfig="+env.vars["KUBECONFIG"], "-n", "raven-system", "delete", o, "--ignore-not-found", "--wait=true", "--timeout=60s")
		}
		_ = runCmd("kubectl", "--kubeconfig="+env.vars["KUBECONFIG"], "delete", "clusterrolebinding/raven", "clusterrole/raven", "--ignore-not-found")
		_ = runCmd("kubectl", "--kubeconfig="+env.vars["KUBECONFIG"], "label", "node", node, "node-role.kubernetes.io/control-plane-")
		// The installed replica is gone before the next test starts Raven again.
		eventually(t, time.Minute, "the installed Raven's pods to go", func() (bool, error) {
			pods, err := env.kube.CoreV1().Pods("raven-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=raven"})
			return err == nil && len(pods.Items) == 0, err
		})
	})
	applied := time.Now()
	kubectl(t, "apply", "-k", dir)
	kubectl(t, "-n", "raven-system", "rollout", "status", "deployment/raven", "--timeout=3m")
	kubectl(t, "-n", "raven-system", "wait", "--for=condition=Available", "deployment/raven", "--timeout=60s")
	t.Logf("the Deployment was Available %.1f s after kubectl apply -k", time.Since(applied).Seconds())

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
	traffic := startTraffic(t, podNetns(ns, "a"), addr, "b")
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

// writeLocalOverlay writes the local stack's overlay of deploy/ into a directory of the stack and returns it.
func writeLocalOverlay(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(env.vars["STACK_DIR"], "deploy", "raven-e2e")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, filepath.Join(env.repo, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.vars["KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	nodePatch, err := os.ReadFile(filepath.Join(env.vars["STACK_DIR"], "deploy", "node", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clouds, err := os.ReadFile(env.vars["OS_CLIENT_CONFIG_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"kustomization.yaml": fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - {name: ghcr.io/raven-net/raven, newTag: %q}
  - {name: ghcr.io/raven-net/raven-node, newTag: %q}
configMapGenerator:
  - name: raven-config
    namespace: raven-system
    behavior: replace
    files: [raven.yaml]
secretGenerator:
  - name: raven-clouds
    namespace: raven-system
    files: [clouds.yaml]
generatorOptions:
  disableNameSuffixHash: true
patches:
  - path: node.yaml
  - path: raven.yaml.patch
    target: {kind: Deployment, name: raven}
`, base, env.vars["STACK_IMAGES_VERSION"], env.vars["STACK_IMAGES_VERSION"]),
		"node.yaml": string(nodePatch),
		"raven.yaml.patch": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: raven
  namespace: raven-system
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: raven
          env:
            - {name: KUBERNETES_SERVICE_HOST, value: %q}
            - {name: KUBERNETES_SERVICE_PORT, value: %q}
`, api.Hostname(), api.Port()),
		"raven.yaml":  inClusterConfig(t),
		"clouds.yaml": string(clouds),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// inClusterConfig is the stack's Raven configuration as the installed Raven reads it: in-cluster Kubernetes,
// the Secret's clouds.yaml, the Deployment's addresses, leader election in raven-system.
func inClusterConfig(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(env.vars["RAVEN_CONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`(?m)^(kubeconfig|metricsAddr|healthAddr):.*\n`).ReplaceAllString(string(raw), "")
	s = regexp.MustCompile(`(?m)^(\s*cloudsFile:).*$`).ReplaceAllString(s, "$1 /etc/openstack/clouds.yaml")
	return s + "leaderElection:\n  enabled: true\n  namespace: raven-system\n"
}

// traffic is a UDP flow on one socket and a stream of new TCP connections from one pod to another.
type traffic struct {
	halt chan struct{}
	done sync.WaitGroup
	r    trafficResult
}

type trafficResult struct {
	sent, lost, tried, failed int
	longest                   time.Duration
}

// startTraffic starts both until stop: datagrams exchanged one at a time, without pause, and a TCP probe every
// 100 ms, each answered by want (a connection not answered within 0.5 s failed).
func startTraffic(t *testing.T, from, addr, want string) *traffic {
	t.Helper()
	var conn net.Conn
	if err := inNetns(from, func() error {
		var err error
		conn, err = net.Dial("udp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tr := &traffic{halt: make(chan struct{})}
	tr.done.Add(2)
	go func() {
		defer tr.done.Done()
		defer func() { _ = conn.Close() }()
		buf := make([]byte, 64)
		for !tr.halted() {
			tr.r.sent++
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			if _, err := conn.Write([]byte("hello\n")); err != nil {
				tr.r.lost++
				continue
			}
			if n, err := conn.Read(buf); err != nil || strings.TrimSpace(string(buf[:n])) != want {
				tr.r.lost++
			}
		}
	}()
	go func() {
		defer tr.done.Done()
		var failingSince time.Time
		for ; !tr.halted(); time.Sleep(100 * time.Millisecond) {
			tr.r.tried++
			now := time.Now()
			if probeWithin(from, "tcp", addr, want, 500*time.Millisecond) {
				if !failingSince.IsZero() {
					tr.r.longest = max(tr.r.longest, now.Sub(failingSince))
				}
				failingSince = time.Time{}
				continue
			}
			tr.r.failed++
			if failingSince.IsZero() {
				failingSince = now
			}
		}
		if !failingSince.IsZero() {
			tr.r.longest = max(tr.r.longest, time.Since(failingSince))
		}
	}()
	return tr
}

func (tr *traffic) halted() bool {
	select {
	case <-tr.halt:
		return true
	default:
		return false
	}
}

// stop ends both and returns what they counted.
func (tr *traffic) stop() trafficResult {
	close(tr.halt)
	tr.done.Wait()
	return tr.r
}
