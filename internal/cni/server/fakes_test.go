package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/ovs/ovsfake"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/wire"
	"github.com/raven-net/raven/pkg/annotations"
)

const (
	testNode = "node-a"
	testUID  = "b17c530f-c3a1-4720-99fa-e5548c46ce33"
	testPort = "7d7cc334-bcde-4c94-b684-c184e3d1b46d"
	testTap  = "tap7d7cc334-bc"
)

// fakePlumber keeps veth pairs by host name, failing as the kernel would on a name in use.
type fakePlumber struct {
	mu       sync.Mutex
	links    map[string]plug.Spec
	setups   []plug.Spec
	setupErr error
	// gatewayErr makes WaitGateway wait out its context and fail with it (a gateway that never answers).
	gatewayErr error
	// noHostEnd makes Setup answer no host end, as a VLAN link has none.
	noHostEnd bool
}

func newFakePlumber() *fakePlumber { return &fakePlumber{links: map[string]plug.Spec{}} }

func (f *fakePlumber) Setup(_ context.Context, spec plug.Spec) (plug.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setupErr != nil {
		return plug.Result{}, f.setupErr
	}
	if _, ok := f.links[spec.HostIfName]; ok {
		return plug.Result{}, fmt.Errorf("link %s exists", spec.HostIfName)
	}
	f.links[spec.HostIfName] = spec
	f.setups = append(f.setups, spec)
	res := plug.Result{Pod: net.Interface{Name: spec.IfName, HardwareAddr: spec.MAC, MTU: spec.MTU, Index: 2}}
	if !f.noHostEnd {
		hostMAC, _ := net.ParseMAC("02:00:00:00:00:01")
		res.Host = net.Interface{Name: spec.HostIfName, HardwareAddr: hostMAC, MTU: spec.MTU, Index: 10}
	}
	return res, nil
}

func (f *fakePlumber) Teardown(_ context.Context, netns, ifName, hostIfName string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.links, hostIfName)
	for name, s := range f.links {
		if netns != "" && s.Netns == netns && s.IfName == ifName {
			delete(f.links, name)
		}
	}
	return nil
}

func (f *fakePlumber) Inspect(_ context.Context, netns, ifName string) (plug.Observed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.links {
		if s.Netns == netns && s.IfName == ifName {
			return plug.Observed{MAC: s.MAC, MTU: s.MTU, Up: true, Addrs: []*net.IPNet{s.Address}, VLAN: s.VLAN}, nil
		}
	}
	return plug.Observed{}, fmt.Errorf("no %s in %s", ifName, netns)
}

func (f *fakePlumber) hostLinks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.links))
}

// env is a server over a fake clientset, a fake OVS and a fake plumber.
type env struct {
	cs       *fake.Clientset
	ovs      *ovsfake.OVS
	plumber  *fakePlumber
	recorder *record.FakeRecorder
	srv      *Server
}

func newEnv(t *testing.T, readyTimeout time.Duration, pods ...*corev1.Pod) *env {
	t.Helper()
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	cs := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	podCache, err := NewPods(inf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("cache did not sync")
	}
	e := &env{cs: cs, ovs: ovsfake.New(), plumber: newFakePlumber(), recorder: record.NewFakeRecorder(20)}
	e.srv = New(Config{
		Node: testNode, ReadyTimeout: readyTimeout, Pods: podCache, OVS: e.ovs, Plumber: e.plumber, Recorder: e.recorder,
	})
	return e
}

func (e *env) update(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := e.cs.CoreV1().Pods(pod.Namespace).Update(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// portOpts changes the port annotation of testPod.
type portOpts func(p *annotations.Port, s *annotations.Subnet)

func testPod(t *testing.T, opts ...portOpts) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nginx", UID: k8stypes.UID(testUID)},
		Spec:       corev1.PodSpec{NodeName: testNode},
	}
	if opts == nil {
		return p
	}
	port := annotations.Port{
		ID: testPort, MACAddress: "fa:16:3e:84:88:2a", HostID: testNode, PodUID: testUID,
		FixedIPs: []annotations.FixedIP{{SubnetID: "sub-1", IPAddress: "10.244.0.158"}},
	}
	subnet := annotations.Subnet{
		ID: "sub-1", CIDR: "10.244.0.0/24", GatewayIP: "10.244.0.1", IPVersion: 4,
		HostRoutes: []annotations.HostRoute{{Destination: "192.168.50.0/24", NextHop: "10.244.0.254"}},
	}
	for _, o := range opts {
		o(&port, &subnet)
	}
	ps, _ := annotations.Encode(port)
	ss, _ := annotations.Encode(subnet)
	p.Annotations = map[string]string{annotations.PodPort: ps, annotations.PodSubnet: ss}
	return p
}

func annotated(*annotations.Port, *annotations.Subnet) {}

func request(command, sandbox string) wire.Request {
	conf, _ := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "raven", "type": "raven-cni"})
	return wire.Request{
		Command: command, ContainerID: sandbox, Netns: "/var/run/netns/" + sandbox, IfName: "eth0",
		Args:   "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=nginx;K8S_POD_UID=" + testUID + ";K8S_POD_INFRA_CONTAINER_ID=" + sandbox,
		Config: conf,
	}
}

// waitLog is a log sink that passes on what an ADD logs it waits for ("Waiting", with "for", at -v=2): the
// ADD has read the pod and waits for its next change. Everything else is dropped.
type waitLog struct{ waits chan<- string }

func (w waitLog) Init(klog.RuntimeInfo) {}
func (w waitLog) Enabled(int) bool      { return true }
func (w waitLog) Info(_ int, msg string, kvs ...any) {
	if msg != "Waiting" {
		return
	}
	for i := 0; i+1 < len(kvs); i += 2 {
		if kvs[i] == "for" {
			select {
			case w.waits <- fmt.Sprint(kvs[i+1]):
			default:
			}
		}
	}
}
func (w waitLog) Error(error, string, ...any)    {}
func (w waitLog) WithValues(...any) klog.LogSink { return w }
func (w waitLog) WithName(string) klog.LogSink   { return w }

// WaitGateway implements Plumber: the gateway answers at once unless gatewayErr is set.
func (f *fakePlumber) WaitGateway(ctx context.Context, _ plug.Spec, _ net.IP) error {
	f.mu.Lock()
	err := f.gatewayErr
	f.mu.Unlock()
	if err != nil {
		<-ctx.Done()
		return err
	}
	return nil
}
