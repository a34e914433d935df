package ownership

import (
	"slices"
	"strings"
	"testing"
)

func TestTagsRoundTrip(t *testing.T) {
	long := strings.Repeat("n", 63) + "/" + strings.Repeat("p", 253)
	cases := []struct {
		name  string
		owner Owner
	}{
		{"a pod port keeps cluster, kind, uid and name", Owner{Cluster: "c1", Kind: KindPod, UID: "u-1", Name: "default/nginx"}},
		{"a pool port has no uid", Owner{Cluster: "c1", Kind: KindPool, Name: "default"}},
		{"a trunk pool's port keeps its node", Owner{Cluster: "c1", Kind: KindPool, Name: "default", Node: "vm-1"}},
		{"a cluster object has only cluster and kind", Owner{Cluster: "c1", Kind: KindCluster}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse(tc.owner.Tags())
			if !ok || got != tc.owner {
				t.Fatalf("Parse(Tags()) = %+v, %v; want %+v", got, ok, tc.owner)
			}
		})
	}
	t.Run("names longer than a Neutron tag are cut to 255 characters", func(t *testing.T) {
		for _, tag := range (Owner{Cluster: "c", Kind: KindPod, UID: "u", Name: long}).Tags() {
			if len(tag) > maxTag {
				t.Fatalf("tag of %d characters", len(tag))
			}
		}
	})
}

func TestOwns(t *testing.T) {
	cases := []struct {
		name string
		tags []string
		want bool
	}{
		{"our cluster's tag is ours", Owner{Cluster: "a", Kind: KindPod}.Tags(), true},
		{"another cluster's tag is not", Owner{Cluster: "b", Kind: KindPod}.Tags(), false},
		{"an untagged object is not", nil, false},
		{"a user's look-alike tag without the exact key is not", []string{"raven.clusterx=a"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Owns("a", tc.tags); got != tc.want {
				t.Fatalf("Owns = %v, want %v", got, tc.want)
			}
		})
	}
	if !slices.Equal(Selector("a", KindPod), []string{"raven.cluster=a", "raven.kind=pod"}) {
		t.Fatal("selector changed: existing clusters would lose their objects")
	}
}
