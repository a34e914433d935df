package pod

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/pkg/annotations"
)

// askCheck sets raven-node's check request on the pod, as raven-node's patch does.
func (w *world) askCheck(t *testing.T, name, port string) {
	t.Helper()
	body, err := annotations.MergePatch(map[string]any{annotations.PodPortCheck: port})
	if err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, p); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, body)); err != nil {
		t.Fatal(err)
	}
}

func (w *world) checkAnnotation(t *testing.T, name string) (string, bool) {
	t.Helper()
	var p corev1.Pod
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	v, ok := p.Annotations[annotations.PodPortCheck]
	return v, ok
}

// raven-node asks the controller to check a running pod's port (its interface lost its OVN binding): the pod's
// reconcile asks Neutron for that one port, and makes a gone port again at once, through the path the resync
// takes, without listing any ports; a port that is there, or a request for a port the pod no longer has, only
// clears the request.
func TestACheckRequestFromRavenNode(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// prepare runs after the pod has its port; it returns the port ID raven-node asks about.
		prepare func(t *testing.T, w *world, port *annotations.Port) string
		// wantErr: the reconcile fails (and is retried), the request stays.
		wantErr   bool
		wantGets  int
		wantNew   bool     // the annotation names another port, with the same MAC and IP
		wantEvent []string // the event's words (none when empty)
	}{
		{
			name: "the port was deleted in Neutron: made again at once with its MAC and IP, one GET, no listing",
			prepare: func(t *testing.T, w *world, port *annotations.Port) string {
				if err := w.n.DeletePort(ctx, port.ID); err != nil {
					t.Fatal(err)
				}
				return port.ID
			},
			wantGets: 1, wantNew: true, wantEvent: []string{"Normal PortRemade", "deleted from Neutron", "same MAC"},
		},
		{
			name: "the port is there: nothing made, a Normal event says what Neutron has",
			prepare: func(_ *testing.T, _ *world, port *annotations.Port) string {
				return port.ID
			},
			wantGets: 1, wantEvent: []string{"Normal " + ReasonPortChecked, "ovn-controller"},
		},
		{
			name: "a request for a port the pod no longer has: cleared without a GET",
			prepare: func(_ *testing.T, _ *world, _ *annotations.Port) string {
				return "port-of-before"
			},
		},
		{
			name: "Neutron does not answer: a Warning event, the request stays for the retry",
			prepare: func(_ *testing.T, w *world, port *annotations.Port) string {
				w.n.Fail("GetPort", 1, openstack.NewError("fake port get", openstack.KindUnavailable, 503, "down"))
				return port.ID
			},
			wantErr: true, wantGets: 1, wantEvent: []string{"Warning PortCheck", "raven-node"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, before := withARunningPod(t)
			w.askCheck(t, "web", tc.prepare(t, w, before))
			w.n.Calls = map[string]int{}
			err := w.reconcile(t, "web")
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile: %v, want an error %v", err, tc.wantErr)
			}
			checkNeutronWasAskedForOnePortOnly(t, w, tc.wantGets)
			checkThePortIsMadeAgainOnlyIf(t, before, w.annotation(t, "web"), tc.wantNew)
			checkTheRequestStaysOnlyIf(t, w, tc.wantErr)
			checkTheEvent(t, w, tc.wantEvent)
		})
	}
}

// checkNeutronWasAskedForOnePortOnly: the reconcile made gets GetPort calls, and listed no ports.
func checkNeutronWasAskedForOnePortOnly(t *testing.T, w *world, gets int) {
	t.Helper()
	if got := w.n.Called("GetPort"); got != gets {
		t.Errorf("%d GetPort calls, want %d", got, gets)
	}
	if got := w.n.Called("ListPorts"); got != 0 {
		t.Errorf("%d ListPorts calls, want none", got)
	}
}

// checkThePortIsMadeAgainOnlyIf: the annotation after names another port than before exactly when wantNew,
// and that port then has the MAC and IP of before.
func checkThePortIsMadeAgainOnlyIf(t *testing.T, before, after *annotations.Port, wantNew bool) {
	t.Helper()
	if renamed := after.ID != before.ID; renamed != wantNew {
		t.Errorf("annotation names %s (before %s): want another port %v", after.ID, before.ID, wantNew)
	}
	if wantNew && (after.MACAddress != before.MACAddress || after.FixedIPs[0].IPAddress != before.FixedIPs[0].IPAddress) {
		t.Errorf("new port MAC %s IP %s, want the former %s %s", after.MACAddress, after.FixedIPs[0].IPAddress,
			before.MACAddress, before.FixedIPs[0].IPAddress)
	}
}

// checkTheRequestStaysOnlyIf: web still carries raven-node's check request exactly when wantStay.
func checkTheRequestStaysOnlyIf(t *testing.T, w *world, wantStay bool) {
	t.Helper()
	if v, ok := w.checkAnnotation(t, "web"); ok != wantStay {
		t.Errorf("check request %q present %v after the reconcile, want %v", v, ok, wantStay)
	}
}

// checkTheEvent: when there are words, an event was recorded on the pod and has every one of them; when there
// are none, no event was.
func checkTheEvent(t *testing.T, w *world, words []string) {
	t.Helper()
	var ev string
	select {
	case ev = <-w.recorder.Events:
	default:
	}
	if len(words) == 0 && ev != "" {
		t.Errorf("event %q, want none", ev)
	}
	if len(words) > 0 && ev == "" {
		t.Errorf("no event, want one with %q", words)
	}
	checkEventHas(t, ev, words)
}

// A flapping interface, or many at once, cannot turn into a storm of GETs: a port found in Neutron is not asked
// for again for a while (the request is just cleared), and all requests share a budget of GETs per second.
func TestCheckRequestsAreRateLimited(t *testing.T) {
	w := newWorld(t, pod("web", "u1", running))
	if err := w.reconcile(t, "web"); err != nil {
		t.Fatal(err)
	}
	port := w.annotation(t, "web")
	for i := range 3 {
		w.askCheck(t, "web", port.ID)
		if err := w.reconcile(t, "web"); err != nil {
			t.Fatal(err)
		}
		if _, ok := w.checkAnnotation(t, "web"); ok {
			t.Fatalf("request %d not cleared", i)
		}
	}
	if got := w.n.Called("GetPort"); got != 1 {
		t.Errorf("%d GetPort calls for 3 requests about a port that is there, want 1", got)
	}

	// The shared budget: past it, a request waits (requeued) instead of calling Neutron.
	var c portChecks
	allowed := 0
	for i := range 100 {
		if c.due(string(rune('a'+i))) && c.take() {
			allowed++
		}
	}
	if allowed != checkBurst {
		t.Errorf("%d checks allowed at once, want the burst %d", allowed, checkBurst)
	}
}

// The pod controller looks at a pod when raven-node asks for a check, and not at other annotation churn.
func TestACheckRequestWakesThePodController(t *testing.T) {
	base := pod("web", "u1", running)
	base.Annotations = map[string]string{annotations.PodPort: `{"id":"p1"}`}
	cases := []struct {
		name   string
		change func(p *corev1.Pod)
		want   bool
	}{
		{"a check request", func(p *corev1.Pod) { p.Annotations[annotations.PodPortCheck] = "p1" }, true},
		{"another annotation", func(p *corev1.Pod) { p.Annotations["example.com/x"] = "y" }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := base.DeepCopy()
			tc.change(cur)
			if got := relevant.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: cur}); got != tc.want {
				t.Errorf("relevant = %v, want %v", got, tc.want)
			}
		})
	}
}
