package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// hostTree makes a host file system like Debian's merged /usr under a temporary root.
func hostTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	libdir := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	for _, d := range []string{libdir, filepath.Join(root, "usr/lib64"), filepath.Join(root, "usr/bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"usr/bin/ovs-vsctl": "vsctl", "usr/lib/x86_64-linux-gnu/libz.so.1.2.13": "z",
		"usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": "ld"}
	for p, data := range files {
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"lib": "usr/lib", "lib64": "usr/lib64", "bin": "usr/bin",
		"usr/lib/x86_64-linux-gnu/libz.so.1": "libz.so.1.2.13",
		"usr/lib64/ld-linux-x86-64.so.2":     "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"loop-a":                             "loop-b", "loop-b": "/loop-a",
	}
	for p, target := range links {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestHostFilesKeepSymlinks(t *testing.T) {
	root := hostTree(t)
	tests := []struct {
		name    string
		path    string
		want    fileset
		wantErr bool
	}{
		{name: "a regular file is copied at its path", path: "/usr/bin/ovs-vsctl",
			want: fileset{"/usr/bin/ovs-vsctl": {mode: 0o755, data: []byte("vsctl")}}},
		{name: "a library named through a directory link and a file link gets both links", path: "/lib/x86_64-linux-gnu/libz.so.1",
			want: fileset{
				"/lib":                                {mode: 0o777, link: "usr/lib"},
				"/usr/lib/x86_64-linux-gnu/libz.so.1": {mode: 0o777, link: "libz.so.1.2.13"},
				"/usr/lib/x86_64-linux-gnu/libz.so.1.2.13": {mode: 0o755, data: []byte("z")},
			}},
		{name: "the loader's absolute link is followed through /lib too", path: "/lib64/ld-linux-x86-64.so.2",
			want: fileset{
				"/lib64":                          {mode: 0o777, link: "usr/lib64"},
				"/usr/lib64/ld-linux-x86-64.so.2": {mode: 0o777, link: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
				"/lib":                            {mode: 0o777, link: "usr/lib"},
				"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": {mode: 0o755, data: []byte("ld")},
			}},
		{name: "a symlink loop is an error", path: "/loop-a", wantErr: true},
		{name: "a directory is an error", path: "/usr/bin", wantErr: true},
		{name: "a missing file is an error", path: "/usr/bin/none", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hostFiles{root: root, files: fileset{}}
			err := h.add(tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("add(%s) error = %v, want error %v", tt.path, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !maps.EqualFunc(h.files, tt.want, func(a, b file) bool {
				return a.mode == b.mode && a.link == b.link && string(a.data) == string(b.data)
			}) {
				t.Errorf("files = %v, want %v", slices.Sorted(maps.Keys(h.files)), slices.Sorted(maps.Keys(tt.want)))
			}
		})
	}
}

func TestLookPath(t *testing.T) {
	root := hostTree(t)
	if err := os.WriteFile(filepath.Join(root, "usr/bin/not-executable"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := hostFiles{root: root, files: fileset{}}
	for _, tc := range []struct {
		name, want string
		wantErr    bool
	}{
		// /usr/local/sbin, /usr/local/bin, /usr/sbin do not exist; /usr/bin holds it.
		{name: "ovs-vsctl", want: "/usr/bin/ovs-vsctl"},
		{name: "not-executable", wantErr: true},
		{name: "absent", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.lookPath(tc.name)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("lookPath(%q) = %q, %v; want %q (error: %v)", tc.name, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
