// Command node-standin plays the node's part on a cluster without kubelets, for tests and demos.
//
// It registers one Node, binds every unscheduled pod to it, and plays the container runtime for the
// pods bound to it: with --cni-conf-dir and --cni-bin-dir it gives each pod a network namespace named
// <namespace>_<pod name> (see `ip netns list`), runs the CNI plugin's ADD through libcni (retried with
// backoff, like a kubelet, until it succeeds), starts a process in the namespace that answers on the
// pod's containerPorts (TCP and UDP as declared) with the pod's name and a newline, and then sets the
// pod's IP from the CNI result and marks it Ready. Without those flags it copies the IP of the pod's port
// annotation instead. A hostNetwork pod gets neither: it is marked Ready with the node's IP, as a kubelet
// runs it in the node's namespace. A pod being deleted gets its DEL, loses its process and namespace, and is finished,
// as a kubelet does when its containers stop. Without it, EndpointSlices stay empty and pods keep
// Terminating forever.
//
// At start it runs CNI GC with the attachments of the pods that still exist and removes the namespaces
// and processes of pods that are gone. Its state directory lists the namespaces it made; it never touches
// others.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/klog/v2"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if len(os.Args) > 1 && os.Args[1] == serveCommand {
		if err := runServe(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "node-standin serve:", err)
			os.Exit(1)
		}
		return
	}

	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	flag.StringVar(&o.node, "node-name", "standin-node", "name of the Node to register and bind pods to")
	flag.IntVar(&o.workers, "workers", 128, "pods handled at once, as a kubelet works on every pod of its node at once (an ADD may wait up to the plugin's timeout)")
	flag.StringVar(&o.cniConfDir, "cni-conf-dir", "", "CNI configuration directory; with --cni-bin-dir, pods are plugged through CNI")
	flag.StringVar(&o.cniBinDir, "cni-bin-dir", "", "CNI plugin directory (a list, separated by ':')")
	flag.StringVar(&o.stateDir, "state-dir", "/run/raven-node-standin", "where the stand-in lists the sandboxes it made")
	flag.BoolVar(&o.bind, "bind-unscheduled", true, "bind pods that name no node to this one (the scheduler's part); "+
		"with several stand-ins, one binds and the others serve the pods created for their node")
	klog.InitFlags(nil)
	flag.Parse()

	if (o.cniConfDir == "") != (o.cniBinDir == "") {
		klog.ErrorS(nil, "--cni-conf-dir and --cni-bin-dir go together")
		os.Exit(2)
	}
	self, err := os.Executable()
	if err != nil {
		klog.ErrorS(err, "finding this binary")
		os.Exit(1)
	}
	o.self = self
	ctx = klog.NewContext(ctx, klog.NewKlogr())
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "node stand-in failed")
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, node      string
	workers               int
	cniConfDir, cniBinDir string
	stateDir              string
	self                  string
	bind                  bool
}

// sandboxes returns nil when CNI is off.
func (o options) sandboxes() *sandboxes {
	if o.cniConfDir == "" {
		return nil
	}
	return &sandboxes{
		store: store{dir: o.stateDir},
		cni:   newCNIRuntime(o.cniConfDir, o.cniBinDir, filepath.Join(o.stateDir, "cni-cache")),
		self:  o.self,
	}
}
