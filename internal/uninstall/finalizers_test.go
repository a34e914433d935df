package uninstall

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/raven-net/raven/pkg/annotations"
)

// Raven's finalizers come off namespaces and Services, others' stay; a dry run only counts them.
func TestFinalizers(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Finalizers: []string{"example.com/keep", annotations.NamespaceFinalizer}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s", Finalizers: []string{annotations.ServiceFinalizer}}},
	)
	finalizers := func() (ns, svc []string) {
		n, err := kube.CoreV1().Namespaces().Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := kube.CoreV1().Services("a").Get(ctx, "s", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Finalizers, s.Finalizers
	}
	for _, dry := range []bool{true, false} {
		r, err := Finalizers(ctx, kube, dry)
		if err != nil {
			t.Fatal(err)
		}
		if r["namespace finalizers"] != 1 || r["service finalizers"] != 1 {
			t.Errorf("dry run %v: report %v, want one of each", dry, r)
		}
		ns, svc := finalizers()
		if dry && (len(ns) != 2 || len(svc) != 1) {
			t.Errorf("a dry run changed finalizers: namespace %v, Service %v", ns, svc)
		}
		if !dry && (!slices.Equal(ns, []string{"example.com/keep"}) || len(svc) != 0) {
			t.Errorf("after the removal: namespace %v (want only example.com/keep), Service %v (want none)", ns, svc)
		}
	}
}
