package wire

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

// The generated conflist says 1.0.0 to a runtime whose libcni reads cniVersion alone (containerd 1.7's, CNI
// v1.1.2, which cannot read a 1.1.0 result) and offers 1.1.0 through cniVersions to one that honours it
// (containerd 2.x's, CNI v1.2+), which picks the highest version it implements.
func TestConflistVersions(t *testing.T) {
	b, err := Conflist("/run/raven/cni.sock")
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		CNIVersion  string   `json:"cniVersion"`
		CNIVersions []string `json:"cniVersions"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.CNIVersion != "1.0.0" {
		t.Errorf("cniVersion %q, want 1.0.0: what a libcni that knows no cniVersions uses", raw.CNIVersion)
	}
	if !slices.Equal(raw.CNIVersions, []string{"1.0.0", "1.1.0"}) {
		t.Errorf("cniVersions %q, want [1.0.0 1.1.0]: the versions raven-cni supports from 1.0.0 on", raw.CNIVersions)
	}
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if list.CNIVersion != "1.1.0" {
		t.Errorf("a libcni that honours cniVersions picks %q, want 1.1.0", list.CNIVersion)
	}
}
