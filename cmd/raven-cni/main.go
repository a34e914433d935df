// Command raven-cni is Raven's CNI plugin. The runtime runs it from the CNI bin directory with the conflist
// raven-node installs; it forwards each verb to raven-node over the node's unix socket ("socket" in the
// conflist, default /run/raven/cni.sock). It has no flags.
package main

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/raven-net/raven/internal/cni/plugin"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	plugin.Main(ctx)
}
