// Command raven keeps OpenStack Neutron and Octavia in step with Kubernetes: namespaces become
// networks, pods become ports, services become load balancers.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/manager"
)

func main() {
	args := os.Args[1:]
	remove := len(args) > 0 && args[0] == "uninstall"
	if remove {
		args = args[1:]
	}
	fs := flag.NewFlagSet("raven", flag.ExitOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: raven [flags]\n       raven uninstall [--dry-run] [--timeout=10m] [flags]\n\n"+
			"Raven makes Neutron and Octavia follow Kubernetes. Configuration comes from a YAML file (--config, see "+
			"docs/operations.md); flags given here override it. `raven uninstall`, once Raven's Deployment is gone, takes "+
			"Raven's finalizers off namespaces and Services and deletes every OpenStack object with the cluster's tag.\n\n")
		fs.PrintDefaults()
	}
	flags := config.BindFlags(fs)
	dryRun := fs.Bool("dry-run", false, "uninstall: count what would be removed, remove nothing")
	timeout := fs.Duration("timeout", 10*time.Minute, "uninstall: how long the OpenStack objects may take to go")
	klog.InitFlags(fs)
	_ = fs.Parse(args)

	logger := klog.NewKlogr()
	ctrl.SetLogger(logger)
	opts, err := flags.Options()
	if err != nil {
		logger.Error(err, "Invalid configuration")
		os.Exit(2)
	}
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), logger)
	if remove {
		if err := manager.Uninstall(ctx, opts, *dryRun, *timeout); err != nil {
			logger.Error(err, "Uninstall incomplete")
			klog.Flush()
			os.Exit(1)
		}
		klog.Flush()
		return
	}
	manager.TuneGC()
	if err := manager.Run(ctx, opts); err != nil {
		logger.Error(err, "Raven stopped")
		klog.Flush()
		os.Exit(1)
	}
	logger.Info("Raven stopped")
	klog.Flush()
}
