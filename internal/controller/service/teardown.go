package service

import (
	"context"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// Teardown deletes every OpenStack object of the service with this UID: the floating IP, the load balancer
// (cascade; on a provider with MembersFirst its monitored pools' members before it) and, once Octavia has let go of it,
// the VIP port. It returns false while Octavia is still deleting. The reconciler and the sweep both use it.
// deletes, shared with the reconciler, keeps a delete the provider has queued from being sent again.
func Teardown(ctx context.Context, nm *neutron.Manager, lbc openstack.LoadBalancing, prov octavia.Provider, deletes *octavia.Deletes, uid string) (bool, error) {
	owner := ownership.Owner{Cluster: nm.C.ID, Kind: ownership.KindService, UID: uid}
	if _, _, err := nm.EnsureFloatingIP(ctx, owner, false, "", ""); err != nil {
		return false, err
	}
	lbs, err := octavia.Owned(ctx, lbc, owner.Tags())
	if err != nil {
		return false, err
	}
	for _, lb := range lbs {
		if lb.ProvisioningStatus == "PENDING_DELETE" {
			continue
		}
		if err := octavia.Delete(ctx, lbc, prov, lb, deletes); err != nil {
			return false, err
		}
	}
	if len(lbs) > 0 {
		return false, nil
	}
	return true, nm.DropVIPPorts(ctx, owner)
}
