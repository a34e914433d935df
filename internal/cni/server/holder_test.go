package server

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/wire"
	"github.com/raven-net/raven/pkg/annotations"
)

// The other pod of the node in these tests, and the interface its sandbox has on the bridge.
const (
	otherUID     = "5c1e7d2a-8f3b-4e6a-9d0c-2b4f6a8e1c3d"
	otherSandbox = "sandbox-other"
)

// otherPod is pod default/other, running on the node, whose annotation names portID for it.
func otherPod(t *testing.T, portID string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.ID, p.PodUID = portID, otherUID })
	p.Name, p.UID = "other", k8stypes.UID(otherUID)
	p.Status.Phase = corev1.PodRunning
	for _, m := range mutate {
		m(p)
	}
	return p
}

// plugOther puts on the bridge, as name, the interface an ADD made for a sandbox of pod default/<pod> of that UID,
// carrying portID, with its veth; it returns the interface's external_ids.
func plugOther(e *env, name, pod, uid, portID string) map[string]string {
	ids := map[string]string{
		ovs.KeyIfaceID: portID, ovs.KeyIfaceIDVer: uid, ovs.KeySandbox: otherSandbox, ovs.KeyIfName: "eth0",
		ovs.KeyNetns: "/var/run/netns/" + otherSandbox, ovs.KeyPod: "default/" + pod, ovs.KeyNetwork: "raven",
		ovs.KeyPlug: "plug-other", ovs.KeyOVNInstalled: "true",
	}
	e.ovs.Set(name, ids)
	e.plumber.mu.Lock()
	e.plumber.links[name] = plug.Spec{HostIfName: name, Netns: ids[ovs.KeyNetns], IfName: "eth0"}
	e.plumber.mu.Unlock()
	return ids
}

// An ADD whose annotation names a port that an interface of the bridge already carries: refused while another pod
// of the node still holds that port (it runs, and its own annotation names the port), whatever the interface's
// name; taken over, as before, when the interface is the same pod's (a restart) or its pod no longer holds the port.
func TestAddRefusesAPortAnotherPodOfTheNodeHolds(t *testing.T) {
	deleting := func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp, p.Finalizers = &now, []string{"raven.io/test"}
	}
	tests := []struct {
		name string
		// iface is the name of the interface carrying testPort, plugged for pod default/<owner> of UID uid; holder
		// is what the node's cache holds of pod default/other (nil: nothing).
		iface, owner, uid string
		holder            func(t *testing.T) *corev1.Pod
		wantRefused       bool
	}{
		{
			name:  "another running pod's interface carries the port under the port's name: refused",
			iface: testTap, owner: "other", uid: otherUID, wantRefused: true,
			holder: func(t *testing.T) *corev1.Pod { return otherPod(t, testPort) },
		},
		{
			name:  "another running pod's interface followed the port and has another name: refused",
			iface: "tap0be1a8e6-5b", owner: "other", uid: otherUID, wantRefused: true,
			holder: func(t *testing.T) *corev1.Pod { return otherPod(t, testPort) },
		},
		{
			name:  "another pod not started yet still holds the port: refused",
			iface: testTap, owner: "other", uid: otherUID, wantRefused: true,
			holder: func(t *testing.T) *corev1.Pod {
				return otherPod(t, testPort, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })
			},
		},
		{
			name:  "an earlier sandbox of the same pod (a restart) is taken over",
			iface: testTap, owner: "nginx", uid: testUID,
		},
		{
			name:  "the interface of a pod that is gone is taken over",
			iface: testTap, owner: "other", uid: otherUID,
		},
		{
			name:  "the interface of an earlier pod of the name (the cache has another UID) is taken over",
			iface: testTap, owner: "other", uid: "uid-of-an-earlier-pod",
			holder: func(t *testing.T) *corev1.Pod { return otherPod(t, testPort) },
		},
		{
			name:  "the interface of a finished pod is taken over",
			iface: testTap, owner: "other", uid: otherUID,
			holder: func(t *testing.T) *corev1.Pod {
				return otherPod(t, testPort, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
			},
		},
		{
			name:  "a running pod being deleted still holds the port (Raven releases it once the pod is gone): refused",
			iface: testTap, owner: "other", uid: otherUID, wantRefused: true,
			holder: func(t *testing.T) *corev1.Pod { return otherPod(t, testPort, deleting) },
		},
		{
			name:  "the interface of a running pod whose annotation names another port now is taken over",
			iface: testTap, owner: "other", uid: otherUID,
			holder: func(t *testing.T) *corev1.Pod { return otherPod(t, newPort) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := []*corev1.Pod{testPod(t, annotated)}
			if tt.holder != nil {
				pods = append(pods, tt.holder(t))
			}
			e := newEnv(t, 10*time.Second, pods...)
			before := plugOther(e, tt.iface, tt.owner, tt.uid, testPort)
			resp := e.srv.Handle(t.Context(), request("ADD", "sandbox-1"))
			if !tt.wantRefused {
				decodeResult(t, resp)
				checkPlugged(t, e, "sandbox-1")
				return
			}
			checkRefusedForTheHolder(t, e, resp, tt.iface, before)
		})
	}
}

// checkRefusedForTheHolder: the ADD failed with an error and one Warning event that name the pod, the port, and the
// holder's interface, pod and sandbox; the holder's interface (iface, with external_ids before) and veth are all
// there is, untouched, and nothing was set up.
func checkRefusedForTheHolder(t *testing.T, e *env, resp wire.Response, iface string, before map[string]string) {
	t.Helper()
	if resp.Error == nil || resp.Error.Code != types.ErrInternal {
		t.Fatalf("ADD answered %+v, want a refusal with code %d", resp.Error, types.ErrInternal)
	}
	for _, want := range []string{"pod default/nginx", "port " + testPort, "interface " + iface, "pod default/other", "sandbox " + otherSandbox} {
		if !strings.Contains(resp.Error.Msg, want) {
			t.Errorf("error %q lacks %q", resp.Error.Msg, want)
		}
	}
	if events := e.events(); len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+ReasonPortInUse) || !strings.Contains(events[0], "default/other") {
		t.Errorf("events %q, want one Warning %s naming the pod that holds the port", events, ReasonPortInUse)
	}
	held, ok, _ := e.ovs.Interface(t.Context(), iface)
	if !ok || !maps.Equal(held.ExternalIDs, before) {
		t.Errorf("the holder's interface is %v (present: %v), want it untouched: %v", held.ExternalIDs, ok, before)
	}
	if names := e.ovs.Names(); !reflect.DeepEqual(names, []string{iface}) {
		t.Errorf("OVS ports %v, want the holder's %s alone", names, iface)
	}
	if links := e.plumber.hostLinks(); !reflect.DeepEqual(links, []string{iface}) || len(e.plumber.setups) != 0 {
		t.Errorf("veths %v and %d setups, want the holder's veth alone and no setup", links, len(e.plumber.setups))
	}
}

// A running pod whose annotation comes to name a port that another pod's interface carries: its interface does not
// follow while that pod holds the port (a Warning names it), and follows once that pod no longer does.
func TestARunningPodDoesNotFollowToAPortAnotherPodHolds(t *testing.T) {
	tests := []struct {
		name       string
		holder     func(t *testing.T) *corev1.Pod
		wantFollow bool
	}{
		{name: "the other pod runs and its annotation names the port: refused",
			holder: func(t *testing.T) *corev1.Pod { return otherPod(t, newPort) }},
		{name: "the other pod is finished: followed", wantFollow: true,
			holder: func(t *testing.T) *corev1.Pod {
				return otherPod(t, newPort, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 10*time.Second, testPod(t, annotated), tt.holder(t))
			const otherIface = "tapotherport"
			before := plugOther(e, otherIface, "other", otherUID, newPort)
			follow(t, e)
			decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
			e.update(t, testPod(t, remade))
			ev := waitEvent(t, e)
			iface, _, _ := e.ovs.Interface(t.Context(), testTap)
			if tt.wantFollow {
				checkTheEventSays(t, ev, []string{"Normal " + ReasonPortChanged, newPort})
				if iface.ExternalIDs[ovs.KeyIfaceID] != newPort {
					t.Errorf("the pod's interface carries %q, want %s", iface.ExternalIDs[ovs.KeyIfaceID], newPort)
				}
				return
			}
			checkTheEventSays(t, ev, []string{"Warning " + ReasonPortChangeFailed, newPort, "interface " + otherIface, "pod default/other"})
			if iface.ExternalIDs[ovs.KeyIfaceID] != testPort {
				t.Errorf("the pod's interface carries %q, want %s still", iface.ExternalIDs[ovs.KeyIfaceID], testPort)
			}
			if held, _, _ := e.ovs.Interface(t.Context(), otherIface); !maps.Equal(held.ExternalIDs, before) {
				t.Errorf("the holder's interface is %v, want it untouched: %v", held.ExternalIDs, before)
			}
		})
	}
}
