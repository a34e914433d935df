package server

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/wire"
)

// check verifies the pod end (MAC, MTU, address) against the annotation and the OVS port against the port; on
// the kernel-VLAN path, the pod's VLAN link (MAC, MTU, address, VLAN ID) against the annotation.
func (s *Server) check(ctx context.Context, req wire.Request) error {
	pod, err := wire.ParsePod(req.Args)
	if err != nil {
		return newError(types.ErrInvalidEnvironmentVariables, "CHECK: %w", err)
	}
	cached, err := s.cfg.Pods.Get(pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	t, waitingFor, err := evaluate(cached, pod, s.cfg.Node)
	if err != nil {
		return newError(types.ErrInternal, "CHECK of pod %s: %w", pod, err)
	}
	if waitingFor != "" {
		return newError(types.ErrInternal, "CHECK of pod %s: no port to check against: waiting for %s", pod, waitingFor)
	}
	want, err := buildSpec(t, req.Netns, req.IfName)
	if err != nil {
		return newError(types.ErrInvalidNetworkConfig, "CHECK of pod %s: %w", pod, err)
	}
	if !s.kernelVLAN() {
		// On the kernel-VLAN path the pod's interface is all there is; its VLAN is checked below.
		if err := s.checkBridge(ctx, req, pod, t, want.HostIfName); err != nil {
			return err
		}
	}
	got, err := s.cfg.Plumber.Inspect(ctx, req.Netns, req.IfName)
	if err != nil {
		return newError(types.ErrInternal, "CHECK of pod %s: %w", pod, err)
	}
	if s.kernelVLAN() && t.port.Nested != nil {
		want.VLAN = t.port.Nested.VLAN
	}
	if problems := differences(got, want); len(problems) > 0 {
		return newError(types.ErrInternal, "CHECK of pod %s: %s in sandbox %s: %v", pod, req.IfName, req.ContainerID, problems)
	}
	return nil
}

// differences says how the pod's interface differs from want: its MAC, MTU, address, and its VLAN when want
// has one (a VLAN link's).
func differences(got plug.Observed, want plug.Spec) []string {
	var problems []string
	if want.VLAN != 0 && got.VLAN != want.VLAN {
		problems = append(problems, fmt.Sprintf("VLAN %d, want %d", got.VLAN, want.VLAN))
	}
	if got.MAC.String() != want.MAC.String() {
		problems = append(problems, fmt.Sprintf("MAC %s, want %s", got.MAC, want.MAC))
	}
	if got.MTU != want.MTU {
		problems = append(problems, fmt.Sprintf("MTU %d, want %d", got.MTU, want.MTU))
	}
	if !slices.ContainsFunc(got.Addrs, func(a *net.IPNet) bool { return a.String() == want.Address.String() }) {
		problems = append(problems, fmt.Sprintf("addresses %v, want %s", got.Addrs, want.Address))
	}
	return problems
}

// checkBridge compares the bridge's interface of the sandbox with the port and the sandbox.
func (s *Server) checkBridge(ctx context.Context, req wire.Request, pod wire.Pod, t target, hostIfName string) error {
	iface, ok, err := s.sandboxInterface(ctx, hostIfName, req)
	switch {
	case err != nil:
		return fmt.Errorf("CHECK of pod %s: %w", pod, err)
	case !ok:
		return newError(types.ErrInternal, "CHECK of pod %s: OVS has no interface %s for port %s", pod, hostIfName, t.port.ID)
	case iface.ExternalIDs[ovs.KeyIfaceID] != t.port.ID:
		return newError(types.ErrInternal, "CHECK of pod %s: interface %s has iface-id %q, want port %s",
			pod, iface.Name, iface.ExternalIDs[ovs.KeyIfaceID], t.port.ID)
	case iface.ExternalIDs[ovs.KeySandbox] != req.ContainerID:
		return newError(types.ErrInternal, "CHECK of pod %s: interface %s belongs to sandbox %q, not %s",
			pod, iface.Name, iface.ExternalIDs[ovs.KeySandbox], req.ContainerID)
	}
	return nil
}

// sandboxInterface finds the interface of the sandbox: by the name of the port's, or, for a pod whose port
// changed while it ran (Follow points the interface at the new port, and it keeps the name of the port it
// was plugged for), by its raven-sandbox and raven-ifname.
func (s *Server) sandboxInterface(ctx context.Context, name string, req wire.Request) (ovs.Interface, bool, error) {
	iface, ok, err := s.cfg.OVS.Interface(ctx, name)
	if err != nil || ok {
		return iface, ok, err
	}
	ifaces, err := s.cfg.OVS.Interfaces(ctx)
	if err != nil {
		return ovs.Interface{}, false, err
	}
	for _, i := range ifaces {
		if i.ExternalIDs[ovs.KeySandbox] == req.ContainerID && i.ExternalIDs[ovs.KeyIfName] == req.IfName {
			return i, true, nil
		}
	}
	return ovs.Interface{}, false, nil
}
