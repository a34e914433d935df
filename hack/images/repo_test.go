package main

import "testing"

func TestMirrorPath(t *testing.T) {
	tests := []struct {
		name, ref, want string
		wantErr         bool
	}{
		{name: "a ghcr.io image loses its host", ref: "ghcr.io/raven-net/raven:v1.2.3", want: "raven-net/raven:v1.2.3"},
		{name: "a Docker Hub official image keeps library/", ref: "docker.io/library/nginx:latest", want: "library/nginx:latest"},
		{name: "a short Docker Hub name is expanded as containerd expands it", ref: "nginx", want: "library/nginx:latest"},
		{name: "an image at a registry's root is served at the mirror's root", ref: "registry.k8s.io/pause:3.10.1", want: "pause:3.10.1"},
		{name: "a registry with a port loses it too", ref: "127.0.0.1:5000/a/b:c", want: "a/b:c"},
		{name: "a digest reference keeps its digest",
			ref:  "ghcr.io/raven-net/raven@sha256:0000000000000000000000000000000000000000000000000000000000000000",
			want: "raven-net/raven@sha256:0000000000000000000000000000000000000000000000000000000000000000"},
		{name: "a reference that does not parse is an error", ref: "Ghcr.io/UPPER/case:x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mirrorPath(tt.ref)
			if (err != nil) != tt.wantErr {
				t.Fatalf("mirrorPath(%q) error = %v, want error %v", tt.ref, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("mirrorPath(%q) = %q, want %q", tt.ref, got, tt.want)
			}
		})
	}
}
