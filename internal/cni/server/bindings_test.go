package server

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/pkg/annotations"
)

// pluggedIface is testTap as an ADD plugged it for testPod, carrying port, with or without ovn-installed.
func pluggedIface(port string, installed bool) ovs.Interface {
	ids := map[string]string{
		ovs.KeyIfaceID: port, ovs.KeyIfaceIDVer: testUID, ovs.KeySandbox: "sb1", ovs.KeyPod: "default/nginx",
		ovs.KeyNetns: "/var/run/netns/sb1", ovs.KeyIfName: "eth0", ovs.KeyPlug: "p1",
	}
	if installed {
		ids[ovs.KeyOVNInstalled] = "true"
	}
	return ovs.Interface{Name: testTap, ExternalIDs: ids}
}

func runningPod(t *testing.T, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := testPod(t, annotated)
	p.Status.Phase = corev1.PodRunning
	for _, m := range mutate {
		m(p)
	}
	return p
}

// at is one look at the bridge, at a time after the first.
type at struct {
	after     time.Duration
	installed bool
	wantAsk   bool
}

// When raven-node asks the controller to check a running pod's port: its interface has been without
// ovn-installed (ovn-controller released the logical port) for the grace period, the pod runs and its
// annotation names the interface's port, no request is pending, and the port was not asked about lately.
func TestWhenAnInterfaceWithoutBindingIsReported(t *testing.T) {
	const grace = 3 * time.Second
	tests := []struct {
		name  string
		pod   *corev1.Pod
		iface func(installed bool) ovs.Interface
		looks []at
	}{
		{
			name:  "installed all along: never",
			looks: []at{{0, true, false}, {time.Minute, true, false}},
		},
		{
			name:  "ovn-installed gone for the grace period: asked once",
			looks: []at{{0, true, false}, {time.Second, false, false}, {time.Second + grace - 1, false, false}, {time.Second + grace, false, true}, {10 * time.Second, false, false}},
		},
		{
			name:  "back within the grace period: not asked; the next loss counts from its own start",
			looks: []at{{0, false, false}, {2 * time.Second, true, false}, {4 * time.Second, false, false}, {4*time.Second + grace - 1, false, false}, {4*time.Second + grace, false, true}},
		},
		{
			name: "a flapping interface: asked again only once the backoff (30 s, then doubling) has passed",
			looks: []at{{0, false, false}, {grace, false, true}, {grace + 1, true, false}, {grace + 2, false, false},
				{2*grace + 2, false, false}, {grace + askFirst - 1, false, false}, {grace + askFirst, false, true},
				{grace + 2*askFirst, false, false}, {grace + 3*askFirst, false, true}},
		},
		{
			name:  "a pod not running yet (its ADD waits for ovn-installed): never",
			pod:   runningPod(t, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
			looks: []at{{0, false, false}, {time.Minute, false, false}},
		},
		{
			name:  "a pod being deleted: never",
			pod:   runningPod(t, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }),
			looks: []at{{0, false, false}, {time.Minute, false, false}},
		},
		{
			name:  "the annotation names another port (the interface follows it): never",
			pod:   testPodRunning(t, remade),
			looks: []at{{0, false, false}, {time.Minute, false, false}},
		},
		{
			name: "a request for the port pending: not again",
			pod: runningPod(t, func(p *corev1.Pod) {
				p.Annotations[annotations.PodPortCheck] = testPort
			}),
			looks: []at{{0, false, false}, {time.Minute, false, false}},
		},
		{
			name: "an interface no ADD plugged (no raven-sandbox): never",
			iface: func(installed bool) ovs.Interface {
				i := pluggedIface(testPort, installed)
				delete(i.ExternalIDs, ovs.KeySandbox)
				return i
			},
			looks: []at{{0, false, false}, {time.Minute, false, false}},
		},
		{
			name: "the interface of a former pod of the name (another UID): never",
			iface: func(installed bool) ovs.Interface {
				i := pluggedIface(testPort, installed)
				i.ExternalIDs[ovs.KeyIfaceIDVer] = "former-uid"
				return i
			},
			looks: []at{{0, false, false}, {time.Minute, false, false}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod
			if pod == nil {
				pod = runningPod(t)
			}
			iface := tc.iface
			if iface == nil {
				iface = func(installed bool) ovs.Interface { return pluggedIface(testPort, installed) }
			}
			get := func(namespace, name string) *corev1.Pod {
				if namespace == pod.Namespace && name == pod.Name {
					return pod
				}
				return nil
			}
			b := newBindingWatch(grace)
			start := time.Unix(1_000_000, 0)
			for _, look := range tc.looks {
				asks, _ := b.step([]ovs.Interface{iface(look.installed)}, get, start.Add(look.after))
				if asked := len(asks) > 0; asked != look.wantAsk {
					t.Fatalf("at +%s (installed %v): asks %+v, want a request %v", look.after, look.installed, asks, look.wantAsk)
				}
				if look.wantAsk && (asks[0].port != testPort || asks[0].iface != testTap || asks[0].pod != pod) {
					t.Fatalf("ask %+v, want port %s of interface %s for the pod", asks[0], testPort, testTap)
				}
			}
		})
	}
}

func testPodRunning(t *testing.T, opts ...portOpts) *corev1.Pod {
	t.Helper()
	p := testPod(t, opts...)
	p.Status.Phase = corev1.PodRunning
	return p
}

// While an interface waits out its grace period, step says when to look again, so that no change of OVS is
// needed to report it; with nothing to wait for, it says 0 (the next change).
func TestBindingWatchSaysWhenToLookAgain(t *testing.T) {
	b := newBindingWatch(3 * time.Second)
	start := time.Unix(1_000_000, 0)
	get := func(string, string) *corev1.Pod { return runningPod(t) }
	if _, next := b.step([]ovs.Interface{pluggedIface(testPort, true)}, get, start); next != 0 {
		t.Errorf("installed: look again in %s, want 0", next)
	}
	if _, next := b.step([]ovs.Interface{pluggedIface(testPort, false)}, get, start.Add(time.Second)); next != 3*time.Second {
		t.Errorf("just lost: look again in %s, want 3s", next)
	}
	if _, next := b.step([]ovs.Interface{pluggedIface(testPort, false)}, get, start.Add(2*time.Second)); next != 2*time.Second {
		t.Errorf("lost 1 s ago: look again in %s, want 2s", next)
	}
}

// End to end on the node: ovn-controller releases a running pod's interface; raven-node asks the controller
// to check the port by annotating the pod, and says so on the pod.
func TestRavenNodeAsksForACheckWhenAnInterfaceLosesItsBinding(t *testing.T) {
	pod := runningPod(t)
	e := newEnv(t, 10*time.Second, pod)
	e.srv.cfg.Monitor = e.ovs
	e.srv.cfg.PodsAPI = e.cs.CoreV1()
	e.srv.cfg.UnboundGrace = 10 * time.Millisecond
	e.ovs.Set(testTap, pluggedIface(testPort, true).ExternalIDs)
	w, err := e.cs.CoreV1().Pods("default").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); e.srv.WatchBindings(ctx) }()
	defer func() { cancel(); <-done }()

	e.ovs.Uninstall(testTap)
	deadline := time.After(10 * time.Second)
	for asked := false; !asked; {
		select {
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified {
				asked = p.Annotations[annotations.PodPortCheck] == testPort
			}
		case <-deadline:
			t.Fatal("no check request on the pod within 10 s")
		}
	}
	ev := waitEvent(t, e)
	for _, want := range []string{"Warning " + ReasonPortUnbound, testTap, testPort} {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q lacks %q", ev, want)
		}
	}
}
