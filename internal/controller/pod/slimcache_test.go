package pod

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/raven-net/raven/internal/slim"
	"github.com/raven-net/raven/pkg/annotations"
)

// throughSlimCache makes the reconciler read pods as Raven's cache hands them out (slim.Table.Pod: the port
// annotation compact), and counts its patches.
func (w *world) throughSlimCache(t *testing.T) *int {
	t.Helper()
	tbl, patches := &slim.Table{}, 0
	w.r.Client = interceptor.NewClient(w.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return nil
			}
			s, err := tbl.Pod(p.DeepCopy())
			if err != nil {
				return err
			}
			*p = *s.(*corev1.Pod)
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	return &patches
}

// A pod read from the cache carries a compact port annotation: a pod in sync is not patched (a compact value
// is not a reason to write the whole one again), and one whose annotation someone changed, even in a field the
// cache does not keep, gets Raven's value back.
func TestAPodReadThroughTheSlimCache(t *testing.T) {
	w := newWorld(t, pod("a", "ua"))
	if err := w.reconcile(t, "a"); err != nil {
		t.Fatal(err)
	}
	var p corev1.Pod
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	if err := w.c.Get(context.Background(), key, &p); err != nil {
		t.Fatal(err)
	}
	written := p.Annotations[annotations.PodPort]
	patches, writes := w.throughSlimCache(t), w.n.Wrote()

	if err := w.reconcile(t, "a"); err != nil {
		t.Fatal(err)
	}
	if *patches != 0 || w.n.Wrote() != writes {
		t.Fatalf("a pod in sync read through the cache: %d patches, %d Neutron writes", *patches, w.n.Wrote()-writes)
	}

	var edited annotations.Port
	if _, err := annotations.Decode(p.Annotations, annotations.PodPort, &edited); err != nil {
		t.Fatal(err)
	}
	edited.SecurityGroups = append(edited.SecurityGroups, "someone-elses-group")
	v, err := annotations.Encode(edited)
	if err != nil {
		t.Fatal(err)
	}
	p.Annotations[annotations.PodPort] = v
	if err := w.c.Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	if err := w.reconcile(t, "a"); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Get(context.Background(), key, &p); err != nil {
		t.Fatal(err)
	}
	if *patches != 1 || p.Annotations[annotations.PodPort] != written {
		t.Fatalf("after an edit: %d patches, annotation %s, want Raven's %s", *patches, p.Annotations[annotations.PodPort], written)
	}
}
