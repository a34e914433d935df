package server

import (
	"context"
	"net"

	"github.com/raven-net/raven/internal/cni/plug"
)

// Plumber is the namespace work; the server's seam for tests.
type Plumber interface {
	Setup(ctx context.Context, spec plug.Spec) (plug.Result, error)
	Teardown(ctx context.Context, netns, ifName, hostIfName string) error
	Inspect(ctx context.Context, netns, ifName string) (plug.Observed, error)
	// Readdress gives the pod end of a plugged pair spec's MAC, address and routes (a running pod's new port).
	Readdress(ctx context.Context, spec plug.Spec) error
	// WaitGateway returns once gw answers ARP on the pod's interface, or an error when ctx ends first.
	WaitGateway(ctx context.Context, spec plug.Spec, gw net.IP) error
}

// Netlink is the Plumber of package plug.
type Netlink struct {
	// DatapathNetns is the path of the network namespace where the node's Open vSwitch runs, which gets the
	// host ends; empty means raven-node's own (the usual case: OVS in the host's namespace).
	DatapathNetns string
}

var _ Plumber = Netlink{}

// Setup implements Plumber.
func (n Netlink) Setup(_ context.Context, spec plug.Spec) (plug.Result, error) {
	spec.HostNetns = n.DatapathNetns
	return plug.Setup(spec)
}

// Teardown implements Plumber.
func (n Netlink) Teardown(_ context.Context, netns, ifName, hostIfName string) error {
	return plug.Teardown(n.DatapathNetns, netns, ifName, hostIfName)
}

// Inspect implements Plumber.
func (Netlink) Inspect(_ context.Context, netns, ifName string) (plug.Observed, error) {
	return plug.Inspect(netns, ifName)
}

// Readdress implements Plumber.
func (Netlink) Readdress(_ context.Context, spec plug.Spec) error {
	return plug.Readdress(spec)
}

// WaitGateway implements Plumber.
func (Netlink) WaitGateway(ctx context.Context, spec plug.Spec, gw net.IP) error {
	return plug.WaitNeighbour(ctx, spec.Netns, spec.IfName, gw)
}
