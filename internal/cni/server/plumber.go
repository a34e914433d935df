package server

import (
	"context"

	"github.com/raven-net/raven/internal/cni/plug"
)

// Plumber is the namespace work; the server's seam for tests.
type Plumber interface {
	Setup(ctx context.Context, spec plug.Spec) (plug.Result, error)
	Teardown(ctx context.Context, netns, ifName, hostIfName string) error
	Inspect(ctx context.Context, netns, ifName string) (plug.Observed, error)
}

// Netlink is the Plumber of package plug.
type Netlink struct{}

var _ Plumber = Netlink{}

// Setup implements Plumber.
func (Netlink) Setup(_ context.Context, spec plug.Spec) (plug.Result, error) { return plug.Setup(spec) }

// Teardown implements Plumber.
func (Netlink) Teardown(_ context.Context, netns, ifName, hostIfName string) error {
	return plug.Teardown(netns, ifName, hostIfName)
}

// Inspect implements Plumber.
func (Netlink) Inspect(_ context.Context, netns, ifName string) (plug.Observed, error) {
	return plug.Inspect(netns, ifName)
}
