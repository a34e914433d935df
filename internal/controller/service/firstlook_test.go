package service

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/octavia"
)

// named is a Service of one port with its own name, UID and clusterIP, and no selector (no EndpointSlice to
// wait for).
func named(i int, mutate func(*corev1.Service)) *corev1.Service {
	return service(func(s *corev1.Service) {
		s.Name, s.UID, s.Spec.ClusterIP = fmt.Sprintf("svc-%d", i), types.UID(fmt.Sprintf("svc-uid-%d", i)), fmt.Sprintf("10.96.0.%d", 20+i)
		if mutate != nil {
			mutate(s)
		}
	}, http)
}

// reconcileNamed reconciles Service svc-i once with r.
func reconcileNamed(t *testing.T, r *Reconciler, i int) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i)}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// convergeNamed reconciles Service svc-i until a reconcile writes nothing and asks for no look again.
func (w *world) convergeNamed(t *testing.T, i int) {
	t.Helper()
	for range 50 {
		before := w.o.Wrote() + w.n.Wrote()
		if res := reconcileNamed(t, w.r, i); w.o.Wrote()+w.n.Wrote() == before && res.RequeueAfter == 0 {
			return
		}
	}
	t.Fatalf("svc-%d did not converge", i)
}

// restarted is a new reconciler on the same clusters, as a new leader starts.
func (w *world) restarted() *Reconciler {
	return &Reconciler{Client: w.c, Neutron: w.m, LB: w.o, Provider: w.r.Provider, Gate: w.r.Gate, Recorder: w.rec, Backends: &octavia.Backends{}}
}

// A new leader lists the cluster's load balancers, floating IPs, listeners and pools once, and the first reconcile of each Service
// in sync reads its own from that listing: no per-Service list, no write. The listing serves each Service once,
// and never stands for a load balancer it did not see, nor for a floating IP a Service wants.
func TestANewLeaderListsLoadBalancersOnceForEveryService(t *testing.T) {
	const n = 4 // the last wants a floating IP
	var objs []client.Object
	for i := range n {
		objs = append(objs, named(i, func(s *corev1.Service) {
			if i == n-1 {
				s.Spec.ExternalIPs = []string{"172.24.4.9"}
			}
		}))
	}
	w := newWorld(t, objs...)
	for i := range n {
		w.convergeNamed(t, i)
	}
	r := w.restarted()
	w.o.ResetCalls()
	fipLists, writes := w.n.Called("ListFloatingIPs"), w.o.Wrote()+w.n.Wrote()
	for i := range n {
		reconcileNamed(t, r, i)
	}
	if got := w.o.Called("ListLoadBalancers"); got != 1 {
		t.Errorf("a new leader's first reconcile of %d Services listed load balancers %d times, want once", n, got)
	}
	if got := w.n.Called("ListFloatingIPs") - fipLists; got != 2 {
		t.Errorf("%d floating IP lists, want 2: the first look's, and the Service that wants one", got)
	}
	if got := w.o.Wrote() + w.n.Wrote() - writes; got != 0 {
		t.Errorf("%d writes for Services in sync", got)
	}
	if w.o.Called("LoadBalancerStatus") != n {
		t.Errorf("%d status reads for %d Services: each reads its own load balancer's members", w.o.Called("LoadBalancerStatus"), n)
	}
	if got := w.o.Called("ListListeners", "ListPools"); got != 2 {
		t.Errorf("%d listener and pool lists for %d Services, want 2: one of each for all", got, n)
	}

	reconcileNamed(t, r, 0)
	if got := w.o.Called("ListLoadBalancers"); got != 2 {
		t.Errorf("a Service's second reconcile: %d load balancer lists in all, want 2 (its own)", got)
	}
	if got := w.o.Called("ListListeners", "ListPools"); got != 4 {
		t.Errorf("a Service's second reconcile: %d listener and pool lists in all, want 4 (its own as well)", got)
	}
	if err := w.c.Create(context.Background(), named(n, nil)); err != nil {
		t.Fatal(err)
	}
	reconcileNamed(t, r, n)
	if got := w.o.Called("ListLoadBalancers"); got != 3 {
		t.Errorf("a Service made after the first look: %d load balancer lists in all, want 3 (its own)", got)
	}
	if lbs := w.o.LoadBalancers(); len(lbs) != n+1 {
		t.Errorf("%d load balancers for %d Services", len(lbs), n+1)
	}
}
