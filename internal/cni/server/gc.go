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

// gc removes every interface Raven plugged for the request's network whose (sandbox, ifname) is not among
// the valid attachments. The runtime lists the attachments of that network only: an interface of another
// network (raven-cni serving two, under Multus), or of no recorded network (plugged before raven-node
// recorded it), is never touched.
func (s *Server) gc(ctx context.Context, conf *wire.NetConf) error {
	if conf.Name == "" {
		return newError(types.ErrInvalidNetworkConfig,
			"GC: the network configuration has no \"name\", so raven-node cannot tell this network's attachments "+
				"from another network's; nothing was removed. Give the conflist a name")
	}
	if s.kernelVLAN() {
		// Each attachment is a VLAN link inside its sandbox's namespace, which goes with the namespace; the host
		// holds nothing of it to collect (raven-node's start sweeps the links an ADD killed halfway left).
		klog.FromContext(ctx).V(1).Info("GC done: on the kernel-VLAN path nothing of a pod is outside its namespace", "network", conf.Name)
		return nil
	}
	valid := map[types.GCAttachment]bool{}
	for _, a := range conf.ValidAttachments {
		valid[a] = true
	}
	ifaces, err := s.cfg.OVS.Interfaces(ctx)
	if err != nil {
		return fmt.Errorf("GC of network %s: %w", conf.Name, err)
	}
	var errs []error
	removed := 0
	for _, iface := range ifaces {
		ids := iface.ExternalIDs
		sandbox := ids[ovs.KeySandbox]
		if sandbox == "" || ids[ovs.KeyNetwork] != conf.Name || valid[types.GCAttachment{ContainerID: sandbox, IfName: ids[ovs.KeyIfName]}] {
			continue
		}
		owner := map[string]string{ovs.KeySandbox: sandbox, ovs.KeyNetwork: conf.Name}
		if err := s.unplugIfOwned(ctx, iface.Name, owner); err != nil {
			errs = append(errs, fmt.Errorf("GC of network %s: interface %s (sandbox %s): %w", conf.Name, iface.Name, sandbox, err))
			continue
		}
		removed++
	}
	klog.FromContext(ctx).V(1).Info("GC done", "network", conf.Name, "valid", len(valid), "removed", removed)
	return errors.Join(errs...)
}
