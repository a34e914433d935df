package namespace

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ravenctrl "github.com/raven-net/raven/internal/controller"
)

// SetupWithManager watches namespaces and repair requests from the resync.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, workers int, repairs <-chan event.GenericEvent) error {
	return builder.ControllerManagedBy(mgr).
		Named("namespace").
		For(&corev1.Namespace{}).
		WatchesRawSource(source.Channel(repairs, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, RateLimiter: ravenctrl.RateLimiter()}).
		Complete(r)
}
