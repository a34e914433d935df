package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/pkg/annotations"
)

// Readdress implements Plumber: the pod end of the namespace gets spec's MAC, address and routes.
func (f *fakePlumber) Readdress(_ context.Context, spec plug.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, s := range f.links {
		if s.Netns == spec.Netns && s.IfName == spec.IfName {
			s.MAC, s.Address, s.Routes = spec.MAC, spec.Address, spec.Routes
			f.links[name] = s
			return nil
		}
	}
	return fmt.Errorf("no %s in %s", spec.IfName, spec.Netns)
}

// The port that replaces testPort in the tests.
const newPort = "0be1a8e6-5b1f-4c55-9d4e-8a8f5d7c6e21"

// remade is the annotation of testPod once its port was made again with its MAC and IP.
func remade(p *annotations.Port, _ *annotations.Subnet) { p.ID = newPort }

// readdressed is the annotation of testPod once its port was replaced by one with another MAC and IP.
func readdressed(p *annotations.Port, _ *annotations.Subnet) {
	p.ID, p.MACAddress, p.FixedIPs[0].IPAddress = newPort, "fa:16:3e:00:00:07", "10.244.0.7"
}

// waitEvent returns the next event the server posts, or fails the test after a while.
func waitEvent(t *testing.T, e *env) string {
	t.Helper()
	select {
	case ev := <-e.recorder.Events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
		return ""
	}
}

// follow runs the server's Follow for the rest of the test, and returns once Follow watches the pods' updates:
// an update made before would reach no handler (on a busy machine it did).
func follow(t *testing.T, e *env) {
	t.Helper()
	pods := e.srv.cfg.Pods
	hooks := func() int { pods.mu.Lock(); defer pods.mu.Unlock(); return len(pods.updated) }
	before := hooks()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); e.srv.Follow(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for hooks() == before {
		if time.Now().After(deadline) {
			t.Fatal("Follow did not watch the pods' updates within 10 s")
		}
		select {
		case <-done:
			return // Follow has nothing to follow on this node
		case <-time.After(time.Millisecond):
		}
	}
}

// followCase is a change of a running pod's annotation, and what its interface and pod end look like after.
type followCase struct {
	name string
	// restart: the annotation changes while raven-node is down; a new server starts on the same OVS.
	restart bool
	// change is the pod's new annotation; breakIt, when set, runs before it.
	change  portOpts
	breakIt func(e *env)
	// want*: the interface's iface-id and attached-mac, and the pod end's MAC and address afterwards.
	wantIfaceID, wantMAC, wantAddr string
	wantEvent                      []string
}

// A running pod whose annotation names another port: its interface follows, its eth0 gets the new port's
// MAC and IP when they differ, and an event on the pod says what happened.
func TestARunningPodFollowsItsPort(t *testing.T) {
	tests := []followCase{
		{
			name:   "the port made again with its MAC and IP: the interface points at it, eth0 keeps its address",
			change: remade, wantIfaceID: newPort, wantMAC: "fa:16:3e:84:88:2a", wantAddr: "10.244.0.158/24",
			wantEvent: []string{"Normal " + ReasonPortChanged, testPort, newPort, testTap, "same MAC"},
		},
		{
			name:   "a port with another MAC and IP: eth0 gets them, and the event says the IP changed",
			change: readdressed, wantIfaceID: newPort, wantMAC: "fa:16:3e:00:00:07", wantAddr: "10.244.0.7/24",
			wantEvent: []string{"Normal " + ReasonPortChanged, testPort, newPort, "10.244.0.158", "10.244.0.7", "status.podIP"},
		},
		{
			name:    "after a restart, a change made while raven-node was down is found from OVS",
			restart: true, change: remade, wantIfaceID: newPort, wantMAC: "fa:16:3e:84:88:2a", wantAddr: "10.244.0.158/24",
			wantEvent: []string{"Normal " + ReasonPortChanged, testPort, newPort},
		},
		{
			name:        "a new port bound to another node: a Warning, and the interface is left as it was",
			change:      func(p *annotations.Port, s *annotations.Subnet) { remade(p, s); p.HostID = "node-b" },
			wantIfaceID: testPort, wantMAC: "fa:16:3e:84:88:2a", wantAddr: "10.244.0.158/24",
			wantEvent: []string{"Warning " + ReasonPortChangeFailed, newPort, "node-b"},
		},
		{
			name: "the pod end cannot be given the new address: a Warning, and the interface is left as it was",
			breakIt: func(e *env) {
				e.plumber.setupErr = nil
				e.plumber.mu.Lock()
				delete(e.plumber.links, testTap)
				e.plumber.mu.Unlock()
			},
			change: readdressed, wantIfaceID: testPort,
			wantEvent: []string{"Warning " + ReasonPortChangeFailed, newPort, "eth0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, before := changeTheAnnotationOfAPluggedPod(t, tt)
			checkTheEventSays(t, waitEvent(t, e), tt.wantEvent)
			checkTheInterfaceFollowed(t, e, tt, before)
			checkThePodEnd(t, e, tt)
		})
	}
}

// changeTheAnnotationOfAPluggedPod plugs testPod's sandbox, then gives the pod tt's annotation, with Follow
// running throughout or (tt.restart) only from a new server started after the change. It returns the
// environment and the interface's plug ID from before the change.
func changeTheAnnotationOfAPluggedPod(t *testing.T, tt followCase) (*env, string) {
	t.Helper()
	e := newEnv(t, 10*time.Second, testPod(t, annotated))
	if !tt.restart {
		follow(t, e)
	}
	decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
	before := checkPlugged(t, e, "sandbox-1")
	if tt.breakIt != nil {
		tt.breakIt(e)
	}
	e.update(t, testPod(t, tt.change))
	if tt.restart {
		e.srv = New(e.srv.cfg)
		follow(t, e)
	}
	return e, before
}

// checkTheEventSays fails the test for each of wants that event ev lacks.
func checkTheEventSays(t *testing.T, ev string, wants []string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q lacks %q", ev, want)
		}
	}
}

// checkTheInterfaceFollowed: the sandbox's interface is still there, installed, names tt's port, and when
// that is a new one, carries its MAC and a plug ID other than before.
func checkTheInterfaceFollowed(t *testing.T, e *env, tt followCase, before string) {
	t.Helper()
	iface, ok, _ := e.ovs.Interface(t.Context(), testTap)
	if !ok {
		t.Fatalf("interface %s is gone", testTap)
	}
	ids := iface.ExternalIDs
	if ids[ovs.KeyIfaceID] != tt.wantIfaceID || ids[ovs.KeySandbox] != "sandbox-1" || !iface.Installed() {
		t.Errorf("external_ids %v: want iface-id %s, the sandbox's, installed", ids, tt.wantIfaceID)
	}
	if tt.wantIfaceID != testPort && (ids[ovs.KeyAttachedMAC] != tt.wantMAC || ids[ovs.KeyPlug] == before) {
		t.Errorf("external_ids %v: want attached-mac %s and a new %s", ids, tt.wantMAC, ovs.KeyPlug)
	}
}

// checkThePodEnd: when tt names an address, the pod's eth0 has tt's MAC and that one address.
func checkThePodEnd(t *testing.T, e *env, tt followCase) {
	t.Helper()
	if tt.wantAddr == "" {
		return
	}
	got, err := e.plumber.Inspect(t.Context(), "/var/run/netns/sandbox-1", "eth0")
	if err != nil || got.MAC.String() != tt.wantMAC || len(got.Addrs) != 1 || got.Addrs[0].String() != tt.wantAddr {
		t.Errorf("pod end %+v (%v), want MAC %s and address %s", got, err, tt.wantMAC, tt.wantAddr)
	}
}

// A running pod whose port changes and that has no interface on the bridge (another pod's ADD took it over):
// a Warning says the pod must be deleted.
func TestARunningPodWithoutInterfaceIsReported(t *testing.T) {
	pod := testPod(t, annotated)
	pod.Status.Phase = corev1.PodRunning
	e := newEnv(t, 10*time.Second, pod)
	follow(t, e)
	changed := testPod(t, remade)
	changed.Status.Phase = corev1.PodRunning
	e.update(t, changed)
	ev := waitEvent(t, e)
	for _, want := range []string{"Warning " + ReasonPortChangeFailed, newPort, "delete it"} {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q lacks %q", ev, want)
		}
	}
}

// CHECK of a sandbox whose interface was pointed at the pod's new port passes: the interface keeps the name
// of the port it was plugged for.
func TestCheckAfterThePortChanged(t *testing.T) {
	e := newEnv(t, 10*time.Second, testPod(t, annotated))
	follow(t, e)
	decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
	e.update(t, testPod(t, readdressed))
	if ev := waitEvent(t, e); !strings.HasPrefix(ev, "Normal "+ReasonPortChanged) {
		t.Fatalf("event %q, want %s", ev, ReasonPortChanged)
	}
	if resp := e.srv.Handle(t.Context(), request("CHECK", "sandbox-1")); resp.Error != nil {
		t.Errorf("CHECK after the port changed: %v", resp.Error)
	}
}

// Which updates of a pod make Follow look at its interface: only those that change what the interface is
// made from, on a pod that had a port.
func TestPortAnnotationsChanged(t *testing.T) {
	tests := []struct {
		name     string
		old, cur func(t *testing.T) *corev1.Pod
		want     bool
	}{
		{name: "the first annotation (the ADD reads it)", old: func(t *testing.T) *corev1.Pod { return testPod(t) },
			cur: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) }},
		{name: "the same annotation", old: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
			cur: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) }},
		{name: "the port's status and groups", old: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
			cur: func(t *testing.T) *corev1.Pod {
				return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) {
					p.Status, p.SecurityGroups = "ACTIVE", []string{"sg"}
				})
			}},
		{name: "the annotation removed (a finished pod)", old: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
			cur: func(t *testing.T) *corev1.Pod { return testPod(t) }},
		{name: "another port", old: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
			cur: func(t *testing.T) *corev1.Pod { return testPod(t, remade) }, want: true},
		{name: "another address", old: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
			cur: func(t *testing.T) *corev1.Pod { return testPod(t, readdressed) }, want: true},
		{name: "another subnet", old: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
			cur: func(t *testing.T) *corev1.Pod {
				return testPod(t, func(_ *annotations.Port, s *annotations.Subnet) { s.GatewayIP = "10.244.0.254" })
			}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := portAnnotationsChanged(tt.old(t), tt.cur(t)); got != tt.want {
				t.Errorf("portAnnotationsChanged = %v, want %v", got, tt.want)
			}
		})
	}
}
