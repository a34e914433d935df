package manager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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
	out, err := slimPod(pod)
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
