package pod

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

type world struct {
	r        *Reconciler
	n        *fake.Neutron
	c        client.Client
	recorder *events.FakeRecorder
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	ctx := context.Background()
	n := fake.NewNeutron()
	cl, err := neutron.EnsureCluster(ctx, n, "c1", config.Neutron{ExternalNetwork: "public", PodSubnetPoolCIDR: "10.244.0.0/16", PodSubnetPrefixLength: 24}, false)
	if err != nil {
		t.Fatal(err)
	}
	m := &neutron.Manager{N: n, C: cl, X: neutron.NewIndex()}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", UID: "ns-uid"}}
	if _, err := m.EnsureNamespace(ctx, "ns-uid", "ns"); err != nil {
		t.Fatal(err)
	}
	// The gate opens once the index holds every port: so it does here.
	snap, err := neutron.List(ctx, n, cl)
	if err != nil {
		t.Fatal(err)
	}
	m.X.Replace("c1", snap)
	c := crfake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(append(objs, ns)...).Build()
	gate := controller.NewGate()
	gate.Open()
	rec := events.NewFakeRecorder(10)
	return &world{r: &Reconciler{Client: c, Neutron: m, Gate: gate, Recorder: rec}, n: n, c: c, recorder: rec}
}

func pod(name, uid string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	for _, f := range mutate {
		f(p)
	}
	return p
}

func (w *world) reconcile(t *testing.T, name string) error {
	t.Helper()
	_, err := w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	return err
}

func (w *world) ports(uid string) []openstack.Port {
	var out []openstack.Port
	for _, p := range w.n.Ports {
		if o, _ := ownership.Parse(p.Tags); o.UID == uid || p.DeviceID == uid {
			out = append(out, *p)
		}
	}
	return out
}

func (w *world) annotation(t *testing.T, name string) *annotations.Port {
	t.Helper()
	var p corev1.Pod
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	var a annotations.Port
	if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &a); !ok || err != nil {
		return nil
	}
	return &a
}

func TestReconcile(t *testing.T) {
	cases := []struct {
		name       string
		pod        *corev1.Pod
		prepare    func(t *testing.T, w *world)
		wantErr    bool
		wantPorts  int
		wantAnno   bool
		wantReason string
	}{
		{name: "a new pod gets one port and the annotation names it", pod: pod("web", "u1"), wantPorts: 1, wantAnno: true},
		{name: "a hostNetwork pod gets nothing", pod: pod("host", "u1", func(p *corev1.Pod) { p.Spec.HostNetwork = true })},
		{name: "a finished pod releases its port and its annotations", pod: pod("done", "u1"),
			prepare: func(t *testing.T, w *world) {
				if err := w.reconcile(t, "done"); err != nil {
					t.Fatal(err)
				}
				var p corev1.Pod
				_ = w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "done"}, &p)
				p.Status.Phase = corev1.PodSucceeded
				if err := w.c.Status().Update(context.Background(), &p); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a quota error is a Warning event and an error for the retry", pod: pod("web", "u1"),
			prepare: func(t *testing.T, w *world) {
				w.n.Fail("CreatePort", 1, openstack.NewError("neutron port create", openstack.KindQuota, 409, "Quota exceeded for resources: ['port']"))
			},
			wantErr: true, wantReason: "PortCreateQuotaExceeded"},
		{name: "a user's edit of the annotation is put right", pod: pod("web", "u1"), wantPorts: 1, wantAnno: true,
			prepare: func(t *testing.T, w *world) {
				if err := w.reconcile(t, "web"); err != nil {
					t.Fatal(err)
				}
				patch := []byte(`{"metadata":{"annotations":{"kuryr.org/neutron-port":"{\"id\":"}}}`)
				var p corev1.Pod
				_ = w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, &p)
				if err := w.c.Patch(context.Background(), &p, client.RawPatch(types.MergePatchType, patch)); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.pod)
			if tc.prepare != nil {
				tc.prepare(t, w)
			}
			err := w.reconcile(t, tc.pod.Name)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile = %v, wantErr %v", err, tc.wantErr)
			}
			ports := w.ports(string(tc.pod.UID))
			if len(ports) != tc.wantPorts {
				t.Fatalf("%d ports, want %d", len(ports), tc.wantPorts)
			}
			a := w.annotation(t, tc.pod.Name)
			if (a != nil) != tc.wantAnno {
				t.Fatalf("annotation present = %v, want %v", a != nil, tc.wantAnno)
			}
			if a != nil && (a.ID != ports[0].ID || a.MACAddress != ports[0].MACAddress || a.FixedIPs[0].IPAddress != ports[0].FixedIPs[0].IPAddress) {
				t.Fatalf("annotation %+v does not match port %+v", a, ports[0])
			}
			if tc.wantReason != "" {
				checkWarning(t, w, tc.wantReason)
			}
		})
	}
}

// checkWarning fails the test unless the next recorded event is a Warning with this reason.
func checkWarning(t *testing.T, w *world, reason string) {
	t.Helper()
	select {
	case ev := <-w.recorder.Events:
		if !strings.Contains(ev, "Warning "+reason) {
			t.Fatalf("event %q, want a Warning %s", ev, reason)
		}
	default:
		t.Fatal("no event recorded")
	}
}

func TestDeletedPodLosesItsPortAndSyncedPodCostsNothing(t *testing.T) {
	w := newWorld(t, pod("a", "ua"), pod("b", "ub"))
	for _, name := range []string{"a", "b"} {
		if err := w.reconcile(t, name); err != nil {
			t.Fatal(err)
		}
	}
	calls := w.n.Wrote()
	if err := w.reconcile(t, "a"); err != nil {
		t.Fatal(err)
	}
	if w.n.Wrote() != calls {
		t.Fatalf("a reconcile of a pod in sync made %d Neutron writes", w.n.Wrote()-calls)
	}
	if err := w.c.Delete(context.Background(), pod("a", "ua")); err != nil {
		t.Fatal(err)
	}
	if err := w.reconcile(t, "a"); err != nil {
		t.Fatal(err)
	}
	if len(w.ports("ua")) != 0 {
		t.Fatal("the deleted pod's port is still there")
	}
	if len(w.ports("ub")) != 1 {
		t.Fatal("the other pod lost its port")
	}
}

// After a restart, until the port listing is in, a pod that announces its port is sent back to wait, and its
// annotation is left exactly as it was (it once was overwritten with an empty port). Parked, it waits without
// coming back every second, and the resync's Release returns it once.
func TestAnAnnotatedPodWaitsForThePortListingAfterARestart(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	for _, tc := range []struct {
		name   string
		parked *controller.Parked
	}{
		{"without a parking place: back in a second", nil},
		{"parked: back once the listing is in", &controller.Parked{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, pod("web", "u1"))
			if err := w.reconcile(t, "web"); err != nil {
				t.Fatal(err)
			}
			before := w.annotation(t, "web")
			if before == nil || before.ID == "" {
				t.Fatal("no annotation after the first reconcile")
			}
			// A restarted Raven: the namespace networks are known, the ports not yet.
			nn := w.r.Neutron.X.Network("ns-uid")
			w.r.Neutron.X = neutron.NewIndex()
			w.r.Neutron.X.SetNetwork(*nn)
			w.r.Parked = tc.parked
			if w.r.Neutron.X.PortsLoaded() {
				t.Fatal("a fresh index says its ports are loaded")
			}
			res, err := w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
			if err != nil {
				t.Fatal(err)
			}
			checkWaits(t, res, tc.parked, key)
			after := w.annotation(t, "web")
			if after == nil || after.ID != before.ID || after.MACAddress != before.MACAddress || len(after.FixedIPs) == 0 {
				t.Fatalf("annotation changed while the ports were being listed: %+v, was %+v", after, before)
			}
		})
	}
}

// checkWaits checks how a pod waits for the port listing: parked (back once, through Release), or back in a
// while when there is no parking place.
func checkWaits(t *testing.T, res reconcile.Result, parked *controller.Parked, key types.NamespacedName) {
	t.Helper()
	if parked == nil {
		if res.RequeueAfter == 0 {
			t.Error("the pod was not sent back to wait for the port listing")
		}
		return
	}
	if res.RequeueAfter != 0 {
		t.Errorf("a parked pod comes back after %s anyway", res.RequeueAfter)
	}
	if got := parked.Release(); len(got) != 1 || got[0] != key {
		t.Errorf("the listing's release returns %v, want the pod", got)
	}
}

func TestWithPerNodePoolsAPodWaitsForItsNode(t *testing.T) {
	w := newWorld(t, pod("p", "uid-p"))
	w.r.Neutron.P = &neutron.Pools{M: w.r.Neutron, Cfg: neutron.PoolConfig{MinFree: 0, Max: 5, Batch: 1, PerNode: true}}
	if err := w.reconcile(t, "p"); err != nil {
		t.Fatal(err)
	}
	if len(w.n.Ports) != 0 || w.annotation(t, "p") != nil {
		t.Fatalf("an unscheduled pod got a port (%d ports) or an annotation", len(w.n.Ports))
	}
	var p corev1.Pod
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "p"}, &p); err != nil {
		t.Fatal(err)
	}
	p.Spec.NodeName = "node-a"
	if err := w.c.Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	if err := w.reconcile(t, "p"); err != nil {
		t.Fatal(err)
	}
	a := w.annotation(t, "p")
	if a == nil || len(w.ports("uid-p")) != 1 || w.ports("uid-p")[0].HostID != "node-a" {
		t.Fatalf("the scheduled pod has annotation %+v and ports %+v; want one port bound to node-a", a, w.ports("uid-p"))
	}
}

func TestPodExistsFindsTheOwnerByNameAndTrustsOnlyItsUID(t *testing.T) {
	w := newWorld(t, pod("a", "uid-a"), pod("b", "uid-b"))
	for _, c := range []struct {
		what  string
		owner ownership.Owner
		want  bool
	}{
		{"the pod of that name and UID", ownership.Owner{Name: "ns/a", UID: "uid-a"}, true},
		{"an earlier pod of the same name", ownership.Owner{Name: "ns/a", UID: "uid-old"}, false},
		{"a name the tag cut short", ownership.Owner{Name: "ns/" + strings.Repeat("x", 10), UID: "uid-b"}, true},
		{"a name that is another pod's", ownership.Owner{Name: "ns/a", UID: "uid-b"}, true},
		{"a pod that is gone", ownership.Owner{Name: "ns/c", UID: "uid-c"}, false},
		{"an owner without a namespace", ownership.Owner{Name: "b", UID: "uid-b"}, true},
		{"a tag naming another namespace: only that one is read", ownership.Owner{Name: "other/a", UID: "uid-a"}, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			got, err := w.r.podExists(context.Background(), c.owner)
			if err != nil || got != c.want {
				t.Errorf("podExists(%+v) = %v, %v; want %v", c.owner, got, err, c.want)
			}
		})
	}
}
