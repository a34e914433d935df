package octavia

import (
	"slices"
	"strings"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
)

// ovnWant is want1 on a provider that removes members one by one.
func ovnWant(addrs ...string) []Listener {
	l := want1(addrs...)
	l[0].OneByOne = true
	return l
}

// withIDs is pool1 whose members have IDs (m-<address>), as Octavia lists them.
func withIDs(addrs ...string) Current {
	cur := pool1(addrs...)
	for i := range cur.Members["p1"] {
		cur.Members["p1"][i].ID = "m-" + cur.Members["p1"][i].Address
	}
	return cur
}

func TestFewMemberChangesGoOneByOne(t *testing.T) {
	cases := []struct {
		name       string
		have, want []string
		oneByOne   bool
		kind       StepKind
		member     string // the member DeleteMember removes, or the addresses a batch sends
	}{
		{"one of five gone: a delete of its own", []string{"a", "b", "c", "d", "e"}, []string{"a", "b", "c", "d"}, true, DeleteMember, "m-e"},
		{"one gone and one new: the delete first", []string{"a", "b", "c"}, []string{"a", "b", "x"}, true, DeleteMember, "m-c"},
		{"two of four gone: the first by address", []string{"d", "c", "b", "a"}, []string{"a", "c"}, true, DeleteMember, "m-b"},
		{"more gone than stay: one batch", []string{"a", "b", "c"}, []string{"a"}, true, ReplaceMembers, "a"},
		{"three of ten gone: a delete of its own", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, []string{"a", "b", "c", "d", "e", "f", "g"}, true, DeleteMember, "m-h"},
		{"only new members: one batch, which removes none", []string{"a"}, []string{"a", "b", "c"}, true, ReplaceMembers, "a,b,c"},
		{"a pool with no member that stays: one batch", []string{"a", "b"}, []string{"x", "y"}, true, ReplaceMembers, "x,y"},
		{"three gone, one new: the new one added, the old kept", []string{"a", "b", "c", "d", "e", "f", "g", "h"}, []string{"a", "b", "c", "d", "e", "x"}, true, AddMembers, "x"},
		{"two gone, one new: the removals first", []string{"a", "b", "c", "d", "e", "f", "g"}, []string{"a", "b", "c", "d", "e", "x"}, true, DeleteMember, "m-f"},
		{"a provider whose batch is quick to remove: one batch", []string{"a", "b", "c", "d", "e"}, []string{"a", "b", "c", "d"}, false, ReplaceMembers, "a,b,c,d"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := want1(tc.want...)
			want[0].OneByOne = tc.oneByOne
			steps := Plan(want, withIDs(tc.have...))
			if len(steps) != 1 || steps[0].Kind != tc.kind || stepMembers(steps[0]) != tc.member || steps[0].ID != "p1" {
				t.Fatalf("Plan = %+v, want one %s of %q on p1", steps, tc.kind, tc.member)
			}
		})
	}
}

// stepMembers is the member a DeleteMember removes, or the addresses a batch sends, sorted and joined by commas.
func stepMembers(s Step) string {
	if s.Kind == DeleteMember {
		return s.Member.ID
	}
	ms := s.Listener.Members
	if s.Kind == AddMembers {
		ms = s.Add
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Address)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// A member removed on its own is followed until Octavia lists it gone, also when the Service wants more changes
// meanwhile; a member wanted back before that is watched, as after a batch.
func TestARemovalOnItsOwnIsFollowed(t *testing.T) {
	cur := withIDs("a", "b", "c", "d", "e")
	steps := Plan(ovnWant("a", "b", "c", "d"), cur)
	if len(steps) != 1 || steps[0].Kind != DeleteMember {
		t.Fatalf("Plan = %+v, want one DeleteMember", steps)
	}
	s, ok := SentBy(steps[0], cur, t0)
	if !ok || !s.Partial {
		t.Fatalf("SentBy = %+v, %v; want a partial change", s, ok)
	}
	// The provider still lists e (8.0.0 reports a member it has yet to delete as ACTIVE), and a new backend x
	// is wanted: the pool is left alone, not given a batch that would queue e's delete again.
	sent := map[string]Sent{"p1": s}
	out, held, _ := HoldSent(cur, ovnWant("a", "b", "c", "d", "x"), sent, t0.Add(1e9), SettleLimit)
	if !slices.Equal(held, []string{"p1"}) || len(Plan(ovnWant("a", "b", "c", "d", "x"), out)) != 0 {
		t.Fatalf("e still listed, x wanted: held %v, planned %+v; want p1 held and no step", held, Plan(ovnWant("a", "b", "c", "d", "x"), out))
	}
	// Octavia lists e gone: the record goes, and x comes in a batch, which removes none.
	out, held, watched := HoldSent(withIDs("a", "b", "c", "d"), ovnWant("a", "b", "c", "d", "x"), sent, t0.Add(2e9), SettleLimit)
	steps = Plan(ovnWant("a", "b", "c", "d", "x"), out)
	if len(held)+len(watched) != 0 || len(sent) != 0 || len(steps) != 1 || steps[0].Kind != ReplaceMembers {
		t.Fatalf("e gone: held %v, watched %v, records %v, planned %+v; want x sent in a batch", held, watched, sent, steps)
	}
	// e wanted back before Octavia listed it gone: watched, no step until Octavia shows the removal.
	sent = map[string]Sent{"p1": s}
	out, held, watched = HoldSent(cur, ovnWant("a", "b", "c", "d", "e"), sent, t0.Add(1e9), SettleLimit)
	if len(held) != 0 || !slices.Equal(watched, []string{"p1"}) || len(Plan(ovnWant("a", "b", "c", "d", "e"), out)) != 0 {
		t.Fatalf("e wanted back: held %v, watched %v; want watched and no step", held, watched)
	}
}

// New members added while old ones still go are followed until Octavia lists them, also when the Service wants
// more meanwhile; then the old ones go, one at a time.
func TestAdditionsBeforeRemovalsAreFollowed(t *testing.T) {
	cur := withIDs("a", "b", "c", "d", "e", "f", "g", "h")
	want := ovnWant("a", "b", "c", "d", "e", "x")
	steps := Plan(want, cur)
	if len(steps) != 1 || steps[0].Kind != AddMembers || stepMembers(steps[0]) != "x" {
		t.Fatalf("Plan = %+v, want x added, every member kept", steps)
	}
	s, ok := SentBy(steps[0], cur, t0)
	if !ok || !s.Partial || s.Want != "a:80,b:80,c:80,d:80,e:80,f:80,g:80,h:80,x:80" {
		t.Fatalf("SentBy = %+v, %v; want a partial change to a-h and x", s, ok)
	}
	sent := map[string]Sent{"p1": s}
	more := ovnWant("a", "b", "c", "d", "e", "x", "y")
	if out, held, _ := HoldSent(cur, more, sent, t0.Add(1e9), SettleLimit); !slices.Equal(held, []string{"p1"}) || len(Plan(more, out)) != 0 {
		t.Fatalf("x not listed yet, y wanted too: held %v; want p1 held and no step", held)
	}
	listed := withIDs("a", "b", "c", "d", "e", "f", "g", "h", "x")
	out, held, _ := HoldSent(listed, more, sent, t0.Add(2e9), SettleLimit)
	if steps := Plan(more, out); len(held) != 0 || len(sent) != 0 || len(steps) != 1 || stepMembers(steps[0]) != "y" {
		t.Fatalf("x listed: held %v, records %v, planned %+v; want y added, every member kept", held, sent, steps)
	}
	if steps := Plan(want, listed); stepMembers(steps[0]) != "m-f" {
		t.Fatalf("nothing more to add: planned %+v; want f deleted on its own", steps)
	}
}

func TestSentBy(t *testing.T) {
	cur := withIDs("a", "b")
	if _, ok := SentBy(Step{Kind: CreateMonitor, ID: "p1"}, cur, t0); ok {
		t.Fatal("a monitor step recorded as a member change")
	}
	s, ok := SentBy(Step{Kind: ReplaceMembers, ID: "p1", Listener: Listener{Members: spec("b", "c")}}, cur, t0)
	if !ok || s.Partial || s.Want != "b:80,c:80" || s.Seen != "a:80,b:80" {
		t.Fatalf("batch: %+v", s)
	}
	s, ok = SentBy(Step{Kind: DeleteMember, ID: "p1", Member: openstack.Member{ID: "m-a", Address: "a", ProtocolPort: 80}}, cur, t0)
	if !ok || !s.Partial || s.Want != "b:80" || s.Seen != "a:80,b:80" {
		t.Fatalf("one removal: %+v", s)
	}
}
