package manager

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// clusterID is the configured cluster ID or, when none is, the UID of the kube-system namespace: a default
// that two clusters sharing a Neutron never share, where a fixed name would make each sweep the other's
// objects.
func clusterID(ctx context.Context, namespaces corev1client.NamespaceInterface, configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	ns, err := namespaces.Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("no clusterID is configured and the kube-system namespace, whose UID would be it, cannot be read: %w", err)
	}
	if ns.UID == "" {
		return "", fmt.Errorf("no clusterID is configured and the kube-system namespace has no UID")
	}
	return string(ns.UID), nil
}
