// Command floor-cni is the node benchmark's floor: a minimal CNI plugin that plugs a Neutron port created and
// bound to the node in advance, and nothing else. It does what raven-node does for a pod whose port is
// already there (the veth into the pod's namespace with the port's MAC and address, the host end on the
// integration bridge with the port's iface-id, then the wait for ovn-controller's ovn-installed; for a nested
// node's subport, an access port of its VLAN on the VM's bridge, then the wait for the gateway's ARP answer), in the
// plugin's own process, without Raven, raven-node or any Kubernetes call. The ports come from a JSON file
// the benchmark writes before the pods exist ("ports" in the conflist), keyed by namespace/name.
package main

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	skel.PluginMainFuncs(funcs(ctx, nil), version.All, "floor-cni: plugs ports bound in advance (the node benchmark's floor)")
}
