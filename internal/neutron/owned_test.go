package neutron

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// TestOwnedOfKindTellsWhatTheResyncReads checks the resync's compact view of ports against the ports: the
// owner of each port of the kind, and the later of its creation and update; Port, Owns and CountOfKind agree.
func TestOwnedOfKindTellsWhatTheResyncReads(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := ownership.Owner{Cluster: "c", Kind: ownership.KindPod, UID: "u1", Name: "ns/p1"}
	pool := ownership.Owner{Cluster: "c", Kind: ownership.KindPool, Name: "ns"}
	x := NewIndex()
	for _, p := range []openstack.Port{
		{ID: "created-last", Tags: pod.Tags(), CreatedAt: t0.Add(time.Hour), UpdatedAt: t0, FixedIPs: []openstack.FixedIP{{IPAddress: "10.0.0.5"}}},
		{ID: "updated-last", Tags: ownership.Owner{Cluster: "c", Kind: ownership.KindPod, UID: "u2", Name: "ns/p2"}.Tags(), CreatedAt: t0, UpdatedAt: t0.Add(2 * time.Hour)},
		{ID: "pool", Tags: pool.Tags(), CreatedAt: t0},
	} {
		x.PutPort("c", p)
	}
	got := x.OwnedOfKind(ownership.KindPod)
	slices.SortFunc(got, func(a, b Owned) int { return strings.Compare(a.ID, b.ID) })
	want := []Owned{
		{ID: "created-last", Owner: pod, Last: t0.Add(time.Hour)},
		{ID: "updated-last", Owner: ownership.Owner{Cluster: "c", Kind: ownership.KindPod, UID: "u2", Name: "ns/p2"}, Last: t0.Add(2 * time.Hour)},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("OwnedOfKind(pod) = %+v, want %+v", got, want)
	}
	for kind, n := range map[ownership.Kind]int{ownership.KindPod: 2, ownership.KindPool: 1, ownership.KindService: 0} {
		if got := x.CountOfKind(kind); got != n {
			t.Errorf("CountOfKind(%s) = %d, want %d", kind, got, n)
		}
	}
	if p, ok := x.Port("created-last"); !ok || p.FixedIPs[0].IPAddress != "10.0.0.5" {
		t.Errorf("Port(created-last) = %+v, %v; want the port put", p, ok)
	}
	for _, c := range []struct {
		uid, port string
		n         int
		has       bool
	}{{"u1", "created-last", 1, true}, {"u1", "updated-last", 1, false}, {"nobody", "created-last", 0, false}} {
		if n, has := x.Owns(c.uid, c.port); n != c.n || has != c.has {
			t.Errorf("Owns(%s, %s) = %d, %v; want %d, %v", c.uid, c.port, n, has, c.n, c.has)
		}
	}
	if _, ok := x.Port("gone"); ok {
		t.Error("Port(gone) found a port the index never had")
	}
}
