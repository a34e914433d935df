package namespace

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/pkg/annotations"
)

// Reconciler gives namespaces their networks.
type Reconciler struct {
	Client   client.Client
	Neutron  *neutron.Manager
	Gate     *controller.Gate
	Recorder events.EventRecorder
	// Scope says which namespaces get a network (nil: all).
	Scope *controller.Scope
	// Teardowns bounds the workers that remove networks at once (a slow Neutron can take seconds per
	// namespace): the other workers stay free for new namespaces. Nil: no bound.
	Teardowns chan struct{}
}

// Reconcile makes Neutron match the namespace as it is now.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := r.Gate.Wait(ctx); err != nil {
		return reconcile.Result{}, err
	}
	log := klog.FromContext(ctx)
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, req.NamespacedName, &ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	excluded := r.Scope.Excluded(&ns)
	if !ns.DeletionTimestamp.IsZero() || excluded != "" {
		return r.teardown(ctx, &ns, excluded)
	}
	// The finalizer goes on before the first OpenStack write, so nothing can be left behind.
	if err := controller.SetFinalizer(ctx, r.Client, &ns, annotations.NamespaceFinalizer, true); err != nil {
		return reconcile.Result{}, err
	}
	nn, err := r.Neutron.EnsureNamespace(ctx, string(ns.UID), ns.Name)
	if err != nil {
		r.warn(&ns, "NetworkCreate", "creating the namespace network", err)
		return reconcile.Result{}, err
	}
	want, err := Annotations(nn, r.Neutron.C.RouterID)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(annotations.Changes(ns.Annotations, want)) == 0 {
		return reconcile.Result{}, nil
	}
	if err := r.patch(ctx, &ns, want); err != nil {
		return reconcile.Result{}, err
	}
	log.V(1).Info("Namespace network ready", "network", nn.Network.ID, "subnet", nn.Subnet.ID, "cidr", nn.Subnet.CIDR)
	if r.Recorder != nil {
		r.Recorder.Eventf(&ns, nil, corev1.EventTypeNormal, "NetworkReady", "Annotate", "network %s, subnet %s (%s)", nn.Network.ID, nn.Subnet.ID, nn.Subnet.CIDR)
	}
	return reconcile.Result{}, nil
}

// teardown removes the namespace network of a namespace that is going or excluded, then its finalizer
// (and, when excluded, its network annotations).
func (r *Reconciler) teardown(ctx context.Context, ns *corev1.Namespace, excluded string) (reconcile.Result, error) {
	log := klog.FromContext(ctx)
	if !controllerutil.ContainsFinalizer(ns, annotations.NamespaceFinalizer) {
		return reconcile.Result{}, nil
	}
	if r.Teardowns != nil {
		select {
		case r.Teardowns <- struct{}{}:
			defer func() { <-r.Teardowns }()
		default:
			return reconcile.Result{RequeueAfter: time.Second}, nil // every teardown slot busy: new namespaces go first
		}
	}
	err := r.Neutron.DeleteNamespace(ctx, string(ns.UID))
	if errors.Is(err, neutron.ErrPortsRemain) {
		log.V(3).Info("Waiting for pod ports to go before removing the network")
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		r.warn(ns, "NetworkDelete", "removing the namespace network", err)
		return reconcile.Result{}, err
	}
	log.V(1).Info("Removed namespace network", "excluded", excluded)
	if excluded != "" {
		if err := r.patch(ctx, ns, map[string]*string{annotations.NamespaceNetwork: nil, annotations.NamespaceSubnet: nil}); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, controller.SetFinalizer(ctx, r.Client, ns, annotations.NamespaceFinalizer, false)
}

// patch writes the annotations that differ from want (nil values remove them).
func (r *Reconciler) patch(ctx context.Context, ns *corev1.Namespace, want map[string]*string) error {
	changes := annotations.Changes(ns.Annotations, want)
	if len(changes) == 0 {
		return nil
	}
	body, err := annotations.MergePatch(changes)
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(r.Client.Patch(ctx, ns, client.RawPatch(types.MergePatchType, body), client.FieldOwner(annotations.FieldManager)))
}

func (r *Reconciler) warn(ns *corev1.Namespace, action, what string, err error) {
	controller.Warn(r.Recorder, ns, controller.Reason(action, err), action, what, err)
}
