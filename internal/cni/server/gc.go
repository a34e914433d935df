package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/wire"
)

// gc removes every interface Raven plugged whose (sandbox, ifname) is not among the valid attachments.
func (s *Server) gc(ctx context.Context, conf *wire.NetConf) error {
	valid := map[types.GCAttachment]bool{}
	for _, a := range conf.ValidAttachments {
		valid[a] = true
	}
	ifaces, err := s.cfg.OVS.Interfaces(ctx)
	if err != nil {
		return fmt.Errorf("GC: %w", err)
	}
	var errs []error
	removed := 0
	for _, iface := range ifaces {
		ids := iface.ExternalIDs
		sandbox := ids[ovs.KeySandbox]
		if sandbox == "" || valid[types.GCAttachment{ContainerID: sandbox, IfName: ids[ovs.KeyIfName]}] {
			continue
		}
		if err := s.unplugIfOwned(ctx, iface.Name, sandbox); err != nil {
			errs = append(errs, fmt.Errorf("GC of interface %s (sandbox %s): %w", iface.Name, sandbox, err))
			continue
		}
		removed++
	}
	klog.FromContext(ctx).V(1).Info("GC done", "valid", len(valid), "removed", removed)
	return errors.Join(errs...)
}
