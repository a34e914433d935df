package pod

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/neutron"
)

// NestedNodes says which nodes are nested: Nova VMs whose pods' ports are VLAN subports of the VM port's
// trunk.
type NestedNodes struct {
	// Selector matches the nested nodes; nil: every node is one.
	Selector labels.Selector
}

// vm returns the named node as a nested node, nil when it is not one (or n is nil, or the pod has no node).
func (n *NestedNodes) vm(ctx context.Context, c ctrl.Reader, name string) (*neutron.VMNode, error) {
	if n == nil || name == "" {
		return nil, nil
	}
	var node corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
		return nil, err
	}
	if n.Selector != nil && !n.Selector.Matches(labels.Set(node.Labels)) {
		return nil, nil
	}
	vm := &neutron.VMNode{Name: name}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			vm.Address = a.Address
			break
		}
	}
	return vm, nil
}

// forgetTrunks is the handler of Node events: a deleted node's trunk is dropped from what Raven knows, so that
// a Node made again under the same name (another VM) has its VM's port looked up again, and a cluster whose VMs
// come and go does not keep every one it ever had. It enqueues nothing.
func (r *Reconciler) forgetTrunks() handler.EventHandler {
	return handler.Funcs{
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if r.Neutron == nil || r.Neutron.T == nil || e.Object == nil {
				return
			}
			r.Neutron.T.Forget(e.Object.GetName())
			klog.FromContext(ctx).V(2).Info("Forgot the trunk of a deleted node", "node", e.Object.GetName())
		},
	}
}
