package server

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/wire"
)

// del unplugs what this sandbox plugged: the interface carrying its raven-sandbox, and the pod end in its
// namespace. It reads nothing but OVS and the namespace, so it never waits on the controller, and it is
// idempotent. An interface another sandbox has taken over (a newer sandbox of the same pod) is left alone.
func (s *Server) del(ctx context.Context, req wire.Request) error {
	if s.kernelVLAN() {
		return s.delVLAN(ctx, req)
	}
	return s.delBridge(ctx, req)
}

// delBridge is DEL of an interface on the bridge.
func (s *Server) delBridge(ctx context.Context, req wire.Request) error {
	logger := klog.FromContext(ctx)
	ifaces, err := s.cfg.OVS.Interfaces(ctx)
	if err != nil {
		return fmt.Errorf("DEL of sandbox %s: %w", req.ContainerID, err)
	}
	netnsTaken := false
	found := false
	for _, iface := range ifaces {
		ids := iface.ExternalIDs
		if ids[ovs.KeySandbox] != req.ContainerID {
			if req.Netns != "" && ids[ovs.KeyNetns] == req.Netns && ids[ovs.KeySandbox] != "" {
				netnsTaken = true
			}
			continue
		}
		if ifn := ids[ovs.KeyIfName]; ifn != "" && req.IfName != "" && ifn != req.IfName {
			continue
		}
		found = true
		if err := s.unplugIfOwned(ctx, iface.Name, map[string]string{ovs.KeySandbox: req.ContainerID}); err != nil {
			return fmt.Errorf("DEL of sandbox %s: %w", req.ContainerID, err)
		}
	}
	if !found {
		logger.V(2).Info("No interface of this sandbox on the bridge: already removed, or taken over by a newer sandbox")
	}
	if req.Netns == "" || netnsTaken {
		return nil
	}
	if err := s.cfg.Plumber.Teardown(ctx, req.Netns, req.IfName, ""); err != nil {
		return fmt.Errorf("DEL of sandbox %s: %w", req.ContainerID, err)
	}
	return nil
}

// unplugIfOwned removes the interface and its veth, under its lock, if it still carries the owner's external_ids
// (its sandbox; for GC, its network too).
func (s *Server) unplugIfOwned(ctx context.Context, name string, owner map[string]string) error {
	unlock := s.locks.lock(name)
	defer unlock()
	iface, ok, err := s.cfg.OVS.Interface(ctx, name)
	if err != nil {
		return err
	}
	if !ok || !iface.Carries(owner) {
		return nil
	}
	if err := s.cfg.OVS.DelPort(ctx, name); err != nil {
		return err
	}
	if err := s.cfg.Plumber.Teardown(ctx, "", "", name); err != nil {
		return err
	}
	klog.FromContext(ctx).V(1).Info("Pod unplugged", "interface", name, "port", iface.ExternalIDs[ovs.KeyIfaceID],
		"owner", iface.ExternalIDs[ovs.KeyPod])
	return nil
}

// delVLAN is DEL on the kernel-VLAN path: the sandbox's VLAN link is in its namespace and nowhere else, so DEL
// deletes it there, which frees its VLAN on the uplink at once rather than when the runtime removes the
// namespace. A namespace already gone took the link with it.
func (s *Server) delVLAN(ctx context.Context, req wire.Request) error {
	if req.Netns == "" {
		klog.FromContext(ctx).V(2).Info("No network namespace in the DEL: the sandbox's VLAN link went with it")
		return nil
	}
	if err := s.cfg.Plumber.Teardown(ctx, req.Netns, req.IfName, ""); err != nil {
		return fmt.Errorf("DEL of sandbox %s: %w", req.ContainerID, err)
	}
	klog.FromContext(ctx).V(1).Info("The sandbox's VLAN link is gone", "netns", req.Netns, "uplink", s.cfg.VLANUplink)
	return nil
}
