// Command raven-node is Raven's per-node daemon: it answers raven-cni over a root-only unix socket and
// plugs each pod's Neutron port into the pod's network namespace on the node's OVN integration bridge (on a
// nested node, on the VM's bridge, or as a kernel VLAN link on the VM's NIC with --vlan-uplink).
// See docs/operations.md, "The node side".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/daemon"
)

func main() {
	fs := flag.NewFlagSet("raven-node", flag.ExitOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: raven-node [flags]\n\nraven-node plugs pods' Neutron ports into OVS for raven-cni (on a nested node with --vlan-uplink, as kernel VLAN links).\n\n")
		fs.PrintDefaults()
	}
	opts := daemon.BindFlags(fs)
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])

	logger := klog.NewKlogr()
	if err := opts.Validate(); err != nil {
		logger.Error(err, "Invalid flags")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	ctx = klog.NewContext(ctx, logger)
	if err := daemon.Run(ctx, opts); err != nil {
		logger.Error(err, "raven-node stopped")
		klog.Flush()
		cancel()
		os.Exit(1)
	}
	logger.Info("raven-node stopped")
	klog.Flush()
}
