package server

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/wire"
	"github.com/raven-net/raven/pkg/annotations"
)

func decodeResult(t *testing.T, resp wire.Response) *current.Result {
	t.Helper()
	if resp.Error != nil {
		t.Fatalf("ADD failed: %v", resp.Error)
	}
	var r current.Result
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestAdd(t *testing.T) {
	tests := []struct {
		name string
		// pod is the pod in the API when ADD starts; later, when set, replaces it once the ADD waits for the
		// pod to change.
		pod, later   func(t *testing.T) *corev1.Pod
		readyTimeout time.Duration
		noOVN        bool
		wantErr      string
		wantCode     uint
		wantEvent    string
		fast         bool
	}{
		{
			name: "a pod with its port annotated is plugged",
			pod:  func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
		},
		{
			name:  "the annotation arrives late",
			pod:   func(t *testing.T) *corev1.Pod { return testPod(t) },
			later: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
		},
		{
			name: "an annotation for another pod UID is ignored until the right one comes",
			pod: func(t *testing.T) *corev1.Pod {
				return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.PodUID = "old-uid"; p.ID = "0000000000-old" })
			},
			later: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
		},
		{
			name: "a port without pod UID is refused at once with a Warning event",
			pod: func(t *testing.T) *corev1.Pod {
				return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.PodUID = "" })
			},
			readyTimeout: time.Minute, fast: true,
			wantErr:   "annotation names port " + testPort + " without a pod_uid",
			wantCode:  types.ErrInvalidNetworkConfig,
			wantEvent: "Warning InvalidPortAnnotation",
		},
		{
			name: "a port bound to another node fails at once with a Warning event",
			pod: func(t *testing.T) *corev1.Pod {
				return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.HostID = "node-b" })
			},
			readyTimeout: time.Minute, fast: true,
			wantErr:   "port " + testPort + " is bound to node node-b, not node-a",
			wantCode:  types.ErrInternal,
			wantEvent: "Warning PortBoundElsewhere",
		},
		{
			name:         "no annotation within the ready timeout",
			pod:          func(t *testing.T) *corev1.Pod { return testPod(t) },
			readyTimeout: 300 * time.Millisecond,
			wantErr:      "still waiting for the kuryr.org/neutron-port annotation",
			wantCode:     types.ErrTryAgainLater,
			wantEvent:    "Warning NetworkNotReady",
		},
		{
			name:         "ovn-controller never sets ovn-installed",
			pod:          func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
			readyTimeout: 300 * time.Millisecond, noOVN: true,
			wantErr:   "did not set external_ids:ovn-installed=true",
			wantCode:  types.ErrTryAgainLater,
			wantEvent: "Warning NetworkNotReady",
		},
		{
			name: "a pod deleted while its ADD waits for the annotation fails at once",
			pod:  func(t *testing.T) *corev1.Pod { return testPod(t) },
			later: func(t *testing.T) *corev1.Pod {
				p := testPod(t)
				now := metav1.Now()
				p.DeletionTimestamp = &now
				return p
			},
			readyTimeout: time.Minute, fast: true,
			wantErr:   "was deleted while its network was being set up",
			wantCode:  types.ErrTryAgainLater,
			wantEvent: "Warning NetworkNotReady",
		},
		{
			name: "an address outside the subnet is refused with a Warning event",
			pod: func(t *testing.T) *corev1.Pod {
				return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.FixedIPs[0].IPAddress = "10.9.9.9" })
			},
			fast:      true,
			wantErr:   "is not in subnet",
			wantCode:  types.ErrInvalidNetworkConfig,
			wantEvent: "Warning InvalidPortAnnotation",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := tt.readyTimeout
			if rt == 0 {
				rt = 10 * time.Second
			}
			e := newEnv(t, rt, tt.pod(t))
			e.ovs.NoOVNController = tt.noOVN
			ctx := t.Context()
			waits := make(chan string, 8)
			if tt.later != nil {
				ctx = klog.NewContext(ctx, klog.New(waitLog{waits: waits}))
			}
			start := time.Now()
			answer := make(chan wire.Response, 1)
			go func() { answer <- e.srv.Handle(ctx, request("ADD", "sandbox-1")) }()
			if tt.later != nil {
				// The change comes only once the ADD has read the pod and waits: the ADD sees it only if
				// the change wakes it.
				select {
				case what := <-waits:
					t.Logf("the ADD waits for %s", what)
				case resp := <-answer:
					t.Fatalf("the ADD answered %+v before it waited for the pod to change", resp)
				}
				e.update(t, tt.later(t))
			}
			resp := <-answer
			if tt.fast && time.Since(start) > 5*time.Second {
				t.Errorf("took %s, want an answer at once", time.Since(start))
			}
			events := e.events()
			if tt.wantErr != "" {
				checkFailedAdd(t, e, resp, events, tt.wantErr, tt.wantCode, tt.wantEvent)
				return
			}
			r := decodeResult(t, resp)
			checkResult(t, r)
			checkPlugged(t, e, "sandbox-1")
			if len(events) != 0 {
				t.Errorf("events %q after a successful ADD", events)
			}
			if len(e.plumber.setups) != 1 || e.plumber.setups[0].HostIfName != testTap {
				t.Errorf("setups %+v, want one of %s", e.plumber.setups, testTap)
			}
		})
	}
}

// checkFailedAdd: the ADD failed with this code and an error naming the pod and containing wantErr, one event
// starting with wantEvent was recorded, and no OVS port or veth is left.
func checkFailedAdd(t *testing.T, e *env, resp wire.Response, events []string, wantErr string, wantCode uint, wantEvent string) {
	t.Helper()
	if resp.Error == nil || !strings.Contains(resp.Error.Msg, wantErr) || resp.Error.Code != wantCode {
		t.Fatalf("error %+v, want code %d containing %q", resp.Error, wantCode, wantErr)
	}
	if !strings.Contains(resp.Error.Msg, "default/nginx") {
		t.Errorf("error %q does not name the pod", resp.Error.Msg)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], wantEvent) {
		t.Errorf("events %q, want one %q", events, wantEvent)
	}
	if names := e.ovs.Names(); len(names) != 0 {
		t.Errorf("OVS ports %v left after a failed ADD", names)
	}
	if links := e.plumber.hostLinks(); len(links) != 0 {
		t.Errorf("veths %v left after a failed ADD", links)
	}
}

func checkResult(t *testing.T, r *current.Result) {
	t.Helper()
	if len(r.Interfaces) != 2 || r.Interfaces[0].Name != testTap || r.Interfaces[1].Name != "eth0" ||
		r.Interfaces[1].Mac != "fa:16:3e:84:88:2a" || r.Interfaces[1].Sandbox != "/var/run/netns/sandbox-1" || r.Interfaces[1].Mtu != 1442 {
		t.Errorf("interfaces %+v %+v", r.Interfaces[0], r.Interfaces[1])
	}
	if len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.244.0.158/24" || r.IPs[0].Gateway.String() != "10.244.0.1" || *r.IPs[0].Interface != 1 {
		t.Errorf("IPs %+v", r.IPs)
	}
	var routes []string
	for _, rt := range r.Routes {
		routes = append(routes, rt.String())
	}
	if len(r.Routes) != 2 || r.Routes[0].Dst.String() != "0.0.0.0/0" || r.Routes[1].GW.String() != "10.244.0.254" {
		t.Errorf("routes %v", routes)
	}
}

// checkPlugged: the sandbox's interface is on the bridge with its veth; it returns the plug's ID.
func checkPlugged(t *testing.T, e *env, sandbox string) string {
	t.Helper()
	iface, ok, _ := e.ovs.Interface(t.Context(), testTap)
	if !ok {
		t.Fatalf("no OVS interface %s", testTap)
	}
	plugID := iface.ExternalIDs[ovs.KeyPlug]
	if plugID == "" {
		t.Errorf("external_ids %v without %s", iface.ExternalIDs, ovs.KeyPlug)
	}
	delete(iface.ExternalIDs, ovs.KeyPlug)
	want := map[string]string{
		"iface-id": testPort, "attached-mac": "fa:16:3e:84:88:2a", "iface-status": "active", "iface-id-ver": testUID,
		"raven-sandbox": sandbox, "raven-ifname": "eth0", "raven-netns": "/var/run/netns/" + sandbox,
		"raven-pod": "default/nginx", "raven-network": "raven", "ovn-installed": "true",
	}
	if !reflect.DeepEqual(iface.ExternalIDs, want) {
		t.Errorf("external_ids %v, want %v", iface.ExternalIDs, want)
	}
	if links := e.plumber.hostLinks(); !reflect.DeepEqual(links, []string{testTap}) {
		t.Errorf("veths %v", links)
	}
	return plugID
}

// The runtime of one node asking the plugin of another: the pod is not in this node's cache, and the API
// server says it runs elsewhere. ADD fails at once, names both nodes, and leaves nothing behind.
func TestAddForAPodOfAnotherNodeFailsAtOnce(t *testing.T) {
	e := newEnv(t, time.Minute)
	elsewhere := testPod(t, annotated)
	elsewhere.Spec.NodeName = "node-b"
	e.srv.cfg.Lookup = func(context.Context, string, string) (*corev1.Pod, error) { return elsewhere, nil }
	start := time.Now()
	resp := e.srv.Handle(t.Context(), request("ADD", "sandbox-1"))
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s, want an answer at once", time.Since(start))
	}
	checkFailedAdd(t, e, resp, e.events(), "pod default/nginx is scheduled to node node-b, not node-a", types.ErrInternal, "Warning PortBoundElsewhere")
}

func TestAddAfterAFailedAdd(t *testing.T) {
	e := newEnv(t, 300*time.Millisecond, testPod(t, annotated))
	e.ovs.NoOVNController = true
	if resp := e.srv.Handle(t.Context(), request("ADD", "sandbox-1")); resp.Error == nil {
		t.Fatal("first ADD succeeded without ovn-installed")
	}
	// The runtime deletes the failed sandbox and tries with a new one.
	if resp := e.srv.Handle(t.Context(), request("DEL", "sandbox-1")); resp.Error != nil {
		t.Fatal(resp.Error)
	}
	e.ovs.NoOVNController = false
	decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-2")))
	checkPlugged(t, e, "sandbox-2")
}

func TestAddTakesOverTheInterfaceOfAnOlderSandbox(t *testing.T) {
	e := newEnv(t, 10*time.Second, testPod(t, annotated))
	decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
	first := checkPlugged(t, e, "sandbox-1")
	// The runtime made a new sandbox before the old one's DEL.
	decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-2")))
	if second := checkPlugged(t, e, "sandbox-2"); second == first {
		t.Errorf("both plugs wrote %s=%s: the second ADD could take the first row's ovn-installed for its own", ovs.KeyPlug, first)
	}
	// The older sandbox's DEL comes late and must not unplug the new one.
	if resp := e.srv.Handle(t.Context(), request("DEL", "sandbox-1")); resp.Error != nil {
		t.Fatal(resp.Error)
	}
	checkPlugged(t, e, "sandbox-2")
}

func TestDel(t *testing.T) {
	tests := []struct {
		name      string
		dels      []string
		wantPorts []string
	}{
		{name: "DEL unplugs the pod", dels: []string{"sandbox-1"}},
		{name: "DEL twice is fine", dels: []string{"sandbox-1", "sandbox-1"}},
		{name: "DEL for an older sandbox of the pod is ignored", dels: []string{"sandbox-0"}, wantPorts: []string{testTap}},
		{name: "DEL of a sandbox never plugged is fine", dels: []string{"sandbox-9"}, wantPorts: []string{testTap}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 10*time.Second, testPod(t, annotated))
			decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
			for _, sb := range tt.dels {
				if resp := e.srv.Handle(t.Context(), request("DEL", sb)); resp.Error != nil {
					t.Fatalf("DEL %s: %v", sb, resp.Error)
				}
			}
			if got := e.ovs.Names(); !reflect.DeepEqual(got, tt.wantPorts) {
				t.Errorf("OVS ports %v, want %v", got, tt.wantPorts)
			}
			if got := e.plumber.hostLinks(); !reflect.DeepEqual(got, tt.wantPorts) {
				t.Errorf("veths %v, want %v", got, tt.wantPorts)
			}
		})
	}
}

func TestDelNeverWaitsOnTheController(t *testing.T) {
	e := newEnv(t, time.Minute) // no pod at all
	start := time.Now()
	if resp := e.srv.Handle(t.Context(), request("DEL", "sandbox-1")); resp.Error != nil {
		t.Fatal(resp.Error)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("DEL took %s", d)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(e *env)
		wantErr string
	}{
		{name: "a plugged pod passes"},
		{name: "a missing OVS port fails", breakIt: func(e *env) { _ = e.ovs.DelPort(context.Background(), testTap) }, wantErr: "OVS has no interface"},
		{name: "a wrong iface-id fails", breakIt: func(e *env) {
			iface, _, _ := e.ovs.Interface(context.Background(), testTap)
			iface.ExternalIDs[ovs.KeyIfaceID] = "other"
			e.ovs.Set(testTap, iface.ExternalIDs)
		}, wantErr: "has iface-id \"other\""},
		{name: "a wrong MTU fails", breakIt: func(e *env) {
			e.plumber.mu.Lock()
			s := e.plumber.links[testTap]
			s.MTU = 1500
			e.plumber.links[testTap] = s
			e.plumber.mu.Unlock()
		}, wantErr: "MTU 1500, want 1442"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 10*time.Second, testPod(t, annotated))
			decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
			if tt.breakIt != nil {
				tt.breakIt(e)
			}
			resp := e.srv.Handle(t.Context(), request("CHECK", "sandbox-1"))
			if tt.wantErr == "" && resp.Error != nil || tt.wantErr != "" && (resp.Error == nil || !strings.Contains(resp.Error.Msg, tt.wantErr)) {
				t.Errorf("CHECK = %v, want error containing %q", resp.Error, tt.wantErr)
			}
		})
	}
}

// GC for one network (the request's name, with its valid attachments) on a bridge with interfaces of
// that network, of another network served by raven-cni too (Multus), and of neither.
func TestGC(t *testing.T) {
	iface := func(network, sandbox, ifName string) map[string]string {
		ids := map[string]string{ovs.KeyIfaceID: "p-" + sandbox + "-" + ifName, ovs.KeySandbox: sandbox, ovs.KeyIfName: ifName}
		if network != "" {
			ids[ovs.KeyNetwork] = network
		}
		return ids
	}
	bridge := map[string]map[string]string{
		"tapkept":    iface("raven", "kept", "eth0"),
		"tapstale":   iface("raven", "stale", "eth0"),
		"tapotherif": iface("raven", "kept", "net1"),
		"tapsecond":  iface("second", "kept", "net1"),
		"tapsecondx": iface("second", "stale", "net1"),
		"tapunnamed": iface("", "stale", "eth0"),
		"foreign":    {ovs.KeyIfaceID: "someone-elses"},
	}
	tests := []struct {
		name    string
		network string
		valid   []types.GCAttachment
		want    []string
		wantErr string
	}{
		{
			name:    "GC of a network removes only its attachments that are not valid, never another network's",
			network: "raven", valid: []types.GCAttachment{{ContainerID: "kept", IfName: "eth0"}},
			want: []string{"foreign", "tapkept", "tapsecond", "tapsecondx", "tapunnamed"},
		},
		{
			name:    "GC of the other network leaves the first network's attachments alone",
			network: "second", valid: []types.GCAttachment{{ContainerID: "kept", IfName: "net1"}},
			want: []string{"foreign", "tapkept", "tapotherif", "tapsecond", "tapstale", "tapunnamed"},
		},
		{
			name:    "GC without valid attachments removes every attachment of its network only",
			network: "second",
			want:    []string{"foreign", "tapkept", "tapotherif", "tapstale", "tapunnamed"},
		},
		{
			name: "GC of a configuration without a network name is refused and removes nothing",
			want: slices.Sorted(maps.Keys(bridge)), wantErr: `network configuration has no "name"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, time.Second)
			for name, ids := range bridge {
				e.ovs.Set(name, ids)
				e.plumber.links[name] = plug.Spec{HostIfName: name}
			}
			conf, _ := json.Marshal(map[string]any{
				"cniVersion": "1.1.0", "name": tt.network, "type": "raven-cni", "cni.dev/valid-attachments": tt.valid,
			})
			resp := e.srv.Handle(t.Context(), wire.Request{Command: "GC", Config: conf})
			if tt.wantErr == "" && resp.Error != nil || tt.wantErr != "" && (resp.Error == nil || !strings.Contains(resp.Error.Msg, tt.wantErr)) {
				t.Fatalf("GC = %v, want error containing %q", resp.Error, tt.wantErr)
			}
			if got := e.ovs.Names(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("OVS ports after GC %v, want %v", got, tt.want)
			}
			if got := e.plumber.hostLinks(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("veths after GC %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		name     string
		health   error
		wantCode uint
	}{
		{name: "OVS answers"},
		{name: "OVS does not answer", health: errors.New("ovn-controller is not running"), wantCode: types.ErrPluginNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, time.Second)
			e.ovs.HealthErr = tt.health
			resp := e.srv.Handle(t.Context(), wire.Request{Command: "STATUS", Config: []byte(`{"cniVersion":"1.1.0"}`)})
			if tt.wantCode == 0 && resp.Error != nil || tt.wantCode != 0 && (resp.Error == nil || resp.Error.Code != tt.wantCode) {
				t.Errorf("STATUS = %+v, want code %d", resp.Error, tt.wantCode)
			}
		})
	}
}

func TestPodsChangedWakesOnlyTheWaitersOfThatPod(t *testing.T) {
	podOf := func(ns, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	tests := []struct {
		name     string
		change   any
		wantWake bool
	}{
		{name: "an update of the pod", change: podOf("ns", "a"), wantWake: true},
		{name: "the pod's deletion, seen late", change: cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: podOf("ns", "a")}, wantWake: true},
		{name: "another pod of the namespace", change: podOf("ns", "b")},
		{name: "a pod of that name in another namespace", change: podOf("other", "a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pods{changed: map[string]chan struct{}{}}
			ch := p.Changed("ns", "a")
			p.notify(tt.change)
			select {
			case <-ch:
				if !tt.wantWake {
					t.Fatal("the waiter of ns/a was woken")
				}
				if again := p.Changed("ns", "a"); again == ch {
					t.Fatal("a woken waiter's next wait got the closed channel")
				}
			default:
				if tt.wantWake {
					t.Fatal("the waiter of ns/a was not woken")
				}
			}
		})
	}
}
