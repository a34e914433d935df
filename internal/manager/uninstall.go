package manager

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/uninstall"
)

// Uninstall removes what Raven made for the configured cluster once Raven no longer runs: its finalizers on
// namespaces and Services first (so that Kubernetes deletes them without Raven), then every OpenStack object
// with the cluster's tag. It refuses while a Raven holds the cluster's Lease.
func Uninstall(ctx context.Context, o config.Options, dryRun bool, timeout time.Duration) error {
	log := klog.FromContext(ctx)
	configured := o.ClusterID
	_, kube, err := connect(ctx, &o)
	if err != nil {
		return err
	}
	if err := notRunning(ctx, kube, o, time.Now()); err != nil {
		return err
	}
	prov, err := configuredProvider(o.Octavia)
	if err != nil {
		return err
	}
	clients, err := openstack.NewClients(ctx, o.OpenStack.CloudsFile, o.OpenStack.Cloud, nil)
	if err != nil {
		return err
	}
	if err := refuseEarlierDefault(ctx, clients.Networking, configured, o.ClusterID); err != nil {
		return err
	}
	log = log.WithValues("cluster", o.ClusterID, "dryRun", dryRun)
	log.Info("Uninstalling Raven's objects")
	fin, err := uninstall.Finalizers(ctx, kube, dryRun)
	log.Info("Kubernetes", "finalizers", fin.String())
	if err != nil {
		return err
	}
	r, err := uninstall.OpenStack(ctx, clients.Networking, clients.LoadBalancing, uninstall.Options{
		Cluster: o.ClusterID, Provider: prov, RouterID: o.Neutron.RouterID, WorkerSubnetID: o.Nested.WorkerSubnetID,
		DryRun: dryRun, Timeout: timeout, Poll: 2 * time.Second,
	})
	log.Info("OpenStack", "objects", r.String())
	return err
}

// notRunning fails while a Raven of the cluster holds its Lease: it would make again what the uninstall
// removes. Without leader election there is no Lease to look at.
func notRunning(ctx context.Context, kube kubernetes.Interface, o config.Options, now time.Time) error {
	if !o.LeaderElection.Enabled {
		klog.FromContext(ctx).Info("Leader election is off in this configuration: make sure no Raven of the cluster runs")
		return nil
	}
	name := "raven-" + o.ClusterID
	l, err := kube.CoordinationV1().Leases(o.LeaderElection.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the Lease %s/%s to tell whether Raven still runs: %w", o.LeaderElection.Namespace, name, err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil {
		return nil
	}
	if age := now.Sub(l.Spec.RenewTime.Time); age < 2*o.LeaderElection.LeaseDuration.Duration {
		return fmt.Errorf("raven still runs: %s holds the Lease %s/%s, renewed %s ago; remove its Deployment first (kubectl delete -k of your overlay)",
			*l.Spec.HolderIdentity, o.LeaderElection.Namespace, name, age.Round(time.Second))
	}
	return nil
}
