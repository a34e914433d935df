package service

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/pkg/annotations"
)

func TestFloatingIP(t *testing.T) {
	ext := netip.MustParsePrefix("172.24.4.0/24")
	cases := []struct {
		name     string
		spec     corev1.ServiceSpec
		addr     string
		want     bool
		warnings int
	}{
		{"no externalIPs on a ClusterIP service: none", corev1.ServiceSpec{}, "", false, 0},
		{"the first address inside the external subnet", corev1.ServiceSpec{ExternalIPs: []string{"172.24.4.4"}}, "172.24.4.4", true, 0},
		{"an address outside is ignored with a warning", corev1.ServiceSpec{ExternalIPs: []string{"10.9.9.9"}}, "", false, 1},
		{"not an IP at all is ignored with a warning", corev1.ServiceSpec{ExternalIPs: []string{"nope"}}, "", false, 1},
		{"several inside: the first wins, the others warn", corev1.ServiceSpec{ExternalIPs: []string{"10.0.0.1", "172.24.4.5", "172.24.4.6"}}, "172.24.4.5", true, 2},
		{"type LoadBalancer without loadBalancerIP: Neutron chooses", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}, "", true, 0},
		{"type LoadBalancer with loadBalancerIP inside", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: "172.24.4.9"}, "172.24.4.9", true, 0},
		{"type LoadBalancer with loadBalancerIP outside: warn and let Neutron choose", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: "8.8.8.8"}, "", true, 1},
		{"type LoadBalancer of Raven's class: Neutron chooses", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: ptr("raven.io/octavia")}, "", true, 0},
		{"type LoadBalancer of another class: none", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: ptr("metallb.io/metallb")}, "", false, 0},
		{"type LoadBalancer of another class with loadBalancerIP: none, the address is its class's", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: ptr("metallb.io/metallb"), LoadBalancerIP: "172.24.4.9"}, "", false, 0},
		{"type LoadBalancer of another class with an externalIP: the externalIP, as for any Service", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: ptr("metallb.io/metallb"), ExternalIPs: []string{"172.24.4.4"}}, "172.24.4.4", true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, want, warnings := FloatingIP(&corev1.Service{Spec: tc.spec}, ext, "raven.io/octavia")
			if addr != tc.addr || want != tc.want || len(warnings) != tc.warnings {
				t.Fatalf("FloatingIP = %q, %v, %v; want %q, %v, %d warnings", addr, want, warnings, tc.addr, tc.want, tc.warnings)
			}
		})
	}
}

func TestServed(t *testing.T) {
	cases := []struct {
		name string
		spec corev1.ServiceSpec
		want bool
	}{
		{"a ClusterIP service is served", corev1.ServiceSpec{ClusterIP: "10.0.0.5"}, true},
		{"a headless service is not", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}, false},
		{"an ExternalName service is not", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}, false},
		{"a service without clusterIP yet is not", corev1.ServiceSpec{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Served(&corev1.Service{Spec: tc.spec}); got != tc.want {
				t.Fatalf("Served = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzFloatingIP: whatever users write into externalIPs and loadBalancerIP, Raven never panics and never
// picks an address outside the external subnet.
func FuzzFloatingIP(f *testing.F) {
	f.Add("172.24.4.4", "10.0.0.1", "172.24.4.9")
	f.Add("::1", "", "172.24.4.300")
	f.Add("not an ip", "172.24.4.0/24", "")
	ext := netip.MustParsePrefix("172.24.4.0/24")
	f.Fuzz(func(t *testing.T, a, b, lbip string) {
		for _, typ := range []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeLoadBalancer} {
			svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, ExternalIPs: []string{a, b}, LoadBalancerIP: lbip}}
			addr, _, _ := FloatingIP(svc, ext, "raven.io/octavia")
			if addr != "" && !ext.Contains(netip.MustParseAddr(addr)) {
				t.Fatalf("chose %s outside %s", addr, ext)
			}
		}
	})
}

func TestAnnotationsListOnlyServedPorts(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.10"}}
	want := []octavia.Listener{
		{Name: "a", Protocol: "TCP", Port: 80, Algorithm: "ROUND_ROBIN"},
		{Name: "b", Protocol: "SCTP", Port: 81, Algorithm: "ROUND_ROBIN"}, // refused by Octavia: no listener
	}
	cur := octavia.Current{
		Listeners: []openstack.Listener{{ID: "l80", Protocol: "TCP", ProtocolPort: 80}},
		Pools:     []openstack.Pool{{ID: "p80", ListenerID: "l80"}},
		Members:   map[string][]openstack.Member{"p80": {{Address: "10.1.0.5", ProtocolPort: 8080, SubnetID: "s"}}},
	}
	got, err := Annotations(svc, openstack.Port{ID: "vip"}, &openstack.LoadBalancer{ID: "lb", ProvisioningStatus: "ACTIVE"}, nil, want, cur)
	if err != nil {
		t.Fatal(err)
	}
	var pools []annotations.Pool
	if _, err := annotations.Decode(map[string]string{annotations.ServicePools: *got[annotations.ServicePools]}, annotations.ServicePools, &pools); err != nil {
		t.Fatal(err)
	}
	if len(pools) != 1 || pools[0].ID != "p80" || pools[0].ListenerID != "l80" || len(pools[0].Members) != 1 {
		t.Fatalf("pools annotation = %+v, want only the served TCP 80 pool with its member", pools)
	}
}

func TestStuck(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) openstack.Time { return openstack.Time{Time: now.Add(-ago)} }
	cases := []struct {
		name string
		lb   *openstack.LoadBalancer
		want bool
	}{
		{"no load balancer", nil, false},
		{"active for long is fine", &openstack.LoadBalancer{ProvisioningStatus: "ACTIVE", CreatedAt: at(time.Hour)}, false},
		{"pending for seconds is Octavia at work", &openstack.LoadBalancer{ProvisioningStatus: "PENDING_UPDATE", CreatedAt: at(time.Hour), UpdatedAt: at(5 * time.Second)}, false},
		{"pending since an update long ago is stuck", &openstack.LoadBalancer{ProvisioningStatus: "PENDING_UPDATE", CreatedAt: at(time.Hour), UpdatedAt: at(10 * time.Minute)}, true},
		{"a create may take minutes: an amphora boots", &openstack.LoadBalancer{ProvisioningStatus: "PENDING_CREATE", CreatedAt: at(5 * time.Minute)}, false},
		{"a create pending for a quarter of an hour is stuck", &openstack.LoadBalancer{ProvisioningStatus: "PENDING_CREATE", CreatedAt: at(15 * time.Minute)}, true},
		{"no timestamps: cannot tell, not reported", &openstack.LoadBalancer{ProvisioningStatus: "PENDING_DELETE"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := Stuck(tc.lb, now); got != tc.want {
				t.Fatalf("Stuck = %v, want %v", got, tc.want)
			}
		})
	}
}
