package networkpolicy

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/util/workqueue"
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

// SetupWithManager watches NetworkPolicies, the pods and namespaces they may select, the nodes (an isolated
// pod admits its own), Services and their EndpointSlices (a Service is reached where its backends are), and
// what the load balancers serve (their members and floating IPs): each change brings the one cluster-wide
// request back.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{Key} })
	b := builder.ControllerManagedBy(mgr).
		Named("networkpolicy").
		Watches(&networkingv1.NetworkPolicy{}, all).
		Watches(&corev1.Namespace{}, all, builder.WithPredicates(labelsChanged)).
		Watches(&corev1.Pod{}, all, builder.WithPredicates(podChanged)).
		Watches(&corev1.Node{}, all, builder.WithPredicates(addressesChanged)).
		Watches(&corev1.Service{}, all, builder.WithPredicates(serviceChanged)).
		Watches(&discoveryv1.EndpointSlice{}, all)
	if ch := r.LoadBalancers.Changed(); ch != nil {
		b = b.WatchesRawSource(signals(ch))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: 1, RateLimiter: ravenctrl.RateLimiter()}).
		Complete(r)
}

// signals brings the cluster-wide request back each time ch receives.
func signals(ch <-chan struct{}) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ch:
					q.Add(Key)
				}
			}
		}()
		return nil
	})
}

// labelsChanged passes creates, deletes and label changes.
var labelsChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
}

// addressesChanged passes creates, deletes and changes of a node's addresses (its group admits them).
var addressesChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		return !slices.Equal(o.Status.Addresses, n.Status.Addresses)
	},
}

// serviceChanged passes what changes how a Service is reached: its clusterIPs and ports (its floating IPs come
// with what the load balancers serve).
var serviceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Service), e.ObjectNew.(*corev1.Service)
		return !slices.Equal(o.Spec.ClusterIPs, n.Spec.ClusterIPs) || !slices.Equal(o.Spec.Ports, n.Spec.Ports)
	},
}

// podChanged passes what changes a pod's groups or their rules: its labels, its port (address), its
// container ports (named ports), its node (whose group it carries when isolated), its coming and going.
var podChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
		return !maps.Equal(o.Labels, n.Labels) || o.Annotations[annotations.PodPort] != n.Annotations[annotations.PodPort] || o.Spec.NodeName != n.Spec.NodeName ||
			!slices.EqualFunc(o.Spec.Containers, n.Spec.Containers, func(a, b corev1.Container) bool { return slices.Equal(a.Ports, b.Ports) })
	},
}
