package manager

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestClusterID(t *testing.T) {
	kubeSystem := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "5b0c2f1e-0d7a-4c55-9a43-2f0e8f1d7c11"}}
	cases := []struct {
		name       string
		objects    []corev1.Namespace
		configured string
		want       string
		wantErr    string
	}{
		{"a configured ID is kept", []corev1.Namespace{*kubeSystem}, "prod-east", "prod-east", ""},
		{"without one, the kube-system namespace's UID", []corev1.Namespace{*kubeSystem}, "", string(kubeSystem.UID), ""},
		{"without one and without kube-system, an error that says why", nil, "", "", "kube-system"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := fake.NewClientset()
			for i := range c.objects {
				if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &c.objects[i], metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := clusterID(context.Background(), cs.CoreV1().Namespaces(), c.configured)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("clusterID = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
