package controller

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestParkedKeysComeBackOnce(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	var p Parked
	for _, k := range []types.NamespacedName{a, b, a} {
		if !p.Park(k) {
			t.Fatalf("Park(%s) refused before Release", k)
		}
	}
	got := p.Release()
	slices.SortFunc(got, func(x, y types.NamespacedName) int { return strings.Compare(x.Name, y.Name) })
	if !slices.Equal(got, []types.NamespacedName{a, b}) {
		t.Fatalf("Release = %v, want each parked key once", got)
	}
	if p.Park(a) {
		t.Fatal("Park accepted a key after Release: it would never come back")
	}
	if again := p.Release(); len(again) != 0 {
		t.Fatalf("a second Release returned %v", again)
	}
}
