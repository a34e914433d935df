package networkpolicy

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/policy"
)

func TestServiceOf(t *testing.T) {
	name, port, no := "http", int32(8080), false
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.0.0.7", "fd00::7"}, ExternalIPs: []string{"172.24.4.60"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.24.4.101"}}}}}
	slice := discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.0.3"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "b1"}},
			{Addresses: []string{"10.244.0.4"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "b2"}},
			{Addresses: []string{"192.168.1.9"}},
		}}
	ready := []policy.Backend{{Pod: "ns/b1", IP: "10.244.0.3", Port: 8080}, {IP: "192.168.1.9", Port: 8080}}
	podAt := map[string]string{"10.244.0.3": "ns/b1", "10.244.0.4": "ns/b2", "10.244.0.8": "ns/old"}
	cases := []struct {
		name    string
		members []octavia.ListenerMember
		fips    []string
		want    policy.Service
	}{
		{name: "its clusterIPs lead to its load balancer; an externalIP or an ingress address Raven did not make does not",
			want: policy.Service{Namespace: "ns", Name: "web", Addresses: []string{"10.0.0.7"},
				Ports: []policy.ServicePort{{Protocol: "tcp", Port: 80, Backends: ready}, {Protocol: "udp", Port: 53}}}},
		{name: "a floating IP Raven made for it leads to its load balancer", fips: []string{"172.24.4.60", "2001:db8::1"},
			want: policy.Service{Namespace: "ns", Name: "web", Addresses: []string{"10.0.0.7", "172.24.4.60"},
				Ports: []policy.ServicePort{{Protocol: "tcp", Port: 80, Backends: ready}, {Protocol: "udp", Port: 53}}}},
		{name: "the members Octavia still lists join the ready endpoints, each by its pod, on its own listener",
			members: []octavia.ListenerMember{
				{Protocol: "tcp", Port: 80, Address: "10.244.0.3", MemberPort: 8080}, // also an endpoint: once
				{Protocol: "tcp", Port: 80, Address: "10.244.0.4", MemberPort: 8080}, // not ready any more, still a member
				{Protocol: "tcp", Port: 80, Address: "10.244.0.8", MemberPort: 8080}, // its pod left the slice, still a member
				{Protocol: "tcp", Port: 80, Address: "10.244.0.9", MemberPort: 8080}, // no pod there now
				{Protocol: "udp", Port: 53, Address: "10.244.0.4", MemberPort: 53},
				{Protocol: "tcp", Port: 8443, Address: "10.244.0.5", MemberPort: 8443}, // a listener the Service lost
			},
			want: policy.Service{Namespace: "ns", Name: "web", Addresses: []string{"10.0.0.7"},
				Ports: []policy.ServicePort{
					{Protocol: "tcp", Port: 80, Backends: append(append([]policy.Backend{}, ready...),
						policy.Backend{Pod: "ns/b2", IP: "10.244.0.4", Port: 8080}, policy.Backend{Pod: "ns/old", IP: "10.244.0.8", Port: 8080},
						policy.Backend{IP: "10.244.0.9", Port: 8080})},
					{Protocol: "udp", Port: 53, Backends: []policy.Backend{{Pod: "ns/b2", IP: "10.244.0.4", Port: 53}}},
				}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := serviceOf(svc, []discoveryv1.EndpointSlice{slice}, tc.members, tc.fips, podAt)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("serviceOf =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}
