//go:build bench

package scale

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// proc is a process the benchmark started, in its own process group, with its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

func startProc(t testing.TB, dir, name string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); _ = f.Close() }()
	return p
}

// stop sends sig and waits up to limit for the process to end, then kills its group.
func (p *proc) stop(sig syscall.Signal, limit time.Duration) {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case err := <-p.done:
		_ = err // how it ended does not matter: it was told to
	case <-time.After(limit):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		err := <-p.done
		_ = err
	}
	p.done <- nil // later stops return at once
}

func (p *proc) exited() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	default:
		return false
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitHTTP polls url until it answers 200 or limit passes.
func waitHTTP(t testing.TB, p *proc, url string, client *http.Client, header map[string]string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s did not answer %s within %s (log: %s)", p.name, url, limit, p.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kube is a Kubernetes control plane of its own: etcd and kube-apiserver, from the binaries hack/build-k8s.sh
// builds (and caches), with no controller manager, scheduler or kubelet: the benchmark binds pods to Node
// objects itself.
type kube struct {
	dir, kubeconfig string
	etcd, api       *proc
	client          kubernetes.Interface
}

func startKube(t testing.TB, repo, dir string) *kube {
	t.Helper()
	out, err := exec.Command(filepath.Join(repo, "hack/build-k8s.sh")).Output()
	if err != nil {
		t.Fatalf("hack/build-k8s.sh: %v", err)
	}
	bins := strings.TrimSpace(string(out))
	// etcd keeps its data in memory (/dev/shm), as the local stack does.
	data, err := os.MkdirTemp("/dev/shm", "raven-scale-etcd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(data) })
	k := &kube{dir: dir}
	ep, pp, ap := freePort(t), freePort(t), freePort(t)
	k.etcd = startProc(t, dir, "etcd", filepath.Join(bins, "etcd"), "--name=scale", "--data-dir="+data,
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", ep), fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", ep),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", pp), fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", pp),
		fmt.Sprintf("--initial-cluster=scale=http://127.0.0.1:%d", pp), "--unsafe-no-fsync", "--log-level=warn",
		"--quota-backend-bytes=8589934592", "--listen-metrics-urls=")
	t.Cleanup(func() { k.etcd.stop(syscall.SIGTERM, 10*time.Second) })
	waitHTTP(t, k.etcd, fmt.Sprintf("http://127.0.0.1:%d/health", ep), http.DefaultClient, nil, 30*time.Second)

	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	token := writeAPIServerFiles(t, pki)
	k.api = startProc(t, dir, "kube-apiserver", filepath.Join(bins, "kube-apiserver"),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", ep), "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ap), "--cert-dir="+pki, "--token-auth-file="+filepath.Join(pki, "tokens.csv"),
		"--authorization-mode=RBAC", "--disable-admission-plugins=ServiceAccount",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(pki, "sa.pub"), "--service-account-signing-key-file="+filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range="+serviceCIDR, "--endpoint-reconciler-type=none",
		// The benchmark's own writers and Raven share one API server on two cores: no fairness queues, wide limits.
		"--enable-priority-and-fairness=false", "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000")
	t.Cleanup(func() { k.api.stop(syscall.SIGTERM, 20*time.Second) })
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	waitHTTP(t, k.api, fmt.Sprintf("https://127.0.0.1:%d/readyz", ap), insecure, map[string]string{"Authorization": "Bearer " + token}, 2*time.Minute)

	k.kubeconfig = filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: scale, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %s}}]
contexts: [{name: scale, context: {cluster: scale, user: admin}}]
current-context: scale
`, ap, token)
	if err := os.WriteFile(k.kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	if k.client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return k
}

// writeAPIServerFiles writes the service-account key pair and a token file with one admin; it returns the token.
func writeAPIServerFiles(t testing.TB, pki string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(token + ",admin,admin-uid,\"system:masters\"\n"),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(pki, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return token
}

// waitFor polls cond every 50 ms until it holds; it fails the test after limit.
func waitFor(ctx context.Context, t testing.TB, limit time.Duration, what string, cond func() (bool, error)) time.Duration {
	t.Helper()
	return waitEvery(ctx, t, limit, 50*time.Millisecond, what, cond)
}

// scrapeEvery is how often a wait on a replica's metrics scrapes them: each scrape is work for the replica
// measured, so such waits read its metrics 5 times a second, not 20.
const scrapeEvery = 200 * time.Millisecond

// waitEvery is waitFor, checking cond every interval.
func waitEvery(ctx context.Context, t testing.TB, limit, every time.Duration, what string, cond func() (bool, error)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, err := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > limit || ctx.Err() != nil {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", limit, what, err)
		}
		time.Sleep(every)
	}
}
