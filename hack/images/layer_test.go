package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

type tarEntry struct {
	name     string
	typeflag byte
	mode     int64
	link     string
	data     string
}

func readTar(t *testing.T, b []byte) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: owner %d:%d (%q:%q), time %v; want 0:0 and the epoch", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{name: h.Name, typeflag: h.Typeflag, mode: h.Mode, link: h.Linkname, data: string(data)})
	}
}

func TestFilesetTar(t *testing.T) {
	fs := fileset{}
	for _, err := range []error{
		fs.addFile("/usr/local/bin/raven-node", 0o755, []byte("node")),
		fs.addFile("/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", 0o644, []byte("z")),
		fs.addSymlink("/usr/lib/x86_64-linux-gnu/libz.so.1", "libz.so.1.2.13"),
		fs.addSymlink("/lib", "usr/lib"),
		fs.addFile("/raven", 0o755, []byte("raven")),
		// The same file twice is no conflict: two binaries share libraries.
		fs.addFile("/raven", 0o755, []byte("raven")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := fs.tar()
	if err != nil {
		t.Fatal(err)
	}
	want := []tarEntry{
		{name: "lib", typeflag: tar.TypeSymlink, mode: 0o777, link: "usr/lib"},
		{name: "raven", typeflag: tar.TypeReg, mode: 0o755, data: "raven"},
		{name: "usr/", typeflag: tar.TypeDir, mode: 0o755},
		{name: "usr/lib/", typeflag: tar.TypeDir, mode: 0o755},
		{name: "usr/lib/x86_64-linux-gnu/", typeflag: tar.TypeDir, mode: 0o755},
		{name: "usr/lib/x86_64-linux-gnu/libz.so.1", typeflag: tar.TypeSymlink, mode: 0o777, link: "libz.so.1.2.13"},
		{name: "usr/lib/x86_64-linux-gnu/libz.so.1.2.13", typeflag: tar.TypeReg, mode: 0o644, data: "z"},
		{name: "usr/local/", typeflag: tar.TypeDir, mode: 0o755},
		{name: "usr/local/bin/", typeflag: tar.TypeDir, mode: 0o755},
		{name: "usr/local/bin/raven-node", typeflag: tar.TypeReg, mode: 0o755, data: "node"},
	}
	if got := readTar(t, b); !slices.Equal(got, want) {
		t.Errorf("layer entries:\n got %+v\nwant %+v", got, want)
	}
}

func TestFilesetRefusesAmbiguity(t *testing.T) {
	tests := []struct {
		name  string
		build func(fs fileset) error
	}{
		{name: "a path given twice with different contents", build: func(fs fileset) error {
			_ = fs.addFile("/a", 0o755, []byte("1"))
			return fs.addFile("/a", 0o755, []byte("2"))
		}},
		{name: "a path that is not absolute", build: func(fs fileset) error { return fs.addFile("a", 0o755, nil) }},
		{name: "a path that is not clean", build: func(fs fileset) error { return fs.addFile("/a/../b", 0o755, nil) }},
		{name: "a file under a symlink", build: func(fs fileset) error {
			_ = fs.addSymlink("/lib", "usr/lib")
			_ = fs.addFile("/lib/libc.so.6", 0o755, nil)
			_, err := fs.tar()
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.build(fileset{}); err == nil {
				t.Error("no error")
			}
		})
	}
}

// The same files give the same image, byte for byte, so that a rebuild changes no digest.
func TestBuildImageIsReproducible(t *testing.T) {
	spec := imageSpec{entrypoint: []string{"/testserver", "--pause"}, user: "65532:65532"}
	digests := map[string]bool{}
	for range 2 {
		fs := fileset{}
		if err := fs.addFile("/testserver", 0o755, []byte("binary")); err != nil {
			t.Fatal(err)
		}
		img, err := buildImage(fs, spec)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[d.String()] = true
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if cf.OS != "linux" || cf.Architecture != "amd64" || !slices.Equal(c.Entrypoint, spec.entrypoint) ||
			c.User != spec.user || c.WorkingDir != "/" || !slices.Equal(c.Env, []string{defaultPath}) {
			t.Errorf("config = %s/%s %+v", cf.OS, cf.Architecture, c)
		}
	}
	if len(digests) != 1 {
		t.Errorf("two builds gave digests %v", digests)
	}
}
