package manager

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
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

// earlierDefaultID is the cluster ID Raven took, before the kube-system namespace's UID, when none was
// configured.
const earlierDefaultID = "kubernetes"

// refuseEarlierDefault fails when no cluster ID is configured and Neutron holds objects of the earlier default:
// the kube-system UID would make every namespace's network, every port and load balancer again, and leave
// the earlier ones to nobody. The error says how to pin the ID either way.
func refuseEarlierDefault(ctx context.Context, n openstack.Networking, configured, defaulted string) error {
	if configured != "" || defaulted == earlierDefaultID {
		return nil
	}
	f := openstack.Filter{Tags: ownership.ClusterSelector(earlierDefaultID)}
	lists := []struct {
		kind string
		list func() (int, error)
	}{
		{"networks", func() (int, error) { x, err := n.ListNetworks(ctx, f); return len(x), err }},
		{"routers", func() (int, error) { x, err := n.ListRouters(ctx, f); return len(x), err }},
		{"subnet pools", func() (int, error) { x, err := n.ListSubnetPools(ctx, f); return len(x), err }},
	}
	for _, l := range lists {
		found, err := l.list()
		if err != nil {
			return fmt.Errorf("no clusterID is configured, and Neutron could not be asked for %s of the earlier default cluster ID %q: %w", l.kind, earlierDefaultID, err)
		}
		if found > 0 {
			return fmt.Errorf("no clusterID is configured, and Neutron holds %d %s tagged %s, made by a Raven that took the earlier default cluster ID %q; "+
				"the default is now the kube-system namespace's UID (%s), under which Raven would make everything again and leave those to nobody. "+
				"Set clusterID: %s in Raven's configuration (or --cluster-id=%s) to keep them, or set clusterID: %s to start anew and remove them with "+
				"raven uninstall --cluster-id=%s", found, l.kind, f.Tags[0], earlierDefaultID, defaulted, earlierDefaultID, earlierDefaultID, defaulted, earlierDefaultID)
		}
	}
	return nil
}
