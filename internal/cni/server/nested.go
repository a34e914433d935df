package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/wire"
)

// maxVLAN is the highest 802.1Q VLAN ID.
const maxVLAN = 4094

// vlan is the VLAN a port is plugged on: its subport's segmentation ID on a nested node, 0 on a chassis. A
// subport on a node whose raven-node is not nested, a chassis port on a nested node and an ID out of range
// are errors a person must act on.
func (s *Server) vlan(t target) (int, error) {
	n := t.port.Nested
	switch {
	case n == nil && s.cfg.Nested:
		return 0, fmt.Errorf("raven-node runs with --nested, but the port is bound to node %s as on an OVN chassis: is the node matched by Raven's nested.nodeSelector?", t.port.HostID)
	case n == nil:
		return 0, nil
	case !s.cfg.Nested:
		return 0, fmt.Errorf("the port is a subport of trunk %s (VLAN %d) for a nested node, but raven-node on node %s was not started with --nested", n.TrunkID, n.VLAN, s.cfg.Node)
	case n.VLAN < 1 || n.VLAN > maxVLAN:
		return 0, fmt.Errorf("the port's VLAN %d is outside 1-%d", n.VLAN, maxVLAN)
	}
	return n.VLAN, nil
}

// nestedReady ends the ADD of a nested pod: inside a VM there is no ovn-controller to say the port is
// installed, so the pod is ready once its gateway (the cluster router's port, which OVN answers for) answers
// ARP from the pod's namespace, through the VM's bridge and the trunk.
func (s *Server) nestedReady(ctx context.Context, req wire.Request, pod wire.Pod, t target, spec plug.Spec, res plug.Result,
	conf *wire.NetConf, waitStart time.Time) (json.RawMessage, error) {
	if len(spec.Routes) == 0 || spec.Routes[0].GW == nil {
		s.undo(ctx, req.ContainerID, spec)
		return nil, s.fail(ctx, pod, ReasonInvalidPort, newError(types.ErrInvalidNetworkConfig, "pod %s, port %s: the subnet has no gateway to check the trunk with", pod, t.port.ID))
	}
	gw := spec.Routes[0].GW
	if err := s.cfg.Plumber.WaitGateway(ctx, spec, gw); err != nil {
		s.undo(ctx, req.ContainerID, spec)
		return nil, s.fail(ctx, pod, ReasonNetworkNotReady, newError(types.ErrTryAgainLater,
			"pod %s, port %s: plugged as %s, but the gateway %s did not answer ARP within %s (%v): is the port a subport of trunk %s, and %s?",
			pod, t.port.ID, s.plugged(spec), gw, s.cfg.ReadyTimeout, err, t.port.Nested.TrunkID, s.carrier(t)))
	}
	klog.FromContext(ctx).Info("Pod plugged", "ip", spec.Address, "mac", spec.MAC, "mtu", spec.MTU, "vlan", t.port.Nested.VLAN,
		"gatewayAnsweredAfter", time.Since(waitStart))
	return BuildResult(spec, res, t.subnet, conf.CNIVersion)
}

// plugged names a nested pod's interface as the ADD made it.
func (s *Server) plugged(spec plug.Spec) string {
	if s.kernelVLAN() {
		return fmt.Sprintf("%s, a VLAN %d link on %s", spec.IfName, spec.VLAN, s.cfg.VLANUplink)
	}
	return fmt.Sprintf("%s on VLAN %d", spec.HostIfName, spec.VLAN)
}

// carrier is what must carry a nested pod's VLAN to the trunk.
func (s *Server) carrier(t target) string {
	if s.kernelVLAN() {
		return fmt.Sprintf("is %s the VM's NIC whose port (%s) is the trunk's parent", s.cfg.VLANUplink, t.port.Nested.ParentPortID)
	}
	return fmt.Sprintf("does the VM's bridge carry VLAN %d to its NIC", t.port.Nested.VLAN)
}
