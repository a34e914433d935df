package server

import (
	"context"
	"net"

	"k8s.io/klog/v2"

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
	podEnd
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

// VLAN is the Plumber of the kernel-VLAN path of nested nodes (raven-node --nested --vlan-uplink): a pod's
// interface is an 802.1Q link of its subport's VLAN (spec.VLAN) on the VM's NIC Uplink, moved into the pod's
// namespace. There is no host end and no Open vSwitch; the server's Config.VLANUplink names the same NIC.
type VLAN struct {
	podEnd
	Uplink string
}

var _ Plumber = VLAN{}

// Setup implements Plumber.
func (v VLAN) Setup(_ context.Context, spec plug.Spec) (plug.Result, error) {
	return plug.SetupVLAN(spec, v.Uplink)
}

// Teardown implements Plumber: hostIfName is a link an ADD left in the host before moving it.
func (VLAN) Teardown(_ context.Context, netns, ifName, hostIfName string) error {
	return plug.TeardownVLAN(netns, ifName, hostIfName)
}

// Health says whether the uplink can carry the pods' VLANs (it exists and is up): STATUS's and /healthz's check
// on this path.
func (v VLAN) Health(context.Context) error {
	return plug.CheckUplink(v.Uplink)
}

// Sweep removes the VLAN links an ADD left in the host when raven-node was killed halfway through it; run it
// before serving.
func (v VLAN) Sweep(ctx context.Context) {
	removed, err := plug.SweepVLAN(v.Uplink)
	if len(removed) > 0 {
		klog.FromContext(ctx).Info("Removed the VLAN links a stopped ADD left on the uplink", "uplink", v.Uplink, "links", removed)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Removing the VLAN links a stopped ADD left on the uplink", "uplink", v.Uplink)
	}
}

// podEnd is what both Plumbers do alike, on the pod's interface in its namespace: a veth's pod end or a VLAN
// link are inspected, readdressed and checked for the gateway's ARP answer the same way.
type podEnd struct{}

// Inspect implements Plumber.
func (podEnd) Inspect(_ context.Context, netns, ifName string) (plug.Observed, error) {
	return plug.Inspect(netns, ifName)
}

// Readdress implements Plumber.
func (podEnd) Readdress(_ context.Context, spec plug.Spec) error {
	return plug.Readdress(spec)
}

// WaitGateway implements Plumber.
func (podEnd) WaitGateway(ctx context.Context, spec plug.Spec, gw net.IP) error {
	return plug.WaitNeighbour(ctx, spec.Netns, spec.IfName, gw)
}
