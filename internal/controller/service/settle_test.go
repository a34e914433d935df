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
