package service

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/pkg/annotations"
)

// What Raven writes back on the Service: its annotations and its load balancer status.

// announce writes the Service's VIP and pool annotations as Octavia serves them now.
func (r *Reconciler) announce(ctx context.Context, svc *corev1.Service, vip openstack.Port, lb *openstack.LoadBalancer,
	fip *openstack.FloatingIP, want []octavia.Listener, cur octavia.Current) error {
	a, err := Annotations(svc, vip, lb, fip, want, cur)
	if err != nil {
		return err
	}
	return r.patchAnnotations(ctx, svc, a)
}

// patchStatus announces the floating IP of a type LoadBalancer Service in its status. The status of a Service of
// another loadBalancerClass is that class's controller's to write: Raven leaves it as it is.
func (r *Reconciler) patchStatus(ctx context.Context, svc *corev1.Service, fip *openstack.FloatingIP) error {
	if !ImplementsLoadBalancer(svc, r.Class) {
		klog.FromContext(ctx).V(3).Info("Leaving the load balancer status to the Service's class", "loadBalancerClass", *svc.Spec.LoadBalancerClass)
		return nil
	}
	var ingress []corev1.LoadBalancerIngress
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && fip != nil {
		ingress = []corev1.LoadBalancerIngress{{IP: fip.FloatingIP}}
	}
	cur := svc.Status.LoadBalancer.Ingress
	if len(cur) == len(ingress) && (len(cur) == 0 || cur[0].IP == ingress[0].IP) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": ingress}}})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, svc, client.RawPatch(types.MergePatchType, body), client.FieldOwner(annotations.FieldManager)))
}

// announceStatus writes the load balancer's provisioning status into an existing VIP annotation when it
// changed, so that the annotation shows the last status Raven saw (PENDING_* while Octavia works).
func (r *Reconciler) announceStatus(ctx context.Context, svc *corev1.Service, status string) error {
	var v annotations.VIP
	if ok, err := annotations.Decode(svc.Annotations, annotations.ServiceVIP, &v); !ok || err != nil || v.ProvisioningStatus == status {
		return nil // not announced yet (or unreadable: the next full write replaces it)
	}
	v.ProvisioningStatus = status
	enc, err := annotations.Encode(v)
	if err != nil {
		return err
	}
	return r.patchAnnotations(ctx, svc, map[string]*string{annotations.ServiceVIP: &enc})
}

func (r *Reconciler) patchAnnotations(ctx context.Context, svc *corev1.Service, want map[string]*string) error {
	changes := annotations.Changes(svc.Annotations, want)
	if len(changes) == 0 {
		return nil
	}
	body, err := annotations.MergePatch(changes)
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(r.Client.Patch(ctx, svc, client.RawPatch(types.MergePatchType, body), client.FieldOwner(annotations.FieldManager)))
}
