package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/wire"
	"github.com/raven-net/raven/pkg/annotations"
)

// nestedPort makes testPod's port a subport of a trunk for node, on vlan, unbound as Raven leaves it.
func nestedPort(node string, vlan int) portOpts {
	return func(p *annotations.Port, _ *annotations.Subnet) {
		p.HostID = ""
		p.Nested = &annotations.Nested{Node: node, VLAN: vlan, TrunkID: "trunk-1", ParentPortID: "vmport"}
	}
}

// On a nested node, a pod's port is plugged as an access port of its subport's VLAN, and the ADD ends when
// the gateway answers ARP, with no ovn-controller in the VM; the ports that do not fit the node fail with a
// Warning event a person can act on.
func TestAddNested(t *testing.T) {
	tests := []struct {
		name        string
		nestedNode  bool
		opts        portOpts
		gatewayDown bool
		wantTag     int
		wantErr     string
		wantEvent   string
	}{
		{name: "a subport is plugged on its VLAN", nestedNode: true, opts: nestedPort(testNode, 42), wantTag: 42},
		{name: "a subport on a node whose raven-node is not nested", opts: nestedPort(testNode, 42),
			wantErr: "was not started with --nested", wantEvent: ReasonNotNested},
		{name: "a chassis port on a nested node", nestedNode: true, opts: annotated,
			wantErr: "raven-node runs with --nested", wantEvent: ReasonNotNested},
		{name: "a subport of another node's trunk", nestedNode: true, opts: nestedPort("vm-2", 42),
			wantErr: "vm-2", wantEvent: ReasonPortBoundElsewhere},
		{name: "a VLAN out of range", nestedNode: true, opts: nestedPort(testNode, 4095),
			wantErr: "outside 1-4094", wantEvent: ReasonNotNested},
		{name: "a gateway that does not answer", nestedNode: true, opts: nestedPort(testNode, 42), gatewayDown: true,
			wantErr: "did not answer ARP", wantEvent: ReasonNetworkNotReady},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2*time.Second, testPod(t, tc.opts))
			e.srv.cfg.Nested = tc.nestedNode
			e.ovs.NoOVNController = true // inside a VM nothing sets ovn-installed
			if tc.gatewayDown {
				e.plumber.gatewayErr = errors.New("no answer")
			}
			resp := e.srv.Handle(t.Context(), request("ADD", "sandbox-1"))
			if tc.wantErr == "" {
				if resp.Error != nil {
					t.Fatalf("ADD failed: %+v", resp.Error)
				}
				if got := e.ovs.TagOf(HostIfName(testPort)); got != tc.wantTag {
					t.Fatalf("the port's tag is %d, want %d", got, tc.wantTag)
				}
				return
			}
			if resp.Error == nil || !strings.Contains(resp.Error.Msg+resp.Error.Details, tc.wantErr) {
				t.Fatalf("ADD answered %+v, want an error saying %q", resp.Error, tc.wantErr)
			}
			if ev := strings.Join(e.events(), "\n"); !strings.Contains(ev, tc.wantEvent) {
				t.Errorf("events %q, want a %s Warning", ev, tc.wantEvent)
			}
			if links := e.plumber.hostLinks(); len(links) != 0 {
				t.Errorf("a failed ADD left %v", links)
			}
		})
	}
}

// ovsCalls is an ovs.Client that records every call and fails it: the kernel-VLAN path must make none.
type ovsCalls struct {
	mu    sync.Mutex
	calls []string
}

var _ ovs.Client = (*ovsCalls)(nil)

func (o *ovsCalls) record(call string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, call)
	return fmt.Errorf("OVS called (%s) on the kernel-VLAN path", call)
}

func (o *ovsCalls) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.calls)
}

func (o *ovsCalls) AddPort(context.Context, string, int, map[string]string) error {
	return o.record("AddPort")
}
func (o *ovsCalls) DelPort(context.Context, string) error { return o.record("DelPort") }
func (o *ovsCalls) SetExternalIDs(context.Context, string, map[string]string, ...string) error {
	return o.record("SetExternalIDs")
}
func (o *ovsCalls) Interface(context.Context, string) (ovs.Interface, bool, error) {
	return ovs.Interface{}, false, o.record("Interface")
}
func (o *ovsCalls) Interfaces(context.Context) ([]ovs.Interface, error) {
	return nil, o.record("Interfaces")
}
func (o *ovsCalls) WaitInstalled(context.Context, string, map[string]string) error {
	return o.record("WaitInstalled")
}
func (o *ovsCalls) Health(context.Context) error { return o.record("Health") }

// newVLANEnv is a nested node on the kernel-VLAN path: its pods' interfaces are VLAN links on eth0, the uplink
// is healthy, and its OVS records the calls that must not come.
func newVLANEnv(t *testing.T, pods ...*corev1.Pod) (*env, *ovsCalls) {
	t.Helper()
	e := newEnv(t, 2*time.Second, pods...)
	calls := &ovsCalls{}
	e.srv.cfg.OVS, e.ovs = calls, nil
	e.srv.cfg.Nested, e.srv.cfg.VLANUplink = true, "eth0"
	e.srv.cfg.Health = func(context.Context) error { return nil }
	e.plumber.noHostEnd = true
	return e, calls
}

// On the kernel-VLAN path (raven-node --nested --vlan-uplink) every verb works on the pod's VLAN link alone:
// ADD hands the plumber the subport's VLAN and joins no bridge, CHECK compares the link's VLAN too, DEL deletes
// the link in the pod's namespace, GC and STATUS need no OVS, and nothing follows a bridge. No case calls OVS.
func TestKernelVLANPath(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{name: "ADD makes the pod's interface a link of its subport's VLAN and answers that interface alone", run: vlanAdd},
		{name: "an ADD whose gateway does not answer leaves no link, and names the NIC that must reach the trunk", run: vlanAddGatewayDown},
		{name: "an ADD the kernel refuses for want of 8021q says so on the pod", run: vlanAddNo8021q},
		{name: "CHECK compares the pod's link with the port, its VLAN too", run: vlanCheck},
		{name: "DEL deletes the link in the pod's namespace, and may be repeated", run: vlanDel},
		{name: "GC finds nothing outside the pods' namespaces to remove", run: vlanGC},
		{name: "STATUS is the uplink's health", run: vlanStatus},
		{name: "no bridge's interfaces are followed", run: vlanNoFollow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, calls := newVLANEnv(t, testPod(t, nestedPort(testNode, 42)))
			tt.run(t, e)
			if c := calls.list(); len(c) > 0 {
				t.Errorf("OVS was called on the kernel-VLAN path: %v", c)
			}
		})
	}
}

func vlanAdd(t *testing.T, e *env) {
	r := decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
	if len(e.plumber.setups) != 1 || e.plumber.setups[0].VLAN != 42 || e.plumber.setups[0].IfName != "eth0" {
		t.Fatalf("Setup was asked for %+v, want eth0 on VLAN 42", e.plumber.setups)
	}
	if len(r.Interfaces) != 1 || r.Interfaces[0].Name != "eth0" || r.Interfaces[0].Sandbox != "/var/run/netns/sandbox-1" ||
		r.Interfaces[0].Mac != "fa:16:3e:84:88:2a" {
		t.Errorf("interfaces %+v, want the pod's eth0 alone", r.Interfaces)
	}
	if len(r.IPs) != 1 || r.IPs[0].Interface == nil || *r.IPs[0].Interface != 0 || r.IPs[0].Address.String() != "10.244.0.158/24" {
		t.Errorf("IPs %+v, want the port's address on interface 0", r.IPs)
	}
}

func vlanAddGatewayDown(t *testing.T, e *env) {
	e.plumber.gatewayErr = errors.New("no answer")
	resp := e.srv.Handle(t.Context(), request("ADD", "sandbox-1"))
	want := "plugged as eth0, a VLAN 42 link on eth0, but the gateway 10.244.0.1 did not answer ARP"
	if resp.Error == nil || !strings.Contains(resp.Error.Msg, want) || !strings.Contains(resp.Error.Msg, "is eth0 the VM's NIC whose port (vmport) is the trunk's parent") {
		t.Fatalf("ADD answered %+v, want an error saying %q and naming the NIC and the trunk's parent", resp.Error, want)
	}
	if links := e.plumber.hostLinks(); len(links) != 0 {
		t.Errorf("a failed ADD left %v", links)
	}
	if ev := strings.Join(e.events(), "\n"); !strings.Contains(ev, ReasonNetworkNotReady) {
		t.Errorf("events %q, want a %s Warning", ev, ReasonNetworkNotReady)
	}
}

func vlanAddNo8021q(t *testing.T, e *env) {
	e.plumber.setupErr = errors.New("making VLAN link tap7d7cc334-bc (VLAN 42 on eth0): the kernel has no 802.1Q VLAN support (modprobe 8021q on the node, and have it loaded at boot): operation not supported")
	resp := e.srv.Handle(t.Context(), request("ADD", "sandbox-1"))
	if resp.Error == nil || !strings.Contains(resp.Error.Msg, "modprobe 8021q") {
		t.Fatalf("ADD answered %+v, want the kernel's want of 8021q", resp.Error)
	}
	if ev := strings.Join(e.events(), "\n"); !strings.Contains(ev, ReasonPlugFailed) || !strings.Contains(ev, "modprobe 8021q") {
		t.Errorf("events %q, want a %s Warning that says modprobe 8021q", ev, ReasonPlugFailed)
	}
}

func vlanCheck(t *testing.T, e *env) {
	decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
	if resp := e.srv.Handle(t.Context(), request("CHECK", "sandbox-1")); resp.Error != nil {
		t.Fatalf("CHECK of a plugged pod: %v", resp.Error)
	}
	e.plumber.mu.Lock()
	s := e.plumber.links[testTap]
	s.VLAN = 7
	e.plumber.links[testTap] = s
	e.plumber.mu.Unlock()
	if resp := e.srv.Handle(t.Context(), request("CHECK", "sandbox-1")); resp.Error == nil || !strings.Contains(resp.Error.Msg, "VLAN 7, want 42") {
		t.Errorf("CHECK of a link on another VLAN = %v, want an error saying VLAN 7, want 42", resp.Error)
	}
}

func vlanDel(t *testing.T, e *env) {
	decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
	for range 2 {
		if resp := e.srv.Handle(t.Context(), request("DEL", "sandbox-1")); resp.Error != nil {
			t.Fatalf("DEL: %v", resp.Error)
		}
		if links := e.plumber.hostLinks(); len(links) != 0 {
			t.Fatalf("links %v left after DEL", links)
		}
	}
	noNetns := request("DEL", "sandbox-1")
	noNetns.Netns = ""
	if resp := e.srv.Handle(t.Context(), noNetns); resp.Error != nil {
		t.Errorf("DEL without a namespace: %v", resp.Error)
	}
}

func vlanGC(t *testing.T, e *env) {
	decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
	conf, _ := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "raven", "type": "raven-cni"})
	if resp := e.srv.Handle(t.Context(), wire.Request{Command: "GC", Config: conf}); resp.Error != nil {
		t.Fatalf("GC: %v", resp.Error)
	}
	if links := e.plumber.hostLinks(); !slices.Equal(links, []string{testTap}) {
		t.Errorf("links %v after GC, want the pod's (it goes with its namespace)", links)
	}
}

func vlanStatus(t *testing.T, e *env) {
	status := wire.Request{Command: "STATUS", Config: []byte(`{"cniVersion":"1.1.0"}`)}
	if resp := e.srv.Handle(t.Context(), status); resp.Error != nil {
		t.Fatalf("STATUS with the uplink up: %v", resp.Error)
	}
	e.srv.cfg.Health = func(context.Context) error { return errors.New("the VLAN uplink eth0 is down") }
	resp := e.srv.Handle(t.Context(), status)
	if resp.Error == nil || resp.Error.Code != types.ErrPluginNotAvailable || !strings.Contains(resp.Error.Msg, "eth0 is down") {
		t.Errorf("STATUS with the uplink down = %+v, want code %d saying so", resp.Error, types.ErrPluginNotAvailable)
	}
}

func vlanNoFollow(t *testing.T, e *env) {
	done := make(chan struct{})
	go func() {
		e.srv.Follow(t.Context())
		e.srv.WatchBindings(t.Context())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow or WatchBindings still runs on the kernel-VLAN path")
	}
}
