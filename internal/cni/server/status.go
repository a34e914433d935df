package server

import (
	"context"

	"github.com/containernetworking/cni/pkg/types"
)

// status answers STATUS: ready when OVS (and, if configured, ovs-vswitchd and ovn-controller) answers, or what
// Config.Health checks instead (the uplink, on the kernel-VLAN path).
func (s *Server) status(ctx context.Context) error {
	health := s.cfg.Health
	if health == nil {
		health = s.cfg.OVS.Health
	}
	if err := health(ctx); err != nil {
		return newError(types.ErrPluginNotAvailable, "raven-node on %s cannot plug pods: %w", s.cfg.Node, err)
	}
	return nil
}
