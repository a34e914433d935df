package main

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
)

// mirrorPath is where a mirror serves ref: its repository without the registry host, then its tag or
// digest ("ghcr.io/raven-net/raven:v1" → "raven-net/raven:v1", "nginx" → "library/nginx:latest",
// "registry.k8s.io/pause:3.10.1" → "pause:3.10.1"). containerd asks a mirror for
// /v2/<repository>/manifests/<tag>?ns=<registry host>: the host is only a query parameter, which the
// mirror ignores, so two registries' images of one repository name would meet (none of ours do).
func mirrorPath(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", err
	}
	repo := r.Context().RepositoryStr()
	switch r := r.(type) {
	case name.Tag:
		return repo + ":" + r.TagStr(), nil
	case name.Digest:
		return repo + "@" + r.DigestStr(), nil
	default:
		return "", fmt.Errorf("%s is neither a tag nor a digest", ref)
	}
}
