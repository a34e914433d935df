package plugin

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/testutils"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/raven-net/raven/internal/cni/ovs/ovsfake"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/server"
	"github.com/raven-net/raven/internal/cni/wire"
)

// TestMain lets the test binary be raven-cni when a runtime execs it with CNI_COMMAND set.
func TestMain(m *testing.M) {
	if os.Getenv("CNI_COMMAND") != "" {
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer cancel()
		Main(ctx)
		return
	}
	os.Exit(m.Run())
}

// pluginSetup installs the test binary as the plugin in dir/bin (it plays raven-cni when exec'd) and returns
// that directory, the daemon's socket path and the network configuration list naming it.
func pluginSetup(t *testing.T, dir string) (bin, socket string, list *libcni.NetworkConfigList) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, wire.PluginType)); err != nil {
		t.Fatal(err)
	}
	socket = filepath.Join(dir, "run", "cni.sock")
	conflist, _ := wire.Conflist(socket)
	list, err = libcni.NetworkConfFromBytes(conflist)
	if err != nil {
		t.Fatal(err)
	}
	return bin, socket, list
}

// startNodeServer serves raven-node's CNI requests on socket until the test ends, with the annotated pod in
// its cache, real netlink plumbing and a fake OVS, which it returns.
func startNodeServer(t *testing.T, socket string) *ovsfake.OVS {
	t.Helper()
	cs := fake.NewClientset(annotatedPod(t))
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	pods, _ := server.NewPods(inf)
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	fakeOVS := ovsfake.New()
	srv := server.New(server.Config{Node: "node-a", ReadyTimeout: 5 * time.Second, Pods: pods, OVS: fakeOVS,
		Plumber: server.Netlink{}, Recorder: record.NewFakeRecorder(10)})
	l, err := server.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		if err := <-done; err != nil {
			t.Logf("raven-node server: %v", err)
		}
	})
	return fakeOVS
}

// checkAdded: the ADD result has the port's address, and the pod end in netnsPath has the port's MAC, MTU
// 1442, one address and tx checksum offload off.
func checkAdded(t *testing.T, res types.Result, netnsPath string) {
	t.Helper()
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := json.Marshal(r); len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.244.0.158/24" {
		t.Errorf("result %s", out)
	}
	obs, err := plug.Inspect(netnsPath, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if obs.MAC.String() != "fa:16:3e:84:88:2a" || obs.MTU != 1442 || obs.TxChecksum || len(obs.Addrs) != 1 {
		t.Errorf("pod end %+v", obs)
	}
}

// The whole path as a runtime drives it: libcni execs raven-cni, which talks to an in-process raven-node
// that plugs a real namespace (OVS is the fake).
func TestThroughLibcniIntoARealNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and a veth pair (run the tests as root to cover the whole path)")
	}
	dir := t.TempDir()
	bin, socket, list := pluginSetup(t, dir)
	fakeOVS := startNodeServer(t, socket)

	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Close(); _ = testutils.UnmountNS(netns) })
	t.Cleanup(func() { _ = plug.Teardown("", "", "", "tap7d7cc334-bc") })

	cni := libcni.NewCNIConfigWithCacheDir([]string{bin}, filepath.Join(dir, "cache"), nil)
	rt := &libcni.RuntimeConf{
		ContainerID: "sandbox-1", NetNS: netns.Path(), IfName: "eth0",
		Args: [][2]string{{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "nginx"}, {"K8S_POD_UID", "uid-1"}},
	}
	res, err := cni.AddNetworkList(t.Context(), list, rt)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	checkAdded(t, res, netns.Path())
	if err := cni.CheckNetworkList(t.Context(), list, rt); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := cni.GetStatusNetworkList(t.Context(), list); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	for range 2 {
		if err := cni.DelNetworkList(t.Context(), list, rt); err != nil {
			t.Fatalf("DEL: %v", err)
		}
	}
	if ok, _ := plug.HostLinkExists("tap7d7cc334-bc"); ok || len(fakeOVS.Names()) != 0 {
		t.Errorf("after DEL: host end there %v, OVS ports %v", ok, fakeOVS.Names())
	}
}
