package service

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// foreign makes objects the sweep must never touch: a load balancer, VIP port and floating IP of another
// cluster for a Service UID that exists nowhere, and an untagged load balancer. It returns their IDs.
func foreign(t *testing.T, w *world) []string {
	t.Helper()
	ctx := context.Background()
	other := ownership.Owner{Cluster: "c2", Kind: ownership.KindService, UID: "gone-uid", Name: "ns/gone"}.Tags()
	lb, err := w.o.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{VipPortID: "elsewhere", Tags: other})
	if err != nil {
		t.Fatal(err)
	}
	untagged, err := w.o.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{VipPortID: "elsewhere-too"})
	if err != nil {
		t.Fatal(err)
	}
	port, err := w.n.CreatePort(ctx, openstack.PortSpec{NetworkID: w.m.C.ServiceNetworkID, DeviceOwner: neutron.VIPDeviceOwner, DeviceID: "gone-uid"})
	if err != nil {
		t.Fatal(err)
	}
	fip, err := w.n.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: "public", PortID: port.ID})
	if err != nil {
		t.Fatal(err)
	}
	for r, id := range map[openstack.Resource]string{openstack.ResourcePorts: port.ID, openstack.ResourceFloatingIPs: fip.ID} {
		if err := w.n.ReplaceTags(ctx, r, id, other); err != nil {
			t.Fatal(err)
		}
	}
	return []string{lb.ID, untagged.ID, port.ID, fip.ID}
}

// present says which of the IDs still exist in Octavia or Neutron.
func (w *world) present(ids ...string) map[string]bool {
	out := map[string]bool{}
	for _, lb := range w.o.LoadBalancers() {
		out[lb.ID] = true
	}
	for id := range w.n.Ports {
		out[id] = true
	}
	for id := range w.n.FIPs {
		out[id] = true
	}
	got := map[string]bool{}
	for _, id := range ids {
		got[id] = out[id]
	}
	return got
}

func TestServiceSweep(t *testing.T) {
	const grace = 2 * time.Minute
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		// live is whether the Service still exists when the sweep runs.
		live    bool
		after   time.Duration
		pending int
		// removeLB deletes the live Service's load balancer out of band.
		removeLB   bool
		wantGone   bool
		wantRepair bool
	}{
		{name: "the objects of a deleted Service stay during the grace period", after: grace / 2},
		{name: "the objects of a deleted Service are removed once the grace period is over", after: grace + time.Second, wantGone: true},
		{name: "the removal waits for Octavia's delete and finishes on a later sweep", after: grace + time.Second, pending: 2, wantGone: true},
		{name: "a live Service keeps its objects however old they are", live: true, after: 24 * time.Hour},
		{name: "a live Service whose load balancer vanished goes back to its reconciler", live: true, after: time.Hour, removeLB: true, wantRepair: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			svc := service(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"172.24.4.50"} }, http)
			w := newWorld(t, svc, endpoints([]svcPort{http}, []string{"10.244.0.5"}))
			w.n.Now = func() time.Time { return t0 }
			w.o.Now = w.n.Now
			w.mustConverge(t)
			lbID, vipID := w.o.LoadBalancers()[0].ID, w.vipPort(t).ID
			var fipID string
			for id := range w.n.FIPs {
				fipID = id
			}
			untouchable := foreign(t, w)
			if tc.removeLB {
				if err := w.o.DeleteLoadBalancer(ctx, lbID); err != nil {
					t.Fatal(err)
				}
			}
			w.o.PendingReads = tc.pending

			reader := crfake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
			if tc.live {
				reader = crfake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(w.get(t)).Build()
			}
			repairs := make(chan event.GenericEvent, 10)
			swept := 0
			sweep := Sweep(reader, w.m, w.o, octavia.Provider{}, nil, repairs, grace, func(string) { swept++ })
			for range 1 + tc.pending + 1 {
				if err := sweep(ctx, t0.Add(tc.after)); err != nil {
					t.Fatal(err)
				}
			}

			checkOwnObjects(t, w, lbID, vipID, fipID, tc.removeLB, tc.wantGone)
			if wantSwept := map[bool]int{true: 1}[tc.wantGone]; swept != wantSwept {
				t.Errorf("swept reported %d times, want %d", swept, wantSwept)
			}
			for id, there := range w.present(untouchable...) {
				if !there {
					t.Errorf("%s of another cluster or untagged was deleted", id)
				}
			}
			checkRepair(t, repairs, tc.wantRepair)
		})
	}
}

// checkOwnObjects: the Service's load balancer (unless removed out of band), VIP port and floating IP are
// gone when wantGone, else present.
func checkOwnObjects(t *testing.T, w *world, lbID, vipID, fipID string, removedLB, wantGone bool) {
	t.Helper()
	for id, there := range w.present(lbID, vipID, fipID) {
		if id == lbID && removedLB {
			continue
		}
		if there == wantGone {
			t.Errorf("%s present = %v, want %v", id, there, !wantGone)
		}
	}
}

// checkRepair: the sweep sent the web Service back to its reconciler when wantRepair, else nothing.
func checkRepair(t *testing.T, repairs <-chan event.GenericEvent, wantRepair bool) {
	t.Helper()
	select {
	case ev := <-repairs:
		if !wantRepair || ev.Object.GetName() != "web" {
			t.Errorf("repair of %s, want none", client.ObjectKeyFromObject(ev.Object))
		}
	default:
		if wantRepair {
			t.Error("no repair sent")
		}
	}
}
