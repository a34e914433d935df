package service

import (
	"testing"
	"time"

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
				w.r.settlingSince = map[string]octavia.Settle{pool: {Since: time.Now().Add(-tc.waited), Pending: lb.Members[pool][0].ID + "=PENDING_CREATE"}}
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
