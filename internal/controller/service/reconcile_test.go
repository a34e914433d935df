package service

import (
	"context"
	"errors"
	"fmt"
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

// listenerSteps is a plan that creates a TCP listener on each port.
func listenerSteps(ports ...int) []octavia.Step {
	var out []octavia.Step
	for _, p := range ports {
		out = append(out, octavia.Step{Kind: octavia.CreateListener, Listener: octavia.Listener{Protocol: "TCP", Port: p}})
	}
	return out
}

// newListenerReconciler is a reconciler whose Octavia answers listener creates by port, as answers says.
func newListenerReconciler(answers map[int]error) (*Reconciler, *listenerOctavia, *events.FakeRecorder) {
	o := &listenerOctavia{answers: answers, calls: map[int]int{}}
	rec := events.NewFakeRecorder(10)
	return &Reconciler{Neutron: &neutron.Manager{C: &neutron.Cluster{ID: "c1"}}, LB: o, Provider: octavia.Provider{Name: "amphora", Balance: "ROUND_ROBIN"}, Recorder: rec}, o, rec
}

// refusedStepIsPassedOver: a step refused with quota is passed over, the next one applied, one Warning says
// what was refused; the refusal is remembered, and forgotten with the Service's load balancer.
func refusedStepIsPassedOver(t *testing.T, svc *corev1.Service, lb *openstack.LoadBalancer, quota error) {
	ctx := context.Background()
	r, o, rec := newListenerReconciler(map[int]error{80: quota})
	applied, retry, err := r.applyNext(ctx, svc, lb, octavia.Current{}, listenerSteps(80, 81))
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
	refusalIsRememberedThenForgotten(t, r, o, rec, svc, lb)
}

// refusalIsRememberedThenForgotten: after port 80's listener was refused, the next reconcile does not ask
// again nor warn again; once the Service's refusals are forgotten, it asks again.
func refusalIsRememberedThenForgotten(t *testing.T, r *Reconciler, o *listenerOctavia, rec *events.FakeRecorder, svc *corev1.Service, lb *openstack.LoadBalancer) {
	ctx := context.Background()
	// The next reconcile does not ask again for what was just refused.
	applied, retry, err := r.applyNext(ctx, svc, lb, octavia.Current{}, listenerSteps(80))
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
	if _, _, _ = r.applyNext(ctx, svc, lb, octavia.Current{}, listenerSteps(80)); o.calls[80] != 2 {
		t.Fatalf("a forgotten refusal must be asked again (%d calls)", o.calls[80])
	}
}

func TestApplyNextPassesOverRefusals(t *testing.T) {
	quota := openstack.NewError("octavia listener create", openstack.KindQuota, 403, "Quota has been met for resources: Listener")
	busy := openstack.NewError("octavia listener create", openstack.KindImmutable, 409, "Load Balancer lb is immutable")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "svc-uid"}}
	lb := &openstack.LoadBalancer{ID: "lb"}
	ctx := context.Background()

	t.Run("a refused step is passed over, the next one applied, and one Warning says what was refused", func(t *testing.T) {
		refusedStepIsPassedOver(t, svc, lb, quota)
	})

	t.Run("everything refused: nothing applied, retried after refusalRetry", func(t *testing.T) {
		r, _, _ := newListenerReconciler(map[int]error{80: quota, 81: quota})
		applied, retry, err := r.applyNext(ctx, svc, lb, octavia.Current{}, listenerSteps(80, 81))
		if err != nil || applied || retry != refusalRetry {
			t.Fatalf("applyNext = %v, %v, %v; want nothing applied, retry %s", applied, retry, err, refusalRetry)
		}
	})

	t.Run("Octavia busy stops the plan without a Warning", func(t *testing.T) {
		r, o, rec := newListenerReconciler(map[int]error{80: busy})
		_, _, err := r.applyNext(ctx, svc, lb, octavia.Current{}, listenerSteps(80, 81))
		if openstack.KindOf(err) != openstack.KindImmutable || o.calls[81] != 0 || len(rec.Events) != 0 {
			t.Fatalf("err %v, calls %v, %d events; want Immutable, no later step, no event", err, o.calls, len(rec.Events))
		}
	})

	t.Run("a refusal is asked again once refusalRetry has passed", func(t *testing.T) {
		r, o, _ := newListenerReconciler(map[int]error{80: quota})
		st := listenerSteps(80)[0]
		r.refusals.Store(string(svc.UID)+"|CreateListener TCP 80|"+specHash(st), refusal{until: time.Now().Add(-time.Second), what: "old"})
		if _, _, _ = r.applyNext(ctx, svc, lb, octavia.Current{}, listenerSteps(80)); o.calls[80] != 1 {
			t.Fatalf("an expired refusal must be asked again (%d calls)", o.calls[80])
		}
	})
}

func TestApplyNextAsksAgainWhenTheStepChanged(t *testing.T) {
	quota := openstack.NewError("octavia member batch_update", openstack.KindQuota, 403, "Quota has been met for resources: Member")
	o := &memberOctavia{err: quota}
	r := &Reconciler{Neutron: &neutron.Manager{C: &neutron.Cluster{ID: "c1"}}, LB: o}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "svc-uid"}}
	step := func(addrs ...string) []octavia.Step {
		l := octavia.Listener{Protocol: "TCP", Port: 80}
		for _, a := range addrs {
			l.Members = append(l.Members, openstack.MemberSpec{Address: a, ProtocolPort: 8080})
		}
		return []octavia.Step{{Kind: octavia.ReplaceMembers, ID: "pool", Listener: l}}
	}
	ctx := context.Background()
	_, _, _ = r.applyNext(ctx, svc, &openstack.LoadBalancer{ID: "lb"}, octavia.Current{}, step("10.0.0.1", "10.0.0.2"))
	_, _, _ = r.applyNext(ctx, svc, &openstack.LoadBalancer{ID: "lb"}, octavia.Current{}, step("10.0.0.1", "10.0.0.2"))
	if o.calls != 1 {
		t.Fatalf("%d calls for the same refused members, want 1", o.calls)
	}
	_, _, _ = r.applyNext(ctx, svc, &openstack.LoadBalancer{ID: "lb"}, octavia.Current{}, step("10.0.0.1"))
	if o.calls != 2 {
		t.Fatalf("%d calls; other members are another question and must be asked at once", o.calls)
	}
}

type memberOctavia struct {
	openstack.LoadBalancing
	err   error
	calls int
}

func (o *memberOctavia) ReplaceMembers(context.Context, string, []openstack.MemberSpec) error {
	o.calls++
	return o.err
}

func TestRefusedErrorFitsAnEvent(t *testing.T) {
	var all []string
	for i := range 40 {
		all = append(all, fmt.Sprintf("CreateListener TCP %d: octavia listener create: QuotaExceeded (403): Quota has been met for resources: Listener", 10000+i))
	}
	msg := refusedError{first: errors.New("x"), all: all}.Error()
	if len(msg) > 1000 || !strings.Contains(msg, "more") || !strings.HasPrefix(msg, "CreateListener TCP 10000") {
		t.Fatalf("message of %d bytes: %q", len(msg), msg)
	}
}

func TestPollAfter(t *testing.T) {
	now := time.Now()
	for ago, want := range map[time.Duration]time.Duration{0: pending, 2 * time.Second: pending, 20 * time.Second: 2 * time.Second, 10 * time.Minute: 5 * time.Second} {
		if got := pollAfter(now.Add(-ago), now); got != want {
			t.Errorf("pollAfter(%s ago) = %s, want %s", ago, got, want)
		}
	}
	if pollAfter(time.Time{}, now) != pending {
		t.Error("no timestamp: poll as usual")
	}
}
