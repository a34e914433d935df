package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/klog/v2"
)

// defaultPath is the images' PATH, the usual one of Debian's root.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func runBuild(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	binDir := fs.String("bin", "", "directory of the static binaries raven, raven-node, raven-cni and testserver")
	outDir := fs.String("out", "", "directory to write the image tarballs and images.txt into")
	version := fs.String("version", "", "tag of Raven's images (not latest)")
	ovsRoot := fs.String("ovs-root", "/", "root file system whose Open vSwitch clients, with their libraries, go into the raven-node image: the one the nodes' Open vSwitch comes from")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *binDir == "" || *outDir == "" {
		return errors.New("--bin and --out are required")
	}
	if err := checkVersion(*version); err != nil {
		return err
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	var list strings.Builder
	for _, spec := range imageSpecs(*version, *ovsRoot) {
		line, err := buildOne(ctx, spec, *binDir, *outDir)
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.refs[0], err)
		}
		list.WriteString(line)
	}
	return os.WriteFile(filepath.Join(*outDir, "images.txt"), []byte(list.String()), 0o644)
}

// checkVersion refuses what would make our tags mean nothing: latest (a node with the image cached
// never pulls a new one), and what a tag cannot hold.
func checkVersion(v string) error {
	if v == "" || v == "latest" {
		return fmt.Errorf("--version %q: give a version, not latest", v)
	}
	if _, err := name.NewTag("ghcr.io/raven-net/raven:" + v); err != nil {
		return fmt.Errorf("--version %q: %w", v, err)
	}
	return nil
}

// buildOne writes spec's tarball, prints "refs digest size" and returns its images.txt lines.
func buildOne(ctx context.Context, spec imageSpec, binDir, outDir string) (string, error) {
	files, err := spec.files(ctx, binDir)
	if err != nil {
		return "", err
	}
	img, err := buildImage(files, spec)
	if err != nil {
		return "", err
	}
	refs := map[name.Reference]v1.Image{}
	for _, r := range spec.refs {
		ref, err := name.NewTag(r)
		if err != nil {
			return "", err
		}
		refs[ref] = img
	}
	out := filepath.Join(outDir, spec.file)
	if err := tarball.MultiRefWriteToFile(out, refs); err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(out)
	if err != nil {
		return "", err
	}
	fmt.Printf("%s %s %s\n", strings.Join(spec.refs, ","), digest, humanSize(fi.Size()))
	klog.FromContext(ctx).V(1).Info("Built image", "refs", spec.refs, "digest", digest.String(), "file", out, "bytes", fi.Size())
	var lines strings.Builder
	for _, r := range spec.refs {
		fmt.Fprintf(&lines, "%s %s\n", r, digest)
	}
	return lines.String(), nil
}

// buildImage is files as the one layer of an image started by spec's entrypoint.
func buildImage(files fileset, spec imageSpec) (v1.Image, error) {
	layer, err := files.layer()
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = spec.entrypoint
	cf.Config.Env = []string{defaultPath}
	cf.Config.WorkingDir = "/"
	cf.Config.User = spec.user
	return mutate.ConfigFile(img, cf)
}

func humanSize(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
}
