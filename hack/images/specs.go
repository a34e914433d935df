package main

import (
	"context"
	"fmt"
	"path/filepath"
)

// imageSpec is one image: its tarball, its tags, what its layer holds and how it starts.
type imageSpec struct {
	// file is the tarball's name in --out.
	file       string
	refs       []string
	entrypoint []string
	// user is empty for root.
	user  string
	files func(ctx context.Context, binDir string) (fileset, error)
}

// pauseRef is the pod sandbox image, the name containerd's sandbox image setting gives.
const pauseRef = "registry.k8s.io/pause:3.10.1"

// ovsTools are the Open vSwitch clients raven-node runs (internal/cni/ovs).
var ovsTools = []string{"ovs-vsctl", "ovs-appctl", "ovsdb-client"}

// imageSpecs are Raven's images at version; the nginx and pause tags are the names clusters and tests
// ask for, served by our testserver instead.
func imageSpecs(version, ovsRoot string) []imageSpec {
	const repo = "ghcr.io/raven-net/"
	return []imageSpec{
		{
			file: "raven.tar", refs: []string{repo + "raven:" + version},
			entrypoint: []string{"/raven"},
			// The controller needs no privilege: nonroot, as in distroless images.
			user:  "65532:65532",
			files: binaries(map[string]string{"raven": "/raven"}),
		},
		{
			file: "raven-node.tar", refs: []string{repo + "raven-node:" + version},
			entrypoint: []string{"/usr/local/bin/raven-node"},
			files:      nodeFiles(ovsRoot),
		},
		{
			file: "testserver.tar", refs: []string{repo + "testserver:" + version, "docker.io/library/nginx:latest"},
			entrypoint: []string{"/testserver"},
			files:      binaries(map[string]string{"testserver": "/testserver"}),
		},
		{
			file: "pause.tar", refs: []string{pauseRef},
			entrypoint: []string{"/testserver", "--pause"},
			files:      binaries(map[string]string{"testserver": "/testserver"}),
		},
	}
}

// binaries puts static binaries of binDir (by name) at their paths in the image, mode 0755.
func binaries(at map[string]string) func(context.Context, string) (fileset, error) {
	return func(_ context.Context, binDir string) (fileset, error) {
		fs := fileset{}
		for name, p := range at {
			data, err := staticBinary(filepath.Join(binDir, name))
			if err != nil {
				return nil, err
			}
			if err := fs.addFile(p, 0o755, data); err != nil {
				return nil, err
			}
		}
		return fs, nil
	}
}

// nodeFiles are raven-node and raven-cni, and the Open vSwitch clients of the root file system ovsRoot ("/": this
// machine's) at their paths there with their libraries: an image built without a Docker engine has no base image
// and no package manager to install them with, and that root's packages are the ones its nodes run.
func nodeFiles(ovsRoot string) func(context.Context, string) (fileset, error) {
	return func(ctx context.Context, binDir string) (fileset, error) {
		fs, err := binaries(map[string]string{
			"raven-node": "/usr/local/bin/raven-node",
			"raven-cni":  "/usr/local/bin/raven-cni",
		})(ctx, binDir)
		if err != nil {
			return nil, err
		}
		host := hostFiles{root: ovsRoot, files: fs}
		for _, tool := range ovsTools {
			p, err := host.lookPath(tool)
			if err != nil {
				return nil, fmt.Errorf("%s is needed in %s for the raven-node image (Debian: openvswitch-common, openvswitch-switch): %w", tool, ovsRoot, err)
			}
			if err := host.addWithLibs(ctx, p); err != nil {
				return nil, err
			}
		}
		return fs, nil
	}
}
