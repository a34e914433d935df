package octavia

import (
	"slices"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

var t0 = time.Unix(1000, 0)

func mem(addrs ...string) []openstack.Member {
	var out []openstack.Member
	for _, a := range addrs {
		out = append(out, openstack.Member{Address: a, ProtocolPort: 80, ProvisioningStatus: "ACTIVE"})
	}
	return out
}

func spec(addrs ...string) []openstack.MemberSpec {
	var out []openstack.MemberSpec
	for _, a := range addrs {
		out = append(out, openstack.MemberSpec{Address: a, ProtocolPort: 80})
	}
	return out
}

// pool1 is a load balancer with one listener and its pool p1, with members at addrs.
func pool1(addrs ...string) Current {
	return Current{
		Listeners: []openstack.Listener{{ID: "l1", Protocol: "TCP", ProtocolPort: 80, DefaultPoolID: "p1"}},
		Pools:     []openstack.Pool{{ID: "p1", Protocol: "TCP", ListenerID: "l1"}},
		Members:   map[string][]openstack.Member{"p1": mem(addrs...)},
	}
}

func want1(addrs ...string) []Listener {
	return []Listener{{Protocol: "TCP", Port: 80, Members: spec(addrs...)}}
}

func TestHoldSent(t *testing.T) {
	cur, want := pool1, want1
	// A scale from 3 to 1: the change is sent while the pool has a, b, c.
	sent := map[string]Sent{"p1": NewSent(mem("a", "b", "c"), spec("a"), t0)}
	for _, tc := range []struct {
		name string
		at   time.Duration
		cur  Current
		want []Listener
		held bool
	}{
		{"Octavia still lists the old members as ACTIVE: held", time.Second, cur("a", "b", "c"), want("a"), true},
		{"within the limit: held", SettleLimit - time.Second, cur("a", "b", "c"), want("a"), true},
		{"progress: one member gone, a new wait", SettleLimit, cur("a", "b"), want("a"), true},
		{"no progress since, within the limit", 2*SettleLimit - time.Second, cur("a", "b"), want("a"), true},
		{"no progress for the limit: sent again", 2 * SettleLimit, cur("a", "b"), want("a"), false},
	} {
		out, held, _ := HoldSent(tc.cur, tc.want, sent, t0.Add(tc.at), SettleLimit)
		if (len(held) == 1) != tc.held {
			t.Fatalf("%s: held %v, want %v", tc.name, held, tc.held)
		}
		steps := Plan(tc.want, out)
		if tc.held && (len(steps) != 0 || len(Settling(out)) != 1) {
			t.Fatalf("%s: a held pool planned %v and settling %v", tc.name, steps, Settling(out))
		}
		if !tc.held && (len(steps) != 1 || steps[0].Kind != ReplaceMembers) {
			t.Fatalf("%s: planned %v, want the change again", tc.name, steps)
		}
		if len(tc.cur.Members["p1"]) > 0 && tc.cur.Members["p1"][0].ProvisioningStatus != "ACTIVE" {
			t.Fatalf("%s: HoldSent changed its argument", tc.name)
		}
	}
}

func TestHoldSentLetsGo(t *testing.T) {
	cur, want := pool1, want1
	for _, tc := range []struct {
		name string
		cur  Current
		want []Listener
	}{
		{"Octavia shows the change: done", cur("a"), want("a")},
		{"the pool is no longer wanted: not held", cur("a", "b", "c"), nil},
	} {
		sent := map[string]Sent{"p1": NewSent(mem("a", "b", "c"), spec("a"), t0)}
		if _, held, watched := HoldSent(tc.cur, tc.want, sent, t0.Add(time.Second), SettleLimit); len(held) != 0 || len(watched) != 0 || len(sent) != 0 {
			t.Fatalf("%s: held %v, watched %v, records left %v", tc.name, held, watched, sent)
		}
	}
}

// TestAChangeWantedBackIsWatched: b is removed (a, b → a), then wanted again before Octavia lists the removal.
// The pool looks in place, but the provider still has the removal queued: the pool is watched until Octavia shows
// it, and then b is sent again.
func TestAChangeWantedBackIsWatched(t *testing.T) {
	cur, want := pool1, want1
	sent := map[string]Sent{"p1": NewSent(mem("a", "b"), spec("a"), t0)}
	out, held, watched := HoldSent(cur("a", "b"), want("a", "b"), sent, t0.Add(time.Second), SettleLimit)
	if len(held) != 0 || !slices.Equal(watched, []string{"p1"}) || len(Plan(want("a", "b"), out)) != 0 {
		t.Fatalf("wanted back before Octavia listed the removal: held %v, watched %v, planned %v; want watched only", held, watched, Plan(want("a", "b"), out))
	}
	out, held, watched = HoldSent(cur("a"), want("a", "b"), sent, t0.Add(2*time.Second), SettleLimit)
	if steps := Plan(want("a", "b"), out); len(held) != 0 || len(watched) != 0 || len(steps) != 1 || steps[0].Kind != ReplaceMembers || len(sent) != 0 {
		t.Fatalf("Octavia lists the removal: held %v, watched %v, planned %v, records %v; want b sent again", held, watched, steps, sent)
	}
}

// TestAChangeWantedBackIsWatchedPastSettleLimit: the provider applies the queued removal after SettleLimit of a
// listing that stood still (under load). The pool is still watched then, b is sent again once Octavia lists the
// removal, and the watch ends after WatchLimit of a listing that stands still.
func TestAChangeWantedBackIsWatchedPastSettleLimit(t *testing.T) {
	cur, want := pool1, want1
	sent := map[string]Sent{"p1": NewSent(mem("a", "b"), spec("a"), t0)}
	if _, held, watched := HoldSent(cur("a", "b"), want("a", "b"), sent, t0.Add(SettleLimit), SettleLimit); len(held) != 0 || !slices.Equal(watched, []string{"p1"}) {
		t.Fatalf("after SettleLimit without progress: held %v, watched %v; want the pool still watched", held, watched)
	}
	out, _, _ := HoldSent(cur("a"), want("a", "b"), sent, t0.Add(SettleLimit+30*time.Second), SettleLimit)
	if steps := Plan(want("a", "b"), out); len(steps) != 1 || steps[0].Kind != ReplaceMembers || len(sent) != 0 {
		t.Fatalf("the removal listed 50 s after it was sent: planned %v, records %v; want b sent again", steps, sent)
	}
	// Octavia's listing stands still for WatchLimit: the provider is done (or lost the removal), the record goes.
	sent = map[string]Sent{"p1": NewSent(mem("a", "b"), spec("a"), t0)}
	if _, _, watched := HoldSent(cur("a", "b"), want("a", "b"), sent, t0.Add(WatchLimit), SettleLimit); len(watched) != 0 || len(sent) != 0 {
		t.Fatalf("after WatchLimit without progress: watched %v, records %v", watched, sent)
	}
}
