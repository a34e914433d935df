package service

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/raven-net/raven/internal/octavia"
)

// A pool whose member change the provider has not finished is looked at again shortly, also once its wait has run
// out and the change has been sent again: what the provider ends with may differ from what was sent, and no
// Kubernetes event would bring the Service back (seen on 2025.1: the UDP pool kept a removed backend and lacked a
// new one for 2 minutes, until TestServicesCarryTraffic gave up).
func TestAPoolIsWatchedUntilTheProviderIsDone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waited  time.Duration
		pending bool
	}{
		{name: "within the wait", waited: time.Second, pending: true},
		{name: "the wait ran out", waited: octavia.SettleLimit + time.Second, pending: true},
		{name: "settled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, service(nil, http), endpoints([]svcPort{http}, []string{"10.244.0.5"}))
			w.mustConverge(t)
			if tc.pending {
				w.o.SetMemberStatus("10.244.0.5", "PENDING_CREATE")
				lb := w.o.LoadBalancers()[0]
				pool := lb.Pools[0].ID
				w.r.settlingSince = map[string]map[string]octavia.Settle{string(w.get(t).UID): {pool: {Since: time.Now().Add(-tc.waited), Pending: lb.Members[pool][0].ID + "=PENDING_CREATE"}}}
			}
			res, err := w.reconcile(t)
			if err != nil {
				t.Fatal(err)
			}
			if looked := res.RequeueAfter > 0 && res.RequeueAfter <= time.Second; looked != tc.pending {
				t.Fatalf("requeued after %v; want a look within a second: %v", res.RequeueAfter, tc.pending)
			}
		})
	}
}

// TestTheLookAtASettlingPoolBacksOff: a pool the provider works on for minutes (8.0.0 building 100 members) is
// looked at every half second at first, then less often; a Service with nothing pending forgets its wait.
func TestTheLookAtASettlingPoolBacksOff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		waited time.Duration
		want   time.Duration
	}{
		{name: "the wait has just begun", want: pending},
		{name: "waiting for 10 s", waited: 10 * time.Second, want: time.Second},
		{name: "waiting for minutes", waited: 3 * time.Minute, want: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, service(nil, http), endpoints([]svcPort{http}, []string{"10.244.0.5"}))
			w.mustConverge(t)
			w.o.SetMemberStatus("10.244.0.5", "PENDING_CREATE")
			svc := w.get(t)
			if tc.waited > 0 {
				w.r.waitBegan = map[string]time.Time{string(svc.UID): time.Now().Add(-tc.waited)}
			}
			res, err := w.reconcile(t)
			if err != nil {
				t.Fatal(err)
			}
			if d := res.RequeueAfter - tc.want; d < -50*time.Millisecond || d > 50*time.Millisecond {
				t.Fatalf("looks again after %v, want %v", res.RequeueAfter, tc.want)
			}
			w.o.SetMemberStatus("10.244.0.5", "ACTIVE")
			if _, err := w.reconcile(t); err != nil {
				t.Fatal(err)
			}
			if _, ok := w.r.waitBegan[string(svc.UID)]; ok {
				t.Fatal("the wait is still remembered once nothing is pending")
			}
		})
	}
}

// carrying is TestServicesCarryTraffic's Service (e2e): svc-i with a TCP and a UDP port 80, on the endpoints of
// its own EndpointSlice (sliceOf).
func carrying(i int) *corev1.Service {
	return named(i, func(s *corev1.Service) {
		s.Spec.Selector = map[string]string{"app": s.Name}
		s.Spec.Ports = service(nil, carryPorts...).Spec.Ports
	})
}

var carryPorts = []svcPort{{"tcp", corev1.ProtocolTCP, 80, 80}, {"udp", corev1.ProtocolUDP, 80, 80}}

// sliceOf is the EndpointSlice of Service svc-i (carrying): the addresses ready unless listed in notReady.
func sliceOf(i int, ready []string, notReady ...string) *discoveryv1.EndpointSlice {
	es := endpoints(carryPorts, ready, notReady...)
	es.Name, es.Labels = fmt.Sprintf("svc-%d-abc", i), map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("svc-%d", i)}
	return es
}

// backdateSettling moves every wait for the provider back by d, as if it had begun d earlier.
func backdateSettling(r *Reconciler, d time.Duration) {
	r.settleMu.Lock()
	defer r.settleMu.Unlock()
	for _, pools := range r.settlingSince {
		for id, s := range pools {
			s.Since = s.Since.Add(-d)
			pools[id] = s
		}
	}
}

// TestAMemberChangeTheProviderLeftIsSentAgain: a pool whose member the provider leaves PENDING_DELETE for
// octavia.SettleLimit gets its member change sent again, also while other Services are reconciled. Before, neither
// happened, and a pool the provider left so kept its members for good: a backend wanted back (unready, then ready
// again) looked in place once the wait ran out, since Octavia still listed it, and was never sent again; and every
// other Service's reconcile restarted the wait (one map of waits for every Service, pruned by each reconcile to its
// own pools), so that no wait ran out while other Services were reconciled, as when the e2e suite's tests run
// together. TestServicesCarryTraffic (e2e) failed with the symptom: a backend made unready, then ready again, never
// came back to the Service's TCP pool, while the UDP pool had it back.
func TestAMemberChangeTheProviderLeftIsSentAgain(t *testing.T) {
	backends := []string{"10.244.0.1", "10.244.0.2", "10.244.0.3", "10.244.0.4", "10.244.0.5"}
	const left = "10.244.0.1" // the backend whose removal the provider leaves PENDING_DELETE
	for _, tc := range []struct {
		name string
		// wanted: the Service wants the backend (ready again); else it is unready.
		wanted bool
		// others: another Service is reconciled between the two looks at the pools.
		others bool
		// step is the member change sent again to the first pool (TCP) once the wait ran out.
		step string
	}{
		{name: "a backend wanted back is sent again", wanted: true, step: "ReplaceMembers"},
		{name: "a backend wanted back is sent again, another Service reconciled meanwhile", wanted: true, others: true, step: "ReplaceMembers"},
		{name: "a backend no longer wanted is removed again", step: "DeleteMember"},
		{name: "a backend no longer wanted is removed again, another Service reconciled meanwhile", others: true, step: "DeleteMember"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, carrying(1), sliceOf(1, backends), carrying(2), sliceOf(2, []string{"10.244.0.9"}))
			w.r.Provider = provider(t, "ovn")
			w.convergeNamed(t, 1)
			w.convergeNamed(t, 2)
			want := backends
			if !tc.wanted {
				want = backends[1:]
				update(t, w, sliceOf(1, want, left))
			}
			w.o.SetMemberStatus(left, "PENDING_DELETE")
			if res := reconcileNamed(t, w.r, 1); res.RequeueAfter == 0 || res.RequeueAfter > time.Second {
				t.Fatalf("a pool the provider is still changing: looks again after %v, want within a second", res.RequeueAfter)
			}
			backdateSettling(w.r, octavia.SettleLimit)
			if tc.others {
				reconcileNamed(t, w.r, 2)
			}
			before := w.o.Called(tc.step)
			reconcileNamed(t, w.r, 1)
			if w.o.Called(tc.step) != before+1 {
				t.Fatalf("the wait ran out: %d %s, want the change sent again", w.o.Called(tc.step)-before, tc.step)
			}
			w.convergeNamed(t, 1)
			lb := w.o.LoadBalancers()[0]
			for _, p := range lb.Pools {
				var got []string
				for _, m := range lb.Members[p.ID] {
					got = append(got, m.Address)
				}
				if slices.Sort(got); !slices.Equal(got, want) {
					t.Errorf("pool %s (%s): members %v, want %v", p.Name, p.Protocol, got, want)
				}
			}
		})
	}
}
