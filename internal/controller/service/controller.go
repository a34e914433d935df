package service

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ravenctrl "github.com/raven-net/raven/internal/controller"
)

// SetupWithManager watches Services, their EndpointSlices, and repair requests from the resync.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, workers int, repairs <-chan event.GenericEvent) error {
	toService := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[discoveryv1.LabelServiceName]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return builder.ControllerManagedBy(mgr).
		Named("service").
		For(&corev1.Service{}).
		Watches(&discoveryv1.EndpointSlice{}, toService).
		WatchesRawSource(source.Channel(repairs, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, RateLimiter: ravenctrl.RateLimiter()}).
		Complete(r)
}
