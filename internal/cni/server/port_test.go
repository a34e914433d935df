package server

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/cni/wire"
	"github.com/raven-net/raven/pkg/annotations"
)

func TestEvaluate(t *testing.T) {
	want := wire.Pod{Namespace: "default", Name: "nginx", UID: testUID}
	tests := []struct {
		name        string
		pod         func(t *testing.T) *corev1.Pod
		want        wire.Pod
		waitingFor  string
		elsewhere   bool
		noPodUID    bool
		wantPortUID string
	}{
		{name: "no pod in the cache", pod: func(*testing.T) *corev1.Pod { return nil }, waitingFor: "to appear in the node's pod cache"},
		{name: "a pod of that name with another UID", pod: func(t *testing.T) *corev1.Pod {
			p := testPod(t, annotated)
			p.UID = "new-uid"
			return p
		}, waitingFor: "with UID " + testUID},
		{name: "no annotation", pod: func(t *testing.T) *corev1.Pod { return testPod(t) }, waitingFor: "the kuryr.org/neutron-port annotation"},
		{name: "a broken annotation", pod: func(t *testing.T) *corev1.Pod {
			p := testPod(t, annotated)
			p.Annotations[annotations.PodPort] = "{"
			return p
		}, waitingFor: "a valid kuryr.org/neutron-port annotation"},
		{name: "a port for an earlier pod of that name", pod: func(t *testing.T) *corev1.Pod {
			return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.PodUID = "old" })
		}, waitingFor: "is for UID old"},
		{name: "a port for an earlier pod, bound elsewhere, is still only stale", pod: func(t *testing.T) *corev1.Pod {
			return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.PodUID = "old"; p.HostID = "node-b" })
		}, waitingFor: "is for UID old"},
		{name: "a port without pod_uid is refused, bound here or not", pod: func(t *testing.T) *corev1.Pod {
			return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.PodUID = ""; p.HostID = "" })
		}, noPodUID: true},
		{name: "a port bound to another node", pod: func(t *testing.T) *corev1.Pod {
			return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.HostID = "node-b" })
		}, elsewhere: true},
		{name: "a port not bound yet", pod: func(t *testing.T) *corev1.Pod {
			return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.HostID = "" })
		}, waitingFor: "binding:host_id is empty"},
		{name: "a port without IP", pod: func(t *testing.T) *corev1.Pod {
			return testPod(t, func(p *annotations.Port, _ *annotations.Subnet) { p.FixedIPs = nil })
		}, waitingFor: "an IP address"},
		{name: "a subnet annotation of another subnet", pod: func(t *testing.T) *corev1.Pod {
			return testPod(t, func(_ *annotations.Port, s *annotations.Subnet) { s.ID = "sub-2" })
		}, waitingFor: "of subnet sub-1 (it names sub-2)"},
		{name: "a ready port", pod: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) }, wantPortUID: testUID},
		{name: "the runtime passed no UID", pod: func(t *testing.T) *corev1.Pod { return testPod(t, annotated) },
			want: wire.Pod{Namespace: "default", Name: "nginx"}, wantPortUID: testUID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := want
			if tt.want != (wire.Pod{}) {
				w = tt.want
			}
			got, waitingFor, err := evaluate(tt.pod(t), w, testNode)
			var be *boundElsewhereError
			if tt.elsewhere != errors.As(err, &be) {
				t.Fatalf("err = %v, want bound elsewhere %v", err, tt.elsewhere)
			}
			var nu *noPodUIDError
			if tt.noPodUID != errors.As(err, &nu) {
				t.Fatalf("err = %v, want a refusal for the missing pod_uid %v", err, tt.noPodUID)
			}
			if !tt.elsewhere && !tt.noPodUID && err != nil {
				t.Fatal(err)
			}
			if tt.waitingFor == "" && waitingFor != "" || !strings.Contains(waitingFor, tt.waitingFor) {
				t.Errorf("waiting for %q, want %q", waitingFor, tt.waitingFor)
			}
			if got.uid != tt.wantPortUID {
				t.Errorf("target UID %q, want %q", got.uid, tt.wantPortUID)
			}
		})
	}
}

func TestBuildSpec(t *testing.T) {
	tests := []struct {
		name       string
		edit       func(p *annotations.Port, s *annotations.Subnet)
		wantMTU    int
		wantRoutes []string
		wantErr    string
	}{
		{name: "the default MTU, the gateway and a host route", edit: annotated, wantMTU: 1442,
			wantRoutes: []string{"0.0.0.0/0 via 10.244.0.1", "192.168.50.0/24 via 10.244.0.254"}},
		{name: "the network's MTU", edit: func(p *annotations.Port, _ *annotations.Subnet) { p.MTU = 1400 }, wantMTU: 1400,
			wantRoutes: []string{"0.0.0.0/0 via 10.244.0.1", "192.168.50.0/24 via 10.244.0.254"}},
		{name: "no gateway, no default route", edit: func(_ *annotations.Port, s *annotations.Subnet) { s.GatewayIP = ""; s.HostRoutes = nil },
			wantMTU: 1442},
		{name: "a host route of the other family is left out", edit: func(_ *annotations.Port, s *annotations.Subnet) {
			s.HostRoutes = []annotations.HostRoute{{Destination: "fd00::/64", NextHop: "fd00::1"}}
		}, wantMTU: 1442, wantRoutes: []string{"0.0.0.0/0 via 10.244.0.1"}},
		{name: "a bad MAC", edit: func(p *annotations.Port, _ *annotations.Subnet) { p.MACAddress = "nope" }, wantErr: "mac_address"},
		{name: "a bad CIDR", edit: func(_ *annotations.Port, s *annotations.Subnet) { s.CIDR = "10.244.0.0" }, wantErr: "cidr"},
		{name: "a bad gateway", edit: func(_ *annotations.Port, s *annotations.Subnet) { s.GatewayIP = "x" }, wantErr: "gateway_ip"},
		{name: "a bad host route", edit: func(_ *annotations.Port, s *annotations.Subnet) {
			s.HostRoutes = []annotations.HostRoute{{Destination: "x", NextHop: "10.0.0.1"}}
		}, wantErr: "host route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg, _, err := evaluate(testPod(t, tt.edit), wire.Pod{Namespace: "default", Name: "nginx", UID: testUID}, testNode)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := buildSpec(tg, "/var/run/netns/x", "eth0")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("buildSpec = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var routes []string
			for _, r := range spec.Routes {
				routes = append(routes, r.Dst.String()+" via "+r.GW.String())
			}
			if spec.MTU != tt.wantMTU || strings.Join(routes, ",") != strings.Join(tt.wantRoutes, ",") ||
				spec.HostIfName != testTap || spec.Address.String() != "10.244.0.158/24" {
				t.Errorf("spec MTU %d routes %v host %s address %s", spec.MTU, routes, spec.HostIfName, spec.Address)
			}
		})
	}
}
