package pod

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
)

// restart gives the reconciler a fresh index, as a restarted Raven has: the namespace networks are in; the
// ports are listed only when listed is true, and then without the one named skip (a port another leader made
// after this process listed).
func (w *world) restart(t *testing.T, listed bool, skip string) {
	t.Helper()
	nn := w.r.Neutron.X.Network("ns-uid")
	w.r.Neutron.X = neutron.NewIndex()
	w.r.Neutron.X.SetNetwork(*nn)
	if listed {
		w.list(t, skip)
	}
}

// list applies a listing of every port but skip.
func (w *world) list(t *testing.T, skip string) {
	t.Helper()
	snap, err := neutron.List(context.Background(), w.n, w.r.Neutron.C)
	if err != nil {
		t.Fatal(err)
	}
	snap.Ports = slices.DeleteFunc(snap.Ports, func(p openstack.Port) bool { return p.ID == skip })
	w.r.Neutron.X.Replace("c1", snap)
}

// A pod that needs no port any more (finished, or in a namespace excluded since) loses its annotation only once
// the port it names is released in Neutron: a port left behind without an annotation is lost to Raven until
// the pod object goes.
func TestThePortAnnotationGoesOnlyWithThePort(t *testing.T) {
	finish, exclude := finishJob, excludeNS
	cases := []struct {
		name string
		// change makes the pod need no port.
		change func(t *testing.T, w *world)
		// listed says the restarted index holds the ports; skipPort leaves the pod's port out of that listing.
		listed, skipPort bool
		// fail makes the port deletes fail.
		fail       bool
		wantReason string
	}{
		{name: "a pod that finished while Raven restarted keeps its annotation until the listing is in, then loses it with its port",
			change: finish},
		{name: "a pod whose namespace was excluded while Raven restarted keeps its annotation until its port is released",
			change: exclude, wantReason: "NamespaceExcluded"},
		{name: "a finished pod's port that the listing missed is deleted before the annotation goes",
			change: finish, listed: true, skipPort: true},
		{name: "an excluded pod's port that the listing missed is deleted before the annotation goes",
			change: exclude, listed: true, skipPort: true, wantReason: "NamespaceExcluded"},
		{name: "a finished pod whose port delete fails keeps its annotation, with a Warning event",
			change: finish, listed: true, fail: true, wantReason: "PortDeleteServerError"},
		{name: "an excluded pod whose port delete fails keeps its annotation, with a Warning event",
			change: exclude, listed: true, fail: true, wantReason: "PortDeleteServerError"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, pod("job", "u1"))
			if err := w.reconcile(t, "job"); err != nil {
				t.Fatal(err)
			}
			a := w.annotation(t, "job")
			if a == nil {
				t.Fatal("no annotation after the first reconcile")
			}
			tc.change(t, w)
			skip := ""
			if tc.skipPort {
				skip = a.ID
			}
			w.restart(t, tc.listed, skip)
			if tc.fail {
				w.n.Fail("DeletePort", -1, openstack.NewError("neutron port delete", openstack.KindServer, 500, "boom"))
			}
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "job"}}
			_, err := w.r.Reconcile(context.Background(), req)
			if (err != nil) != tc.fail {
				t.Fatalf("Reconcile = %v, want an error: %v", err, tc.fail)
			}
			if _, exists := w.n.Ports[a.ID]; exists && w.annotation(t, "job") == nil {
				t.Fatalf("the annotation went while port %s stays in Neutron", a.ID)
			}
			if tc.fail {
				checkWarning(t, w, tc.wantReason)
				return
			}
			if !w.r.Neutron.X.PortsLoaded() {
				w.list(t, "")
				if _, err := w.r.Reconcile(context.Background(), req); err != nil {
					t.Fatal(err)
				}
			}
			w.checkReleased(t, "job", a.ID)
			if tc.wantReason != "" {
				checkWarning(t, w, tc.wantReason)
			}
		})
	}
}

func finishJob(t *testing.T, w *world) {
	p := getPod(t, w, "job")
	p.Status.Phase = corev1.PodSucceeded
	if err := w.c.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func excludeNS(t *testing.T, w *world) {
	scope, err := controller.NewScope(config.Namespaces{Exclude: []string{"ns"}})
	if err != nil {
		t.Fatal(err)
	}
	w.r.Scope = scope
}

// checkReleased fails the test unless the port is gone from Neutron and the pod's annotation with it.
func (w *world) checkReleased(t *testing.T, name, port string) {
	t.Helper()
	_, exists := w.n.Ports[port]
	annotated := w.annotation(t, name) != nil
	if exists || annotated {
		t.Fatalf("port %s exists: %v, annotation present: %v; want neither", port, exists, annotated)
	}
}
