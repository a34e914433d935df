package networkpolicy

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

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
	got := serviceOf(svc, []discoveryv1.EndpointSlice{slice})
	want := policy.Service{Namespace: "ns", Name: "web", Addresses: []string{"10.0.0.7", "172.24.4.60", "172.24.4.101"},
		Ports: []policy.ServicePort{
			{Protocol: "tcp", Port: 80, Backends: []policy.Backend{{Pod: "ns/b1", IP: "10.244.0.3", Port: 8080}, {IP: "192.168.1.9", Port: 8080}}},
			{Protocol: "udp", Port: 53},
		}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("serviceOf =\n%+v\nwant (IPv4 addresses of every kind; ready endpoints only, a pod's by its key, by the target port's number)\n%+v", got, want)
	}
}
