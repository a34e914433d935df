package uninstall

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/raven-net/raven/pkg/annotations"
)

// finalized is a kind of object Raven puts a finalizer on.
type finalized struct {
	kind, finalizer string
	list            func(context.Context) ([]metav1.ObjectMeta, error)
	get             func(context.Context, metav1.ObjectMeta) (metav1.ObjectMeta, error)
	patch           func(context.Context, metav1.ObjectMeta, []byte) error
}

// Finalizers takes Raven's finalizers off every namespace and Service, so that they are deleted without
// Raven; other finalizers stay. A dry run counts them.
func Finalizers(ctx context.Context, kube kubernetes.Interface, dryRun bool) (Report, error) {
	opts := metav1.PatchOptions{FieldManager: annotations.FieldManager}
	kinds := []finalized{
		{"namespace finalizers", annotations.NamespaceFinalizer,
			func(ctx context.Context) ([]metav1.ObjectMeta, error) {
				l, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
				if err != nil {
					return nil, err
				}
				return metas(l.Items, func(i int) metav1.ObjectMeta { return l.Items[i].ObjectMeta }), nil
			},
			func(ctx context.Context, m metav1.ObjectMeta) (metav1.ObjectMeta, error) {
				o, err := kube.CoreV1().Namespaces().Get(ctx, m.Name, metav1.GetOptions{})
				return o.ObjectMeta, err
			},
			func(ctx context.Context, m metav1.ObjectMeta, p []byte) error {
				_, err := kube.CoreV1().Namespaces().Patch(ctx, m.Name, types.MergePatchType, p, opts)
				return err
			}},
		{"service finalizers", annotations.ServiceFinalizer,
			func(ctx context.Context) ([]metav1.ObjectMeta, error) {
				l, err := kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
				if err != nil {
					return nil, err
				}
				return metas(l.Items, func(i int) metav1.ObjectMeta { return l.Items[i].ObjectMeta }), nil
			},
			func(ctx context.Context, m metav1.ObjectMeta) (metav1.ObjectMeta, error) {
				o, err := kube.CoreV1().Services(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
				return o.ObjectMeta, err
			},
			func(ctx context.Context, m metav1.ObjectMeta, p []byte) error {
				_, err := kube.CoreV1().Services(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, p, opts)
				return err
			}},
	}
	r := Report{}
	for _, k := range kinds {
		if err := k.strip(ctx, dryRun, r); err != nil {
			return r, err
		}
	}
	return r, nil
}

func metas[T any](items []T, meta func(int) metav1.ObjectMeta) []metav1.ObjectMeta {
	out := make([]metav1.ObjectMeta, len(items))
	for i := range items {
		out[i] = meta(i)
	}
	return out
}

// strip takes the finalizer off every object of the kind that has it.
func (k finalized) strip(ctx context.Context, dryRun bool, r Report) error {
	objs, err := k.list(ctx)
	if err != nil {
		return fmt.Errorf("listing for %s: %w", k.kind, err)
	}
	for _, m := range objs {
		if !slices.Contains(m.Finalizers, k.finalizer) {
			continue
		}
		r[k.kind]++
		if dryRun {
			continue
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := k.get(ctx, m)
			if err != nil {
				return err
			}
			rest := slices.DeleteFunc(slices.Clone(cur.Finalizers), func(x string) bool { return x == k.finalizer })
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": append([]string{}, rest...), "resourceVersion": cur.ResourceVersion}})
			if err != nil {
				return err
			}
			return k.patch(ctx, m, patch)
		})
		if err != nil {
			return fmt.Errorf("taking %s off %s/%s: %w", k.finalizer, m.Namespace, m.Name, err)
		}
	}
	return nil
}
