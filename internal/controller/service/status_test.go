package service

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raven-net/raven/pkg/annotations"
)

func TestTheVIPAnnotationShowsTheLastStatusSeen(t *testing.T) {
	w := newWorld(t, service(nil, http, dns), endpoints([]svcPort{http, dns}, []string{"10.244.0.5"}))
	w.mustConverge(t)
	status := func() string {
		t.Helper()
		var svc corev1.Service
		if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, &svc); err != nil {
			t.Fatal(err)
		}
		var v annotations.VIP
		if ok, err := annotations.Decode(svc.Annotations, annotations.ServiceVIP, &v); !ok || err != nil {
			t.Fatalf("no VIP annotation (%v)", err)
		}
		return v.ProvisioningStatus
	}
	if got := status(); got != "ACTIVE" {
		t.Fatalf("a built service reads %q, want ACTIVE", got)
	}
	// A change Octavia is still applying: the annotation says so.
	w.o.PendingReads = 5
	update(t, w, endpoints([]svcPort{http, dns}, []string{"10.244.0.6"}))
	for range 3 {
		if _, err := w.reconcile(t); err != nil {
			t.Fatal(err)
		}
	}
	if got := status(); got != "PENDING_UPDATE" {
		t.Fatalf("while Octavia applies a change the annotation reads %q, want PENDING_UPDATE", got)
	}
	w.o.PendingReads = 0
	w.mustConverge(t)
	if got := status(); got != "ACTIVE" {
		t.Fatalf("after the change the annotation reads %q, want ACTIVE", got)
	}
}
