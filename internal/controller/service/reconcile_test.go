package service

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
)

// listenerOctavia answers listener creates from a table: port → error (nil accepts). Other calls are not
// expected here.
type listenerOctavia struct {
	openstack.LoadBalancing
	answers map[int]error
	calls   map[int]int
}

func (o *listenerOctavia) CreateListener(_ context.Context, s openstack.ListenerSpec) (*openstack.Listener, error) {
	o.calls[s.ProtocolPort]++
	if err := o.answers[s.ProtocolPort]; err != nil {
		return nil, err
	}
	return &openstack.Listener{ID: "l", Protocol: s.Protocol, ProtocolPort: s.ProtocolPort}, nil
}

func TestApplyNextPassesOverRefusals(t *testing.T) {
	quota := openstack.NewError("octavia listener create", openstack.KindQuota, 403, "Quota has been met for resources: Listener")
	busy := openstack.NewError("octavia listener create", openstack.KindImmutable, 409, "Load Balancer lb is immutable")
	steps := func(ports ...int) []octavia.Step {
		var out []octavia.Step
		for _, p := range ports {
			out = append(out, octavia.Step{Kind: octavia.CreateListener, Listener: octavia.Listener{Protocol: "TCP", Port: p}})
		}
		return out
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "svc-uid"}}
	lb := &openstack.LoadBalancer{ID: "lb"}
	newReconciler := func(answers map[int]error) (*Reconciler, *listenerOctavia, *events.FakeRecorder) {
		o := &listenerOctavia{answers: answers, calls: map[int]int{}}
		rec := events.NewFakeRecorder(10)
		return &Reconciler{Neutron: &neutron.Manager{C: &neutron.Cluster{ID: "c1"}}, LB: o, Recorder: rec}, o, rec
	}
	ctx := context.Background()

	t.Run("a refused step is passed over, the next one applied, and one Warning says what was refused", func(t *testing.T) {
		r, o, rec := newReconciler(map[int]error{80: quota})
		applied, retry, err := r.applyNext(ctx, svc, lb, steps(80, 81))
		if err != nil || !applied || retry != 0 {
			t.Fatalf("applyNext = %v, %v, %v; want applied", applied, retry, err)
		}
		if o.calls[80] != 1 || o.calls[81] != 1 {
			t.Fatalf("calls = %v, want one each", o.calls)
		}
		if len(rec.Events) != 1 {
			t.Fatalf("%d events, want one Warning", len(rec.Events))
		}
		if ev := <-rec.Events; !strings.Contains(ev, "LoadBalancerRefusedQuotaExceeded") || !strings.Contains(ev, "CreateListener TCP 80") {
			t.Fatalf("event %q, want a LoadBalancerRefusedQuotaExceeded Warning naming TCP 80", ev)
		}
		// The next reconcile does not ask again for what was just refused.
		applied, retry, err = r.applyNext(ctx, svc, lb, steps(80))
		if err != nil || applied || retry <= 0 || retry > refusalRetry {
			t.Fatalf("applyNext = %v, %v, %v; want nothing applied and a retry within %s", applied, retry, err, refusalRetry)
		}
		if o.calls[80] != 1 {
			t.Fatalf("the refused step was sent again at once (%d calls)", o.calls[80])
		}
		if len(rec.Events) != 0 {
			t.Fatalf("a remembered refusal must not raise another event: %q", <-rec.Events)
		}
		// Once the Service needs no load balancer, its refusals are forgotten.
		r.forgetRefusals(string(svc.UID))
		if _, _, _ = r.applyNext(ctx, svc, lb, steps(80)); o.calls[80] != 2 {
			t.Fatalf("a forgotten refusal must be asked again (%d calls)", o.calls[80])
		}
	})

	t.Run("everything refused: nothing applied, retried after refusalRetry", func(t *testing.T) {
		r, _, _ := newReconciler(map[int]error{80: quota, 81: quota})
		applied, retry, err := r.applyNext(ctx, svc, lb, steps(80, 81))
		if err != nil || applied || retry != refusalRetry {
			t.Fatalf("applyNext = %v, %v, %v; want nothing applied, retry %s", applied, retry, err, refusalRetry)
		}
	})

	t.Run("Octavia busy stops the plan without a Warning", func(t *testing.T) {
		r, o, rec := newReconciler(map[int]error{80: busy})
		_, _, err := r.applyNext(ctx, svc, lb, steps(80, 81))
		if openstack.KindOf(err) != openstack.KindImmutable || o.calls[81] != 0 || len(rec.Events) != 0 {
			t.Fatalf("err %v, calls %v, %d events; want Immutable, no later step, no event", err, o.calls, len(rec.Events))
		}
	})

	t.Run("a refusal is asked again once refusalRetry has passed", func(t *testing.T) {
		r, o, _ := newReconciler(map[int]error{80: quota})
		r.refusals.Store(string(svc.UID)+"|CreateListener TCP 80", refusal{until: time.Now().Add(-time.Second), what: "old"})
		if _, _, _ = r.applyNext(ctx, svc, lb, steps(80)); o.calls[80] != 1 {
			t.Fatalf("an expired refusal must be asked again (%d calls)", o.calls[80])
		}
	})
}
