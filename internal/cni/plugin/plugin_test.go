package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/raven-net/raven/internal/cni/ovs/ovsfake"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/server"
	"github.com/raven-net/raven/pkg/annotations"
)

// plumber pretends every namespace operation works.
type plumber struct{}

func (plumber) Setup(_ context.Context, s plug.Spec) (plug.Result, error) {
	return plug.Result{Host: net.Interface{Name: s.HostIfName}, Pod: net.Interface{Name: s.IfName, HardwareAddr: s.MAC}}, nil
}
func (plumber) Teardown(context.Context, string, string, string) error { return nil }
func (plumber) Inspect(context.Context, string, string) (plug.Observed, error) {
	return plug.Observed{}, errors.New("not used")
}
func (plumber) Readdress(context.Context, plug.Spec) error { return errors.New("not used") }

func (plumber) WaitGateway(context.Context, plug.Spec, net.IP) error { return errors.New("not used") }

func annotatedPod(t *testing.T) *corev1.Pod {
	t.Helper()
	port, _ := annotations.Encode(annotations.Port{
		ID: "7d7cc334-bcde-4c94-b684-c184e3d1b46d", MACAddress: "fa:16:3e:84:88:2a", HostID: "node-a", PodUID: "uid-1",
		FixedIPs: []annotations.FixedIP{{SubnetID: "s", IPAddress: "10.244.0.158"}},
	})
	subnet, _ := annotations.Encode(annotations.Subnet{ID: "s", CIDR: "10.244.0.0/24", GatewayIP: "10.244.0.1"})
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "nginx", UID: "uid-1",
		Annotations: map[string]string{annotations.PodPort: port, annotations.PodSubnet: subnet},
	}}
}

// startServer runs raven-node's server on a real unix socket.
func startServer(t *testing.T, socket string) {
	t.Helper()
	cs := fake.NewClientset(annotatedPod(t))
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	pods, err := server.NewPods(inf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	srv := server.New(server.Config{
		Node: "node-a", ReadyTimeout: 5 * time.Second, Pods: pods, OVS: ovsfake.New(), Plumber: plumber{},
		Recorder: record.NewFakeRecorder(10),
	})
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
			t.Errorf("Serve: %v", err)
		}
	})
}

func cmdArgs(socket, cniVersion string) *skel.CmdArgs {
	conf, _ := json.Marshal(map[string]any{"cniVersion": cniVersion, "name": "raven", "type": "raven-cni", "socket": socket})
	return &skel.CmdArgs{
		ContainerID: "sandbox-1", Netns: "/var/run/netns/default_nginx", IfName: "eth0",
		Args:      "K8S_POD_NAMESPACE=default;K8S_POD_NAME=nginx;K8S_POD_UID=uid-1",
		StdinData: conf,
	}
}

// currentResult decodes a result of the current CNI version.
func currentResult(t *testing.T, out []byte) current.Result {
	t.Helper()
	var r current.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAddThroughTheSocket(t *testing.T) {
	tests := []struct {
		name       string
		cniVersion string
		check      func(t *testing.T, out []byte)
	}{
		{name: "a 1.1.0 result", cniVersion: "1.1.0", check: func(t *testing.T, out []byte) {
			if r := currentResult(t, out); r.CNIVersion != "1.1.0" || len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.244.0.158/24" ||
				r.IPs[0].Gateway.String() != "10.244.0.1" || r.Interfaces[1].Mac != "fa:16:3e:84:88:2a" {
				t.Errorf("result %s", out)
			}
		}},
		{name: "a 1.0.0 result, as containerd 1.7's libcni reads it", cniVersion: "1.0.0", check: func(t *testing.T, out []byte) {
			if r := currentResult(t, out); r.CNIVersion != "1.0.0" || len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.244.0.158/24" {
				t.Errorf("result %s", out)
			}
		}},
		{name: "a result converted to 0.4.0", cniVersion: "0.4.0", check: func(t *testing.T, out []byte) {
			if !strings.Contains(string(out), `"cniVersion": "0.4.0"`) || !strings.Contains(string(out), "10.244.0.158/24") {
				t.Errorf("result %s", out)
			}
		}},
	}
	socket := filepath.Join(t.TempDir(), "run", "cni.sock")
	startServer(t, socket)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &Plugin{Stdout: &out}
			if err := p.Funcs(t.Context()).Add(cmdArgs(socket, tt.cniVersion)); err != nil {
				t.Fatal(err)
			}
			tt.check(t, out.Bytes())
			if err := p.Funcs(t.Context()).Del(cmdArgs(socket, tt.cniVersion)); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		})
	}
}

func TestTheDaemonIsNotRunning(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "cni.sock")
	for _, verb := range []string{"ADD", "STATUS"} {
		t.Run(verb, func(t *testing.T) {
			p := &Plugin{Stdout: &bytes.Buffer{}}
			f := p.Funcs(t.Context())
			run := map[string]func(*skel.CmdArgs) error{"ADD": f.Add, "STATUS": f.Status}[verb]
			err := run(cmdArgs(socket, "1.1.0"))
			var cniErr *types.Error
			if !errors.As(err, &cniErr) || cniErr.Code != types.ErrPluginNotAvailable ||
				!strings.Contains(cniErr.Msg, "raven-node not reachable at "+socket+": is the raven-node DaemonSet running on this node?") {
				t.Errorf("err = %v", err)
			}
		})
	}
}
