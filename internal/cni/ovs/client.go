package ovs

import (
	"context"
	"errors"
)

// External IDs of an Interface: the first four are what ovn-controller reads, the raven-* ones are how
// raven-node finds its own interfaces again after a restart (its only state), and KeyPlug tells one plug's
// row from every other row of the name.
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
	// KeyNetwork is the name of the CNI network the interface was plugged for (its configuration's "name"):
	// GC of one network never touches another's.
	KeyNetwork = "raven-network"
	// KeyPlug is a value of each plug's own, written with the others, so that WaitInstalled waits for
	// ovn-installed on that plug's row and not on a former row of the same name.
	KeyPlug = "raven-plug"
)

// Interface is one OVS Interface with its external_ids.
type Interface struct {
	Name        string
	ExternalIDs map[string]string
}

// Installed tells whether ovn-controller has put the interface's flows in.
func (i Interface) Installed() bool { return i.ExternalIDs[KeyOVNInstalled] == "true" }

// Carries tells whether the interface has every one of these external_ids, each with its value.
func (i Interface) Carries(ids map[string]string) bool {
	for k, v := range ids {
		if got, ok := i.ExternalIDs[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ErrNotInstalled is returned by WaitInstalled when its context ends first.
var ErrNotInstalled = errors.New("ovn-installed not set")

// Client is everything raven-node does with OVS, on one bridge.
type Client interface {
	// AddPort adds the named port to the bridge with these external_ids, replacing a port of that name
	// (its Interface row is new: it carries nothing of a former plug). A tag above 0 makes it an access port
	// of that VLAN (a nested pod's, on the node VM's own bridge).
	AddPort(ctx context.Context, name string, tag int, externalIDs map[string]string) error
	// DelPort removes the port from the bridge; a port that is not there is fine.
	DelPort(ctx context.Context, name string) error
	// SetExternalIDs sets these external_ids on the named interface's row and removes the keys of unset, in
	// one transaction; an interface that is not there is an error.
	SetExternalIDs(ctx context.Context, name string, set map[string]string, unset ...string) error
	// Interface returns the named interface; ok is false when it does not exist.
	Interface(ctx context.Context, name string) (iface Interface, ok bool, err error)
	// Interfaces returns every interface of the bridge.
	Interfaces(ctx context.Context) ([]Interface, error)
	// WaitInstalled returns when external_ids:ovn-installed="true" is on the named interface's row and that
	// row carries every one of plugged's external_ids, or an error wrapping ErrNotInstalled when ctx ends
	// first. Given the external_ids of an AddPort, KeyPlug among them, that is the row AddPort wrote: the
	// ovn-installed of a former row of the name never ends the wait. Nil plugged takes any row.
	WaitInstalled(ctx context.Context, name string, plugged map[string]string) error
	// Health returns an error saying what an ADD needs of Open vSwitch and does not have: the database, or the
	// bridge in it.
	Health(ctx context.Context) error
}
