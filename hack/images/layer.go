package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// file is one entry of an image's file system: a regular file, or a symlink when link is set.
type file struct {
	mode int64
	data []byte
	link string
}

// fileset is an image's file system by absolute path ("/usr/bin/x"). Directories are implied by the
// files under them.
type fileset map[string]file

func (fs fileset) addFile(p string, mode int64, data []byte) error {
	return fs.add(p, file{mode: mode, data: data})
}

func (fs fileset) addSymlink(p, target string) error {
	return fs.add(p, file{mode: 0o777, link: target})
}

// add refuses a path given twice with different contents: two sources for one path is a bug of the
// image's definition, and the last one winning would hide it.
func (fs fileset) add(p string, f file) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("%q is not a clean absolute file path", p)
	}
	if old, ok := fs[p]; ok && (old.mode != f.mode || old.link != f.link || !bytes.Equal(old.data, f.data)) {
		return fmt.Errorf("%s is added twice with different contents", p)
	}
	fs[p] = f
	return nil
}

// epoch is every entry's time: a build's time in the layer would change its digest at every build.
var epoch = time.Unix(0, 0)

// tar writes the fileset as a layer: every directory, then sorted paths, owner 0:0, time 0, so that the
// same files always give the same bytes.
func (fs fileset) tar() ([]byte, error) {
	dirs := map[string]bool{}
	for p := range fs {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := fs[d]; ok {
				return nil, fmt.Errorf("%s is under %s, which is a file or a symlink in the image", p, d)
			}
			dirs[d] = true
		}
	}
	names := make([]string, 0, len(fs)+len(dirs))
	for p := range fs {
		names = append(names, p)
	}
	for d := range dirs {
		names = append(names, d)
	}
	// Sorting the full paths puts each directory before what it holds: "/a" < "/a-b" < "/a/b".
	slices.Sort(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		if err := writeEntry(tw, p, fs[p], dirs[p]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeEntry(tw *tar.Writer, p string, f file, dir bool) error {
	hdr := &tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: epoch}
	switch {
	case dir:
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
	case f.link != "":
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.link, f.mode
	default:
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, f.mode, int64(len(f.data))
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing %s into the layer: %w", p, err)
	}
	_, err := tw.Write(f.data)
	return err
}

// layer is the fileset as a gzipped layer, compressed once (the digest and the write share it).
func (fs fileset) layer() (v1.Layer, error) {
	b, err := fs.tar()
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithCompressedCaching)
}
