package server

import (
	"context"

	"github.com/containernetworking/cni/pkg/types"
)

// status answers STATUS, which fails only when an ADD cannot be served: Config.Health (raven-node's: the OVS
// database and its bridge, or the VLAN uplink), else OVS.Health. raven-node not answering at all is raven-cni's
// own STATUS failure (code 50).
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
