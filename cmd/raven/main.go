// Command raven keeps OpenStack Neutron and Octavia in step with Kubernetes: namespaces become
// networks, pods become ports, services become load balancers.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/manager"
)

func main() {
	fs := flag.NewFlagSet("raven", flag.ExitOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: raven [flags]\n\nRaven makes Neutron and Octavia follow Kubernetes. "+
			"Configuration comes from a YAML file (--config, see docs/operations.md); flags given here override it.\n\n")
		fs.PrintDefaults()
	}
	flags := config.BindFlags(fs)
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])

	logger := klog.NewKlogr()
	ctrl.SetLogger(logger)
	opts, err := flags.Options()
	if err != nil {
		logger.Error(err, "Invalid configuration")
		os.Exit(2)
	}
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), logger)
	if err := manager.Run(ctx, opts); err != nil {
		logger.Error(err, "Raven stopped")
		klog.Flush()
		os.Exit(1)
	}
	logger.Info("Raven stopped")
	klog.Flush()
}
