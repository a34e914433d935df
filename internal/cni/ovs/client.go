package ovs

import (
	"context"
	"errors"
)

// External IDs of an Interface: the first four are what ovn-controller reads, the raven-* ones are how
// raven-node finds its own interfaces again after a restart (its only state).
const (
	KeyIfaceID      = "iface-id"
	KeyAttachedMAC  = "attached-mac"
	KeyIfaceStatus  = "iface-status"
	KeyIfaceIDVer   = "iface-id-ver"
	KeyOVNInstalled = "ovn-installed"
	KeySandbox      = "raven-sandbox"
	KeyIfName       = "raven-ifname"
	KeyNetns        = "raven-netns"
	KeyPod          = "raven-pod"
)

// Interface is one OVS Interface with its external_ids.
type Interface struct {
	Name        string
	ExternalIDs map[string]string
}

// Installed tells whether ovn-controller has put the interface's flows in.
func (i Interface) Installed() bool { return i.ExternalIDs[KeyOVNInstalled] == "true" }

// ErrNotInstalled is returned by WaitInstalled when its context ends first.
var ErrNotInstalled = errors.New("ovn-installed not set")

// Client is everything raven-node does with OVS, on one bridge.
type Client interface {
	// AddPort adds the named port to the bridge with these external_ids, replacing a port of that name
	// (its Interface row is new: it carries nothing of a former plug).
	AddPort(ctx context.Context, name string, externalIDs map[string]string) error
	// DelPort removes the port from the bridge; a port that is not there is fine.
	DelPort(ctx context.Context, name string) error
	// Interface returns the named interface; ok is false when it does not exist.
	Interface(ctx context.Context, name string) (iface Interface, ok bool, err error)
	// Interfaces returns every interface of the bridge.
	Interfaces(ctx context.Context) ([]Interface, error)
	// WaitInstalled returns when external_ids:ovn-installed="true" is on the interface, or an error
	// wrapping ErrNotInstalled when ctx ends first.
	WaitInstalled(ctx context.Context, name string) error
	// Health returns an error saying what does not answer: ovsdb-server, the bridge, ovs-vswitchd or
	// ovn-controller.
	Health(ctx context.Context) error
}
