package service

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/octavia"
)

func TestServiceOnTheOVNProvider(t *testing.T) {
	three := []svcPort{http, dns, metrics}
	ready := []string{"10.244.0.5", "10.244.0.6"}
	cases := []struct {
		name string
		svc  *corev1.Service
		// before runs before the first reconcile.
		before func(w *world)
		// wantWrites is how many Octavia writes the convergence takes, refused ones included.
		wantWrites int
		warning    string
		// served is what Octavia must serve (default: the three ports).
		served func(m func(int32) []string) map[string][]string
	}{
		{
			name: "a Service with three ports is built in one Octavia write, with no Neutron write",
			svc:  service(nil, three...), wantWrites: 1,
		},
		{
			name: "a TCP and a UDP port of one number are built in one Octavia write (their pools have distinct names)",
			svc:  service(nil, http, dns, svcPort{"dns-tcp", corev1.ProtocolTCP, 53, 5353}), wantWrites: 1,
			served: func(m func(int32) []string) map[string][]string {
				return map[string][]string{"TCP:80": m(8080), "UDP:53": m(5353), "TCP:53": m(5353)}
			},
		},
		{
			name:       "ClientIP affinity is balanced by source IP and port, with a Warning that says so",
			svc:        service(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }, three...),
			wantWrites: 1, warning: "has no source-IP algorithm",
		},
		{
			name: "when Octavia refuses the whole graph the load balancer is built bare, then step by step",
			svc:  service(nil, three...),
			before: func(w *world) {
				w.o.FailStatus("CreateLoadBalancer", 1, 400, "Provider 'ovn' does not support a requested option")
			},
			wantWrites: 2 + 3*3, // the refused graph, the bare load balancer, a listener, pool and member update per port
		},
		{
			name: "the same while Octavia keeps every change PENDING for three reads",
			svc:  service(nil, three...),
			before: func(w *world) {
				w.o.PendingReads = 3
				w.o.FailStatus("CreateLoadBalancer", 1, 400, "quota")
			},
			wantWrites: 2 + 3*3,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eps := three
			for _, p := range tc.svc.Spec.Ports {
				if p.Name == "dns-tcp" {
					eps = append(eps, svcPort{"dns-tcp", corev1.ProtocolTCP, 53, 5353})
				}
			}
			w := newWorld(t, tc.svc, endpoints(eps, ready))
			w.r.Provider = provider(t, "ovn")
			if tc.before != nil {
				tc.before(w)
			}
			nw := w.n.Wrote()
			w.mustConverge(t)
			m := w.at(w.podSubnet, ready...)
			want := map[string][]string{"TCP:80": m(8080), "UDP:53": m(5353), "TCP:9090": m(9090)}
			if tc.served != nil {
				want = tc.served(m)
			}
			if got := w.served(t); !equalServed(got, want) {
				t.Fatalf("served\n  %v\nwant\n  %v", got, want)
			}
			for _, p := range w.o.LoadBalancers()[0].Pools {
				if p.LBAlgorithm != "SOURCE_IP_PORT" {
					t.Errorf("pool %s balances with %s", p.ID, p.LBAlgorithm)
				}
			}
			checkLoadBalancer(t, w)
			checkAnnotations(t, w)
			if w.o.Wrote() != tc.wantWrites {
				t.Errorf("%d Octavia writes, want %d", w.o.Wrote(), tc.wantWrites)
			}
			if w.n.Wrote() != nw {
				t.Errorf("%d Neutron writes, want none: the provider makes the VIP port", w.n.Wrote()-nw)
			}
			ws := w.warnings()
			if tc.warning != "" && !hasWarning(ws, "UnsupportedPort", tc.warning) {
				t.Errorf("Warnings %q, want UnsupportedPort with %q", ws, tc.warning)
			}
			if tc.warning == "" && len(ws) != 0 {
				t.Errorf("unexpected Warnings: %q", ws)
			}
		})
	}
}

func TestServiceProviderChange(t *testing.T) {
	for _, tc := range []struct{ from, to string }{{"amphora", "ovn"}, {"ovn", "amphora"}} {
		t.Run("from "+tc.from+" to "+tc.to+" rebuilds the load balancer on the new provider", func(t *testing.T) {
			w := newWorld(t, service(nil, http), endpoints([]svcPort{http}, []string{"10.244.0.5"}))
			w.r.Provider = provider(t, tc.from)
			w.o.PendingReads = 2
			w.mustConverge(t)
			old := w.o.LoadBalancers()[0].ID

			w.r.Provider = provider(t, tc.to)
			w.mustConverge(t)
			lbs := w.o.LoadBalancers()
			if len(lbs) != 1 || lbs[0].ID == old {
				t.Fatalf("load balancers %v after the change, want one new one", lbs)
			}
			if got, want := w.served(t), map[string][]string{"TCP:80": w.at(w.podSubnet, "10.244.0.5")(8080)}; !equalServed(got, want) {
				t.Fatalf("served %v, want %v", got, want)
			}
			checkLoadBalancer(t, w) // also: no VIP port of Raven's is left under the ovn provider
			checkAnnotations(t, w)
		})
	}
}

func TestSlicesPending(t *testing.T) {
	now := time.Now()
	fresh, old := metav1.NewTime(now.Add(-2*time.Second)), metav1.NewTime(now.Add(-time.Minute))
	slice := []discoveryv1.EndpointSlice{{}}
	cases := []struct {
		name     string
		selector map[string]string
		created  metav1.Time
		slices   []discoveryv1.EndpointSlice
		want     bool
	}{
		{"a fresh Service with a selector and no slice yet waits", map[string]string{"app": "a"}, fresh, nil, true},
		{"its slice has come: no wait", map[string]string{"app": "a"}, fresh, slice, false},
		{"a Service without selector gets no slice from Kubernetes: no wait", nil, fresh, nil, false},
		{"after the wait the load balancer is built regardless", map[string]string{"app": "a"}, old, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: tc.created}, Spec: corev1.ServiceSpec{Selector: tc.selector}}
			if got := slicesPending(svc, tc.slices, now); got != tc.want {
				t.Fatalf("slicesPending = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProviderVIPPortConflictIsExplained(t *testing.T) {
	w := newWorld(t, service(nil, http), endpoints([]svcPort{http}, []string{"10.244.0.5"}))
	w.r.Provider = provider(t, "ovn")
	w.o.FailStatus("CreateLoadBalancer", 1, 500, "Provider 'ovn' reports error: IP address "+clusterIP+" already allocated in subnet s")
	if _, err := w.reconcile(t); err == nil {
		t.Fatal("no error from a refused create")
	}
	if ws := w.warnings(); !hasWarning(ws, "LoadBalancerCreateServerError", "ovn-lb-vip-<ID>") {
		t.Fatalf("Warnings %q do not say which port to delete", ws)
	}
	w.mustConverge(t) // Octavia accepts the next create
	checkLoadBalancer(t, w)
}

func TestServiceHealthMonitors(t *testing.T) {
	three := []svcPort{http, dns, metrics}
	types := map[string]string{"TCP": "TCP", "UDP": "UDP-CONNECT"}
	for _, name := range []string{"amphora", "ovn"} {
		t.Run("on "+name+" every pool gets its monitor after the ports are served, and loses it when monitors are turned off", func(t *testing.T) {
			w := newWorld(t, service(nil, three...), endpoints(three, []string{"10.244.0.5"}))
			w.r.Provider = provider(t, name)
			w.r.Provider.Monitor = &octavia.Monitor{Delay: 2, UDPConnectDelay: 3, Timeout: 1, MaxRetries: 1, MaxRetriesDown: 2}
			w.o.PendingReads = 2
			w.mustConverge(t)
			lb := w.o.LoadBalancers()[0]
			for _, p := range lb.Pools {
				hm, ok := lb.Monitors[p.ID]
				if !ok || p.MonitorID != hm.ID || hm.Type != types[p.Protocol] {
					t.Errorf("pool %s (%s): monitor %+v, want one of type %s", p.ID, p.Protocol, hm, types[p.Protocol])
				}
			}
			if ws := w.warnings(); len(ws) != 0 {
				t.Errorf("unexpected Warnings: %q", ws)
			}
			w.r.Provider.Monitor = nil
			w.mustConverge(t)
			if lb := w.o.LoadBalancers()[0]; len(lb.Monitors) != 0 {
				t.Fatalf("monitors %v left after they were turned off", lb.Monitors)
			}
			checkLoadBalancer(t, w)
		})
	}
	t.Run("with MonitorSlowsMembers, many member changes under a monitor go without it, and the monitor comes back", func(t *testing.T) {
		w := newWorld(t, service(nil, http), endpoints([]svcPort{http}, []string{"10.244.0.5"}))
		w.r.Provider = provider(t, "ovn")
		w.r.Provider.MonitorSlowsMembers = true
		w.r.Provider.Monitor = &octavia.Monitor{Delay: 2, UDPConnectDelay: 3, Timeout: 1, MaxRetries: 1, MaxRetriesDown: 2}
		w.mustConverge(t)
		before := w.o.Called("DeleteMonitor")
		ready := []string{"10.244.0.6", "10.244.0.7", "10.244.0.8"}
		update(t, w, endpoints([]svcPort{http}, ready))
		w.mustConverge(t)
		if got, want := w.served(t), map[string][]string{"TCP:80": w.at(w.podSubnet, ready...)(8080)}; !equalServed(got, want) {
			t.Fatalf("served %v, want %v", got, want)
		}
		lb := w.o.LoadBalancers()[0]
		if len(lb.Monitors) != 1 || w.o.Called("DeleteMonitor") != before+1 {
			t.Fatalf("monitors %v, %d monitor deletes: want the monitor dropped once and made again", lb.Monitors, w.o.Called("DeleteMonitor")-before)
		}
	})
	t.Run("a monitor the provider could not set up is a Warning that says what to do, and the ports stay served", func(t *testing.T) {
		w := newWorld(t, service(nil, http), endpoints([]svcPort{http}, []string{"10.244.0.5"}))
		w.r.Provider = provider(t, "ovn")
		w.r.Provider.Monitor = &octavia.Monitor{Delay: 2, UDPConnectDelay: 3, Timeout: 1, MaxRetries: 1, MaxRetriesDown: 2}
		w.o.MonitorsFail = true
		w.mustConverge(t)
		if ws := w.warnings(); !hasWarning(ws, "HealthMonitorFailed", "network:distributed") {
			t.Fatalf("Warnings %q, want HealthMonitorFailed naming the distributed port", ws)
		}
		if got, want := w.served(t), map[string][]string{"TCP:80": w.at(w.podSubnet, "10.244.0.5")(8080)}; !equalServed(got, want) {
			t.Fatalf("served %v, want %v", got, want)
		}
	})
}

func TestServiceDeletedMembersFirst(t *testing.T) {
	three := []svcPort{http, dns, metrics}
	for _, tc := range []struct {
		provider     string
		membersFirst bool // octavia.deleteMembersFirst
		poolsEmptied int  // monitored pools whose members are removed, one by one, before the load balancer goes
		monitorsGone int  // monitors deleted, one by one, before the load balancer goes
	}{{"ovn", true, 3, 0}, {"ovn", false, 0, 3}, {"amphora", false, 0, 0}} {
		t.Run(fmt.Sprintf("a deleted Service on %s (members first: %v) loses its load balancer, its monitors or monitored pools' members first", tc.provider, tc.membersFirst), func(t *testing.T) {
			w := newWorld(t, service(nil, three...), endpoints(three, []string{"10.244.0.5"}))
			w.r.Provider = provider(t, tc.provider)
			w.r.Provider.MembersFirst = tc.membersFirst
			w.r.Provider.Monitor = &octavia.Monitor{Delay: 2, UDPConnectDelay: 3, Timeout: 1, MaxRetries: 1, MaxRetriesDown: 2}
			w.mustConverge(t)
			podPorts := len(w.n.Ports)
			if !w.r.Provider.MakesVIPPort {
				podPorts-- // the VIP port Raven made
			}
			replaced := w.o.Called("ReplaceMembers")
			w.o.PendingReads = 2 // each step leaves the load balancer PENDING_UPDATE for a while: no Warning for that
			deleteService(t, w)
			w.mustConverge(t)
			checkTornDown(t, w, podPorts)
			if ws := w.warnings(); len(ws) != 0 {
				t.Errorf("Warnings %q", ws)
			}
			got := w.o.Called("ReplaceMembers") - replaced
			if got != tc.poolsEmptied || w.o.Called("DeleteMonitor") != tc.monitorsGone || w.o.Called("DeleteLoadBalancer") != 1 {
				t.Fatalf("%d member replacements, %d monitor deletes and %d load balancer deletes; want %d, %d and 1",
					got, w.o.Called("DeleteMonitor"), w.o.Called("DeleteLoadBalancer"), tc.poolsEmptied, tc.monitorsGone)
			}
		})
	}
}

// A rolling update on the ovn provider: three old backends go and a new one comes. The new one is added in a
// batch that keeps every member, with the subnets Octavia lists (the status tree Plan reads has none, and the
// provider refuses a member without one: the first version sent the members without them, and Octavia refused
// the batch), then the old ones are deleted one at a time.
func TestRollingUpdateOnTheOVNProvider(t *testing.T) {
	before := []string{"10.244.0.1", "10.244.0.2", "10.244.0.3", "10.244.0.4", "10.244.0.5", "10.244.0.6", "10.244.0.7", "10.244.0.8"}
	after := []string{"10.244.0.1", "10.244.0.2", "10.244.0.3", "10.244.0.4", "10.244.0.5", "10.244.0.9"}
	w := newWorld(t, service(nil, http), endpoints([]svcPort{http}, before))
	w.r.Provider = provider(t, "ovn")
	w.mustConverge(t)
	batches, deletes := w.o.Called("ReplaceMembers"), w.o.Called("DeleteMember")
	update(t, w, endpoints([]svcPort{http}, after))
	w.mustConverge(t)
	if got, want := w.served(t), map[string][]string{"TCP:80": w.at(w.podSubnet, after...)(8080)}; !equalServed(got, want) {
		t.Fatalf("served\n  %v\nwant\n  %v", got, want)
	}
	if b, d := w.o.Called("ReplaceMembers")-batches, w.o.Called("DeleteMember")-deletes; b != 1 || d != 3 {
		t.Errorf("%d batch updates and %d member deletes, want 1 (the new member) and 3 (the old ones, one at a time)", b, d)
	}
	if ws := w.warnings(); len(ws) != 0 {
		t.Errorf("warnings: %v", ws)
	}
}
