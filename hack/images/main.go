// Command images builds Raven's container images and serves them from a registry of its own, so that a
// cluster of real kubelets and containerd runs our pods without a Docker engine on the build machine and
// without the Internet on the nodes.
//
//	images build --bin DIR --out DIR --version V
//	images serve --addr 127.0.0.1:PORT --dir DIR
//
// build writes one image tarball per image into --out (the `docker save` layout that go-containerregistry
// reads and writes, every tag of the image in one file) from static binaries in --bin, and lists the
// images' digests in --out/images.txt:
//
//	ghcr.io/raven-net/raven:V           /raven, as user 65532
//	ghcr.io/raven-net/raven-node:V      raven-node, raven-cni, and the host's ovs-vsctl, ovs-appctl and
//	                                    ovsdb-client with every shared library they load
//	ghcr.io/raven-net/testserver:V      the test workload (hack/testserver), also tagged
//	                                    docker.io/library/nginx:latest so that `kubectl run --image=nginx` works
//	registry.k8s.io/pause:3.10.1        the same binary as the pod sandbox's pause process
//
// An image is one layer made in memory with fixed times and owners, so that the same binaries give the
// same digests and a rebuild that changed nothing pulls nothing.
//
// serve is that cluster's mirror: an in-memory registry on plain HTTP that holds every image of --dir, each
// under its repository path without the registry host (registry.k8s.io/pause:3.10.1 is served as
// pause:3.10.1), because containerd, told to use one mirror for every registry name, asks it for
// /v2/<repository>/manifests/<tag>?ns=<registry host>. It prints "ready" once every image is in; -v=2
// logs each request.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

const usage = `Usage:
  images build --bin DIR --out DIR --version V   build the image tarballs
  images serve --addr 127.0.0.1:PORT --dir DIR   serve the image tarballs of DIR as a registry
Run "images build -h" or "images serve -h" for the flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	ctx = klog.NewContext(ctx, klog.NewKlogr())

	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = runBuild(ctx, args)
	case "serve":
		err = runServe(ctx, args)
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "images failed", "command", os.Args[1])
		klog.Flush()
		cancel()
		os.Exit(1)
	}
	klog.Flush()
}
