package pod

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ravenctrl "github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/pkg/annotations"
)

// WatchPods starts the cache of pods, which the reconciler and the sweep read, with no index beyond the
// cache's own by namespace.
func WatchPods(ctx context.Context, mgr manager.Manager) error {
	_, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	return err
}

// SetupWithManager watches pods, the namespaces they live in (a namespace's network annotation
// brings its waiting pods back), and repair requests from the resync.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, workers int, repairs <-chan event.GenericEvent) error {
	podsOf := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var pods corev1.PodList
		if err := mgr.GetClient().List(ctx, &pods, client.InNamespace(o.GetName())); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(pods.Items))
		for _, p := range pods.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
		return reqs
	})
	networkChanged := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetAnnotations()[annotations.NamespaceSubnet] != e.ObjectNew.GetAnnotations()[annotations.NamespaceSubnet]
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	b := builder.ControllerManagedBy(mgr).
		Named("pod").
		For(&corev1.Pod{}, builder.WithPredicates(relevant)).
		Watches(&corev1.Namespace{}, podsOf, builder.WithPredicates(networkChanged)).
		WatchesRawSource(source.Channel(repairs, &handler.EnqueueRequestForObject{}))
	if r.Nested != nil {
		// A deleted nested node's trunk is forgotten (its name may come back on another VM).
		b = b.Watches(&corev1.Node{}, r.forgetTrunks())
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: workers, RateLimiter: ravenctrl.RateLimiter()}).
		Complete(r)
}

// relevant drops pod updates that change nothing Raven looks at (status churn from the kubelet); raven-node's
// check request is one it looks at.
var relevant = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
		return o.Status.Phase != n.Status.Phase || o.Spec.NodeName != n.Spec.NodeName ||
			o.Annotations[annotations.PodPort] != n.Annotations[annotations.PodPort] ||
			o.Annotations[annotations.PodSubnet] != n.Annotations[annotations.PodSubnet] ||
			o.Annotations[annotations.PodPortCheck] != n.Annotations[annotations.PodPortCheck] ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	},
}
