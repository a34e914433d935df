package main

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeTinyImage writes an image of one small file, under refs, as dir/tiny.tar, and returns its digest.
func writeTinyImage(t *testing.T, dir string, refs ...string) v1.Hash {
	t.Helper()
	fs := fileset{}
	if err := fs.addFile("/hello", 0o644, []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	img, err := buildImage(fs, imageSpec{entrypoint: []string{"/hello"}})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[name.Reference]v1.Image{}
	for _, r := range refs {
		ref, err := name.ParseReference(r)
		if err != nil {
			t.Fatal(err)
		}
		tags[ref] = img
	}
	if err := tarball.MultiRefWriteToFile(filepath.Join(dir, "tiny.tar"), tags); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestServeMirrorsEveryTag(t *testing.T) {
	dir := t.TempDir()
	want := writeTinyImage(t, dir, "ghcr.io/raven-net/tiny:v1", "docker.io/library/tiny:latest")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := startRegistry(ctx, ln)
	defer srv.Close()
	host := ln.Addr().String()
	if n, err := pushDir(ctx, dir, host); err != nil || n != 2 {
		t.Fatalf("pushDir = %d, %v; want 2 tags", n, err)
	}

	for _, ref := range []string{
		host + "/raven-net/tiny:v1",
		host + "/library/tiny:latest",
		host + "/raven-net/tiny@" + want.String(),
	} {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(r, remote.WithContext(ctx))
		if err != nil {
			t.Errorf("pulling %s: %v", ref, err)
			continue
		}
		if got, err := img.Digest(); err != nil || got != want {
			t.Errorf("%s has digest %v (%v), want the built image's %v", ref, got, err, want)
		}
		if _, err := img.Layers(); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}

	// containerd names the registry it mirrors in the query, which the path alone must serve.
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, "http://"+host+"/v2/library/tiny/manifests/latest?ns=docker.io", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != want.String() {
		t.Errorf("HEAD with ?ns=docker.io = %d %s, want 200 %s", resp.StatusCode, resp.Header.Get("Docker-Content-Digest"), want)
	}
}

func TestServeRefusesAnEmptyDir(t *testing.T) {
	if _, err := pushDir(context.Background(), t.TempDir(), "127.0.0.1:1"); err == nil {
		t.Error("pushDir of an empty directory: no error")
	}
}
