package service

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A Service whose clusterIP lies outside the configured service subnet (neutron.serviceSubnetCIDR does not
// cover the service-cluster-ip-range) gets a ClusterIPOutsideServiceSubnet Warning event naming the address
// and the subnet, and a terminal error; nothing is built in Neutron or Octavia, on the first reconcile or
// on a later one.
func TestClusterIPOutsideServiceSubnet(t *testing.T) {
	// newWorld's service subnet is 10.96.0.0/16.
	for _, ip := range []string{"10.97.0.10", "10.95.255.254", "192.0.2.10"} {
		t.Run(ip, func(t *testing.T) {
			svc := service(func(s *corev1.Service) { s.Spec.ClusterIP = ip }, http)
			w := newWorld(t, svc, endpoints([]svcPort{http}, []string{"10.244.0.5"}))
			neutronWrites := w.n.Wrote()
			for i := range 2 {
				_, err := w.reconcile(t)
				if err == nil || !errors.Is(err, reconcile.TerminalError(nil)) {
					t.Fatalf("reconcile %d: err %v, want a terminal error", i+1, err)
				}
				if !strings.Contains(err.Error(), ip) || !strings.Contains(err.Error(), "10.96.0.0/16") {
					t.Errorf("reconcile %d: error %q does not name the clusterIP and the service subnet", i+1, err)
				}
				ws := w.warnings()
				if len(ws) != 1 || !hasWarning(ws, "ClusterIPOutsideServiceSubnet", ip) || !strings.Contains(ws[0], "10.96.0.0/16") {
					t.Errorf("reconcile %d: warnings %q, want one ClusterIPOutsideServiceSubnet naming %s and 10.96.0.0/16", i+1, ws, ip)
				}
			}
			if lbs := w.o.LoadBalancers(); len(lbs) != 0 {
				t.Errorf("%d load balancers built, want none", len(lbs))
			}
			if w.o.Wrote() != 0 {
				t.Errorf("%d Octavia writes, want none (calls %v)", w.o.Wrote(), w.o.Calls)
			}
			if p := w.vipPort(t); p != nil {
				t.Errorf("VIP port %s created, want none", p.ID)
			}
			if w.n.Wrote() != neutronWrites {
				t.Errorf("%d Neutron writes, want none", w.n.Wrote()-neutronWrites)
			}
		})
	}
}
