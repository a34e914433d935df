package slim

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/pkg/annotations"
)

func TestSlimPodKeepsWhatRavenReads(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels: map[string]string{"app": "web"}, Finalizers: []string{"f"},
			OwnerReferences: []metav1.OwnerReference{{Name: "rs"}},
			Annotations: map[string]string{annotations.PodPort: "{}", annotations.PodSubnet: "{}", annotations.PodPortCheck: "id",
				"kubectl.kubernetes.io/last-applied-configuration": "a large document"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{
			{Name: "app", Image: "i", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}, {Name: "side", Image: "j"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	cases := []struct {
		name string
		ok   func(*corev1.Pod) bool
	}{
		{"identity", func(s *corev1.Pod) bool {
			return s.Name == "p" && s.Namespace == "ns" && s.UID == "u" && s.ResourceVersion == "7"
		}},
		{"deletion", func(s *corev1.Pod) bool { return s.DeletionTimestamp != nil }},
		{"labels and finalizers", func(s *corev1.Pod) bool { return s.Labels["app"] == "web" && len(s.Finalizers) == 1 }},
		{"Raven's annotations, and no other", func(s *corev1.Pod) bool {
			return len(s.Annotations) == 3 && s.Annotations[annotations.PodPortCheck] == "id"
		}},
		{"no owner references or managed fields", func(s *corev1.Pod) bool { return s.OwnerReferences == nil && s.ManagedFields == nil }},
		{"node", func(s *corev1.Pod) bool { return s.Spec.NodeName == "n" }},
		{"phase and address, no conditions", func(s *corev1.Pod) bool {
			return s.Status.Phase == corev1.PodRunning && s.Status.PodIP == "10.0.0.1" && s.Status.Conditions == nil
		}},
		{"the containers that name ports, with their ports only", func(s *corev1.Pod) bool {
			return len(s.Spec.Containers) == 1 && s.Spec.Containers[0].Image == "" && s.Spec.Containers[0].Ports[0].Name == "http"
		}},
	}
	out, err := (&Table{}).Pod(pod)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*corev1.Pod)
	for _, tc := range cases {
		if !tc.ok(slim) {
			t.Errorf("%s: not kept as it should be: %+v", tc.name, slim)
		}
	}
	if pod.Annotations["kubectl.kubernetes.io/last-applied-configuration"] == "" {
		t.Error("the informer's object was changed")
	}
}

// TestPodsShareRepeatedValues checks that two pods of one ReplicaSet share their labels, named ports and
// subnet annotation, and that pods that differ do not.
func TestPodsShareRepeatedValues(t *testing.T) {
	tbl := &Table{}
	slim := func(i int) *corev1.Pod {
		o, err := tbl.Pod(decodedPod(t, i))
		if err != nil {
			t.Fatal(err)
		}
		return o.(*corev1.Pod)
	}
	a, b, other := slim(0), slim(1), slim(15) // 0 and 1 in ns-0, 15 in ns-1
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two pods of one ReplicaSet keep two copies of their labels")
	}
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] {
		t.Error("two pods of one ReplicaSet keep two copies of their named ports")
	}
	if !same(a.Namespace, b.Namespace) || !same(a.Annotations[annotations.PodSubnet], b.Annotations[annotations.PodSubnet]) {
		t.Error("two pods of one namespace keep two copies of its name or subnet")
	}
	if same(a.Annotations[annotations.PodSubnet], other.Annotations[annotations.PodSubnet]) || a.Namespace == other.Namespace {
		t.Error("pods of two namespaces share a subnet")
	}
	if a.Annotations[annotations.PodPort] == b.Annotations[annotations.PodPort] {
		t.Error("two pods share a port annotation")
	}
	// The port annotation is kept compact, and is still the value the controller would write.
	whole := decodedPod(t, 0).Annotations[annotations.PodPort]
	if kept := a.Annotations[annotations.PodPort]; len(kept)*2 > len(whole) || !annotations.Same(kept, whole) {
		t.Errorf("the cached port annotation %q is not the compact form of %q", kept, whole)
	}
	if !reflect.DeepEqual(a.Labels, map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5"}) {
		t.Errorf("labels = %v", a.Labels)
	}
}

// TestFullTableStartsAnew checks that the table's size stays bounded: past maxShared values it starts empty,
// and the pods it served keep their values.
func TestFullTableStartsAnew(t *testing.T) {
	defer func(n int) { maxShared = n }(maxShared)
	maxShared = 4
	tbl := &Table{}
	var kept []*corev1.Pod
	for i := range 40 {
		o, err := tbl.Pod(decodedPod(t, i*15)) // one namespace and node each
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, o.(*corev1.Pod))
		if n := tbl.size(); n > maxShared {
			t.Fatalf("the table holds %d values after pod %d, past its bound %d", n, i, maxShared)
		}
	}
	for i, p := range kept {
		if want := fmt.Sprintf("ns-%d", i); p.Namespace != want {
			t.Fatalf("pod %d: namespace %q, want %q", i, p.Namespace, want)
		}
	}
}

func TestSlimEndpointSliceKeepsWhatRavenReads(t *testing.T) {
	ready, port, name := true, int32(8080), "http"
	node, zone := "node-1", "z"
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-abc", Namespace: "ns", UID: "u", ResourceVersion: "9",
			Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kcm"}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName: &node, Zone: &zone, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: "pu", ResourceVersion: "3"}}},
	}
	out, err := (&Table{}).EndpointSlice(es)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*discoveryv1.EndpointSlice)
	want := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "svc-abc", Namespace: "ns", UID: "u", ResourceVersion: "9", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("slim slice\n got %+v\nwant %+v", got, want)
	}
	if es.Endpoints[0].NodeName == nil || es.Endpoints[0].TargetRef.UID != "pu" {
		t.Error("the informer's object was changed")
	}
}
