//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// env is what every test reaches the stack with.
var env struct {
	repo     string
	vars     map[string]string
	kube     kubernetes.Interface
	os       *openstack.Clients
	ravenBin string
	cluster  string
	raven    *Raven // the running Raven, if any
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	repo, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	env.repo = repo
	started := false
	if exec.Command(filepath.Join(repo, "hack/stack.sh"), "status").Run() != nil {
		harnessLog("starting the local stack (hack/stack.sh up)")
		if err := runCmd(filepath.Join(repo, "hack/stack.sh"), "up"); err != nil {
			harnessLog("stack up failed: %v", err)
			return 1
		}
		started = true
	} else {
		harnessLog("attaching to the running local stack")
	}
	defer func() {
		keystoneDown()
		if env.raven != nil {
			env.raven.stop()
		}
		if started && os.Getenv("E2E_KEEP_STACK") == "" {
			harnessLog("stopping the local stack")
			_ = runCmd(filepath.Join(repo, "hack/stack.sh"), "down")
		}
	}()
	if err := setup(); err != nil {
		harnessLog("setup: %v", err)
		return 1
	}
	return m.Run()
}

func setup() error {
	vars, err := readEnv(filepath.Join(env.repo, ".stack/env"))
	if err != nil {
		return err
	}
	env.cluster = "local"
	// The stack's own Open vSwitch and OVN tools (its release's, run from its root file system) come first.
	if tools := vars["STACK_TOOLS"]; tools != "" {
		if err := os.Setenv("PATH", tools+string(os.PathListSeparator)+os.Getenv("PATH")); err != nil {
			return err
		}
	}
	if err := connect(vars); err != nil {
		return err
	}
	// The installed Raven and raven-node run the images the stack was brought up with, not this tree.
	if tree, err := exec.Command("git", "-C", env.repo, "describe", "--tags", "--always", "--dirty").Output(); err == nil &&
		vars["STACK_IMAGES_VERSION"] != "" && strings.TrimSpace(string(tree)) != vars["STACK_IMAGES_VERSION"] {
		harnessLog("WARNING: the stack's images are of %s, the tree is %s: the installed Raven and raven-node run the former "+
			"(hack/stack.sh down, then up, to test this tree)", vars["STACK_IMAGES_VERSION"], strings.TrimSpace(string(tree)))
	}
	env.ravenBin = filepath.Join(env.repo, "bin", "raven-e2e")
	harnessLog("building %s", env.ravenBin)
	// The images' flags (make images), so that nothing is compiled again.
	return runCmdEnv([]string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", env.ravenBin, filepath.Join(env.repo, "cmd/raven"))
}

// connect points the harness at the stack that vars (a stack's env file) describe.
func connect(vars map[string]string) error {
	env.vars = vars
	cfg, err := clientcmd.BuildConfigFromFlags("", vars["KUBECONFIG"])
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	if env.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env.os, err = openstack.NewClients(ctx, vars["OS_CLIENT_CONFIG_FILE"], vars["OS_CLOUD"], nil)
	return err
}

// useStack points the harness, and the Raven it starts, at another stack for the rest of the test. The
// Raven of the main stack keeps running.
func useStack(t *testing.T, vars map[string]string) {
	t.Helper()
	saved := env
	env.raven = nil
	if err := connect(vars); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if env.raven != nil {
			env.raven.stop()
		}
		env = saved
	})
}

// keystone is the second local stack whose Neutron and Octavia authenticate through Keystone: brought up by the
// first test that needs it and kept for the others (each bring-up took about 40 s), then brought down when the
// shared phase begins (its tests do not use it) or at the suite's end.
var keystone struct {
	vars map[string]string
	err  error
	up   bool
}

// keystoneStack returns the env file's variables of the Keystone stack, bringing it up the first time.
func keystoneStack(t *testing.T) map[string]string {
	t.Helper()
	if !keystone.up && keystone.err == nil {
		keystone.up = true // down also after a failed up: what the attempt started is recorded
		began := time.Now()
		if keystone.err = keystoneCmd("up"); keystone.err == nil {
			keystone.vars, keystone.err = readEnv(filepath.Join(keystoneDir(), "env"))
		}
		waited(t, "the Keystone stack to come up", time.Since(began))
	}
	if keystone.err != nil {
		t.Fatal(keystone.err)
	}
	return keystone.vars
}

// keystoneDown brings the Keystone stack down if a test brought it up.
func keystoneDown() {
	if !keystone.up {
		return
	}
	keystone.up, keystone.vars, keystone.err = false, nil, nil
	if err := keystoneCmd("down"); err != nil {
		harnessLog("stopping the Keystone stack: %v", err)
	}
}

func keystoneDir() string { return filepath.Join(env.repo, "bin", "keystone-stack") }

// keystoneCmd runs a verb of hack/stack.sh on the Keystone stack. The main stack's env file, when sourced, names
// its load balancer provider; a second stack chooses its own.
func keystoneCmd(verb string) error {
	return stackCmd(keystoneDir(), []string{"STACK_KEYSTONE=1", "STACK_LB_PROVIDER="}, verb)
}

// stackCmd runs hack/stack.sh with args on the stack in dir, with extra environment variables.
func stackCmd(dir string, extra []string, args ...string) error {
	cmd := exec.Command(filepath.Join(env.repo, "hack/stack.sh"), args...)
	cmd.Env = append(append(os.Environ(), "STACK_DIR="+dir), extra...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/stack.sh %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func harnessLog(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[harness %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func runCmd(name string, args ...string) error { return runCmdEnv(nil, name, args...) }

// runCmdEnv is runCmd with extra environment variables.
func runCmdEnv(extra []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), extra...)
	cmd.Dir = env.repo
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && !strings.HasPrefix(line, "#") {
			vars[k] = v
		}
	}
	return vars, sc.Err()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func randSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Raven is the Raven a test runs: the Deployment installed from deploy/ (installed_test.go), or a process
// the test started beside the stack.
type Raven struct {
	metrics, health string
	installed       bool
	node            string // an installed Raven's node
	pid             int    // an installed Raven's process, once startInstalled has seen it
	suite           bool   // started with the suite's configuration (ravenOpts{})
	// a process
	cmd     *exec.Cmd
	logPath string
	done    chan error
}

// ravenOpts change how Raven is started.
type ravenOpts struct {
	kubeconfig string   // default: the admin kubeconfig
	args       []string // extra flags
	// second starts this Raven next to the running one instead of replacing it.
	second bool
	// config replaces the stack's Raven configuration file.
	config string
	// resync and orphanGrace, when set, replace the harness's short resync period of 5s and orphan grace
	// period of 2s (which let tests see repairs and sweeps quickly); the benchmark passes the shipped defaults.
	resync, orphanGrace time.Duration
	// portAudit, when set, replaces the period of the listings of every port (portAuditPeriod): the harness's 15s
	// (every third resync), or the shipped one with a resync period of the test's own.
	portAudit time.Duration
	// process runs Raven as a process beside the stack even where the installed one could run: the
	// benchmarks, which measure the same binary on every stack, and a test that freezes Raven.
	process bool
}

// isSuite says the options are the suite's own: the stack's configuration and the harness's periods.
func (o ravenOpts) isSuite() bool { return reflect.DeepEqual(o, ravenOpts{}) }

// periods are the resync, port audit and orphan grace periods a Raven with these options gets.
func (o ravenOpts) periods() (resync, audit, grace time.Duration) {
	resync, audit, grace = 5*time.Second, 15*time.Second, 2*time.Second
	if o.resync > 0 {
		resync, audit = o.resync, config.Default().PortAuditPeriod.Duration
	}
	if o.portAudit > 0 {
		audit = o.portAudit
	}
	if o.orphanGrace > 0 {
		grace = o.orphanGrace
	}
	return resync, audit, grace
}

// startRaven stops any running Raven and starts a new one, waiting until /readyz answers 200: the installed
// Raven where the options allow it (installable), otherwise a process, while the installed one is scaled to
// nothing (two would both write).
func startRaven(t testing.TB, o ravenOpts) *Raven {
	t.Helper()
	if installable(o) {
		return startInstalled(t, o)
	}
	return startProcess(t, o)
}

// startProcess starts Raven as a process beside the stack.
func startProcess(t testing.TB, o ravenOpts) *Raven {
	t.Helper()
	if env.raven != nil && !o.second {
		env.raven.stop()
	}
	if !o.second && realNodes() {
		if err := stopInstalled(); err != nil {
			t.Fatal(err)
		}
	}
	r := &Raven{metrics: freeAddr(t), health: freeAddr(t), done: make(chan error, 1), suite: o.isSuite()}
	r.logPath = filepath.Join(env.repo, "bin", fmt.Sprintf("raven-e2e-%s.log", time.Now().Format("150405.000")))
	logf, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	config := env.vars["RAVEN_CONFIG"]
	if o.config != "" {
		config = o.config
	}
	resync, audit, grace := o.periods()
	args := []string{
		"--config=" + config,
		"--metrics-bind-address=" + r.metrics, "--health-probe-bind-address=" + r.health,
		"--resync-period=" + resync.String(), "--port-audit-period=" + audit.String(), "--orphan-grace-period=" + grace.String(), "-v=2",
	}
	kubeconfig := o.kubeconfig
	if kubeconfig == "" {
		kubeconfig = env.vars["KUBECONFIG"] // the one the stack's raven.yaml names
	}
	args = append(args, "--kubeconfig="+ravenKubeconfig(t, kubeconfig))
	args = append(args, o.args...)
	r.cmd = exec.Command(env.ravenBin, args...)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	// Raven dies with the test binary, even one that panicked: a Raven left over would keep writing to the
	// stack beside the next run's (two controllers remaking each other's ports).
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait(); _ = logf.Close() }()
	if o.second {
		t.Cleanup(r.stop)
	} else {
		env.raven = r
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r.ready() {
			return r
		}
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("raven exited before it was ready (%v); log: %s\n%s", err, r.logPath, tail(r.logPath, 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("raven not ready after 60s; log:\n%s", tail(r.logPath, 30))
	return nil
}

// ravenIdentity is who a Raven beside the stack, and a test's write in Raven's stead, is to the API server: Raven's
// service account by name, which the shipped admission policy raven-pod-annotations (deploy/node/admission.yaml)
// lets set the kuryr.org/neutron-* annotations, with the stack admin's rights (system:masters), which a Raven
// process started with the admin kubeconfig always had.
var ravenIdentity = rest.ImpersonationConfig{
	UserName: "system:serviceaccount:raven-system:raven",
	Groups:   []string{"system:masters", "system:serviceaccounts", "system:serviceaccounts:raven-system"},
}

// ravenKubeconfig returns the kubeconfig a Raven process gets: an admin kubeconfig (path: the stack's, or the
// Keystone stack's) impersonating ravenIdentity, written beside it; the unprivileged one, whose user is named as
// Raven's service account already, as it is.
func ravenKubeconfig(t testing.TB, path string) string {
	t.Helper()
	if path == env.vars["STACK_UNPRIVILEGED_KUBECONFIG"] || strings.HasSuffix(path, "-as-"+impersonatedSuffix) {
		return path
	}
	return impersonatingKubeconfig(t, path, ravenIdentity.UserName, ravenIdentity.Groups, "raven")
}

// impersonatedSuffix marks a kubeconfig written by impersonatingKubeconfig for a test's own identity: ravenKubeconfig
// leaves it as it is.
const impersonatedSuffix = "test-identity"

// impersonatingKubeconfig writes, beside the admin kubeconfig path, a copy whose user impersonates user with groups, named
// path-as-name, and returns its path.
func impersonatingKubeconfig(t testing.TB, path, user string, groups []string, name string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.AuthInfos[ctx.AuthInfo] == nil {
		t.Fatalf("%s: no user in its current context %q", path, cfg.CurrentContext)
	}
	info := cfg.AuthInfos[ctx.AuthInfo]
	info.Impersonate, info.ImpersonateGroups = user, groups
	as := path + "-as-" + name
	if err := clientcmd.WriteToFile(*cfg, as); err != nil {
		t.Fatal(err)
	}
	return as
}

// writeConfig writes the stack's Raven configuration with extra appended, for one test.
func writeConfig(t testing.TB, extra string) string {
	t.Helper()
	raw, err := os.ReadFile(env.vars["RAVEN_CONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "raven.yaml")
	if err := os.WriteFile(p, append(raw, []byte(extra)...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ensureRaven returns the running Raven, starting one with default options when none runs.
func ensureRaven(t testing.TB) *Raven {
	t.Helper()
	// On real nodes the default Raven is the installed one, whatever process a test before started.
	if env.raven != nil && env.raven.running() && (env.raven.installed || !realNodes()) {
		return env.raven
	}
	return startRaven(t, ravenOpts{})
}

func (r *Raven) ready() bool {
	_, err := httpGet("http://" + r.health + "/readyz")
	return err == nil
}

func (r *Raven) running() bool {
	if r.installed {
		return r.pid != 0 && processAlive(r.pid)
	}
	select {
	case err := <-r.done:
		r.done <- err
		return false
	default:
		return true
	}
}

// signal sends sig and waits up to limit for the exit; it returns how long the exit took.
func (r *Raven) signal(sig syscall.Signal, limit time.Duration) (time.Duration, error) {
	if r.installed {
		return r.signalInstalled(sig, limit)
	}
	start := time.Now()
	if !r.running() {
		return 0, nil
	}
	_ = r.cmd.Process.Signal(sig)
	select {
	case err := <-r.done:
		r.done <- err
		return time.Since(start), err
	case <-time.After(limit):
		_ = r.cmd.Process.Kill()
		killed := <-r.done
		r.done <- killed
		return time.Since(start), fmt.Errorf("raven did not exit within %s and was killed: %w", limit, killed)
	}
}

// stop ends Raven gracefully: SIGTERM to a process, the installed Deployment scaled to nothing.
func (r *Raven) stop() {
	if r.installed {
		if err := stopInstalled(); err != nil {
			harnessLog("stopping the installed Raven: %v", err)
		}
	} else {
		_, _ = r.signal(syscall.SIGTERM, 10*time.Second)
	}
	r.forget()
}

// kill crashes Raven (SIGKILL); the kubelet restarts an installed one.
func (r *Raven) kill() { _, _ = r.signal(syscall.SIGKILL, 10*time.Second); r.forget() }

func (r *Raven) forget() {
	if env.raven == r {
		env.raven = nil
	}
}

// metric sums the samples of a metric family whose labels contain every given label="value" pair.
func (r *Raven) metric(t testing.TB, name string, match func(labels string) bool) float64 {
	t.Helper()
	var sum float64
	for _, v := range r.metricSeries(t, name, match) {
		sum += v
	}
	return sum
}

// metricSeries returns the value of each series of a metric, by its labels.
func (r *Raven) metricSeries(t testing.TB, name string, match func(labels string) bool) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		t.Fatalf("scraping metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	series := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := strings.TrimPrefix(line, name)
		labels := ""
		if strings.HasPrefix(rest, "{") {
			end := strings.Index(rest, "}")
			labels, rest = rest[1:end], rest[end+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue // a longer name with this prefix
		}
		if match != nil && !match(labels) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err == nil {
			series[labels] += v
		}
	}
	return series
}

// resyncs is the number of resyncs Raven has finished.
func (r *Raven) resyncs(t testing.TB) float64 { return r.metric(t, "raven_resyncs_total", nil) }

// waitResyncs waits until Raven has finished n more resyncs than it had at from: a window that holds n-1
// whole resyncs at least (the first may have been under way at from).
func (r *Raven) waitResyncs(t testing.TB, from float64, n int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d more resyncs", n), func() (bool, error) { return r.resyncs(t) >= from+float64(n), nil })
}

// neutronCalls returns the OpenStack requests Raven made so far, all of them and the writes.
func (r *Raven) openstackCalls(t testing.TB) (calls, writes float64) {
	t.Helper()
	calls = r.metric(t, "raven_openstack_request_duration_seconds_count", nil)
	writes = r.metric(t, "raven_openstack_request_duration_seconds_count", isWrite)
	return calls, writes
}

// isWrite reports that a series of Raven's OpenStack request metric, by its labels, counts writes.
func isWrite(labels string) bool {
	return !strings.HasSuffix(labels, ` list"`) && !strings.HasSuffix(labels, ` get"`)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// newNamespace creates a namespace for the test; it is deleted afterwards without waiting.
// When the test fails, the state of the stack is dumped first.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-") + "-" + randSuffix()
	ctx := context.Background()
	_, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, name)
		}
		_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if realNodes() {
		waitDefaultServiceAccount(t, name)
	}
	return name
}

// eventually polls cond until it returns true or the timeout passes. It waits at least as long as a look
// took before the next one: a condition that lists Neutron's ports must not keep a busy Neutron busier. A wait
// that lasts says so once a minute, with how long it has waited of how long it may.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	began := time.Now()
	deadline := began.Add(timeout)
	said := began
	var lastErr error
	for {
		start := time.Now()
		ok, err := cond()
		if ok {
			waited(t, what, time.Since(began))
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			waited(t, what, time.Since(began))
			fatalf(t, "timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
		}
		if time.Since(said) >= time.Minute {
			said = time.Now()
			t.Logf("still waiting for %s: %s of at most %s (last error: %v)", what, time.Since(began).Round(time.Second), timeout, lastErr)
		}
		time.Sleep(max(100*time.Millisecond, time.Since(start)))
	}
}

// clusterPorts lists the pod ports of this cluster in Neutron.
func clusterPorts(t testing.TB) []openstack.Port {
	t.Helper()
	ports, err := env.os.Networking.ListPorts(context.Background(), openstack.Filter{Tags: ownership.Selector(env.cluster, ownership.KindPod)})
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// dump writes what a person debugging a failure needs.
func dump(t *testing.T, ns string) {
	ctx := context.Background()
	t.Logf("==== dump for namespace %s", ns)
	dumpKubernetes(ctx, t, ns)
	dumpOpenStack(ctx, t)
	if env.raven != nil {
		t.Logf("==== raven log, last lines: %s", env.raven.logTail(60))
	}
	nodeSide := []string{"kube-scheduler"}
	if realNodes() {
		nodeSide = []string{"kubelet-1", "containerd-1", "kube-scheduler"}
		logCmd(t, "kubectl", "--kubeconfig="+env.vars["KUBECONFIG"], "-n", "raven-system", "logs", "--tail=30", "--prefix", "-l", "app.kubernetes.io/name=raven-node")
	}
	for _, svc := range append([]string{"neutron-server", "octavia", "kube-controller-manager"}, nodeSide...) {
		t.Logf("==== %s log, last lines:\n%s", svc, tail(filepath.Join(env.vars["STACK_DIR"], "logs", svc+".log"), 15))
	}
	if msg, ok := failures.Load(t.Name()); ok { // again at the end, where a reader of a long log looks first
		t.Logf("==== %s failed on: %s", t.Name(), msg)
	}
}

// failures holds, by test name, the message a wait helper failed a test with, for dump to repeat.
var failures sync.Map

// fatalf fails t as t.Fatalf does, and keeps the message for the failure dump.
func fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	failures.LoadOrStore(t.Name(), msg)
	t.Fatal(msg)
}

// errorf fails t as t.Errorf does, and keeps the message for the failure dump: a test that goes on after an
// error may log much more before it ends.
func errorf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	failures.LoadOrStore(t.Name(), msg)
	t.Error(msg)
}

// dumpKubernetes logs the namespace's pods, Services and events.
func dumpKubernetes(ctx context.Context, t *testing.T, ns string) {
	if pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s uid=%s phase=%s ip=%s port-annotation=%s", p.Name, p.UID, p.Status.Phase, p.Status.PodIP, p.Annotations["kuryr.org/neutron-port"])
		}
	}
	if svcs, err := env.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range svcs.Items {
			t.Logf("service %s clusterIP=%s annotations=%v status=%v", s.Name, s.Spec.ClusterIP, s.Annotations, s.Status.LoadBalancer)
		}
	}
	if evs, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s/%s %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// dumpOpenStack logs every Neutron network, port and floating IP, and every Octavia load balancer.
func dumpOpenStack(ctx context.Context, t *testing.T) {
	if nets, err := env.os.Networking.ListNetworks(ctx, openstack.Filter{}); err == nil {
		for _, n := range nets {
			t.Logf("neutron network %s %s tags=%v", n.ID, n.Name, n.Tags)
		}
	}
	if ports, err := env.os.Networking.ListPorts(ctx, openstack.Filter{}); err == nil {
		for _, p := range ports {
			t.Logf("neutron port %s name=%s owner=%s device=%s ips=%v tags=%v", p.ID, p.Name, p.DeviceOwner, p.DeviceID, p.FixedIPs, p.Tags)
		}
	}
	if fips, err := env.os.Networking.ListFloatingIPs(ctx, openstack.Filter{}); err == nil {
		for _, f := range fips {
			t.Logf("neutron floating ip %s %s -> %s tags=%v", f.ID, f.FloatingIP, f.FixedIP, f.Tags)
		}
	}
	if lbs, err := env.os.LoadBalancing.ListLoadBalancers(ctx, nil); err == nil {
		for _, lb := range lbs {
			t.Logf("octavia lb %s %s vip=%s status=%s tags=%v", lb.ID, lb.Name, lb.VipAddress, lb.ProvisioningStatus, lb.Tags)
		}
	}
}
