package server

import (
	"context"

	"github.com/containernetworking/cni/pkg/types"
)

// status answers STATUS: ready when OVS (and, if configured, ovs-vswitchd and ovn-controller) answers.
func (s *Server) status(ctx context.Context) error {
	if err := s.cfg.OVS.Health(ctx); err != nil {
		return newError(types.ErrPluginNotAvailable, "raven-node on %s cannot plug pods: %w", s.cfg.Node, err)
	}
	return nil
}
