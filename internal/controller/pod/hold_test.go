package pod

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type members map[string]bool

func (m members) Holds(addr string) bool { return m[addr] }

// The port of a pod that is gone waits while its address is still a load balancer member (the ovn provider
// kept the member's health-check mapping, and the namespace's ovn-lb-hm port, when the port went first), and
// goes once Octavia no longer lists the member, or after BackendHold.
func TestAPortOutlivesItsLoadBalancerMembership(t *testing.T) {
	for _, tt := range []struct {
		name     string
		finished bool // the pod still exists, finished, instead of deleted
		expire   bool // the member stays: the hold runs out instead
	}{
		{name: "deleted pod, member removed"},
		{name: "deleted pod, member stays", expire: true},
		{name: "finished pod, member removed", finished: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, pod("web", "u1"))
			held := members{}
			w.r.Backends = held
			if err := w.reconcile(t, "web"); err != nil {
				t.Fatal(err)
			}
			ports := w.ports("u1")
			if len(ports) != 1 {
				t.Fatalf("%d ports, want 1", len(ports))
			}
			ip := ports[0].FixedIPs[0].IPAddress
			held[ip] = true
			end(t, w, tt.finished)
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}
			checkHeld(t, w, req)
			if tt.expire {
				w.r.held.mu.Lock()
				w.r.held.at[ports[0].ID] = time.Now().Add(-BackendHold - time.Second)
				w.r.held.mu.Unlock()
			} else {
				delete(held, ip)
			}
			res, err := w.r.Reconcile(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != 0 || len(w.ports("u1")) != 0 {
				t.Fatalf("port left %d times, requeued after %v; want it released", len(w.ports("u1")), res.RequeueAfter)
			}
			if len(w.r.held.at) != 0 {
				t.Errorf("%d ports still recorded as held", len(w.r.held.at))
			}
		})
	}
}

// end deletes the pod "web", or has it finish.
func end(t *testing.T, w *world, finished bool) {
	t.Helper()
	var p corev1.Pod
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, &p); err != nil {
		t.Fatal(err)
	}
	if finished {
		p.Status.Phase = corev1.PodSucceeded
		if err := w.c.Status().Update(context.Background(), &p); err != nil {
			t.Fatal(err)
		}
	} else if err := w.c.Delete(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
}

// checkHeld: reconciles keep the pod's port and come back after holdPoll.
func checkHeld(t *testing.T, w *world, req reconcile.Request) {
	t.Helper()
	for range 2 {
		res, err := w.r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != holdPoll {
			t.Fatalf("requeued after %v while the address is a member, want %v", res.RequeueAfter, holdPoll)
		}
		if len(w.ports("u1")) != 1 {
			t.Fatal("the port went while its address was a load balancer member")
		}
	}
}
