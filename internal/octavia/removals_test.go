package octavia

import (
	"slices"
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
		member     string // the member DeleteMember removes or CreateMember adds
	}{
		{"one of five gone: a delete of its own", []string{"a", "b", "c", "d", "e"}, []string{"a", "b", "c", "d"}, true, DeleteMember, "m-e"},
		{"one gone and one new: the delete first", []string{"a", "b", "c"}, []string{"a", "b", "x"}, true, DeleteMember, "m-c"},
		{"two of four gone: the first by address", []string{"d", "c", "b", "a"}, []string{"a", "c"}, true, DeleteMember, "m-b"},
		{"more gone than stay: one batch", []string{"a", "b", "c"}, []string{"a"}, true, ReplaceMembers, ""},
		{"three of ten gone: a delete of its own", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, []string{"a", "b", "c", "d", "e", "f", "g"}, true, DeleteMember, "m-h"},
		{"one new beside one: a create of its own", []string{"a"}, []string{"a", "b"}, true, CreateMember, "b"},
		{"two new beside one: one batch", []string{"a"}, []string{"a", "b", "c"}, true, ReplaceMembers, ""},
		{"a pool with no member that stays: one batch", []string{"a", "b"}, []string{"x", "y"}, true, ReplaceMembers, ""},
		{"three gone, one new: the new one first", []string{"a", "b", "c", "d", "e", "f", "g", "h"}, []string{"a", "b", "c", "d", "e", "x"}, true, CreateMember, "x"},
		{"two gone, one new: the removals first", []string{"a", "b", "c", "d", "e", "f", "g"}, []string{"a", "b", "c", "d", "e", "x"}, true, DeleteMember, "m-f"},
		{"a provider whose batch costs no request per member: one batch", []string{"a", "b", "c", "d", "e"}, []string{"a", "b", "c", "d"}, false, ReplaceMembers, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := want1(tc.want...)
			want[0].OneByOne = tc.oneByOne
			steps := Plan(want, withIDs(tc.have...))
			if len(steps) != 1 || steps[0].Kind != tc.kind || steps[0].Member.ID+steps[0].Add.Address != tc.member || steps[0].ID != "p1" {
				t.Fatalf("Plan = %+v, want one %s of %q on p1", steps, tc.kind, tc.member)
			}
		})
	}
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
	// Octavia lists e gone: the record goes, and x comes (TestAnAdditionOnItsOwnIsFollowed).
	out, held, watched := HoldSent(withIDs("a", "b", "c", "d"), ovnWant("a", "b", "c", "d", "x"), sent, t0.Add(2e9), SettleLimit)
	steps = Plan(ovnWant("a", "b", "c", "d", "x"), out)
	if len(held)+len(watched) != 0 || len(sent) != 0 || len(steps) != 1 || steps[0].Kind != CreateMember {
		t.Fatalf("e gone: held %v, watched %v, records %v, planned %+v; want x created", held, watched, sent, steps)
	}
	// e wanted back before Octavia listed it gone: watched, no step until Octavia shows the removal.
	sent = map[string]Sent{"p1": s}
	out, held, watched = HoldSent(cur, ovnWant("a", "b", "c", "d", "e"), sent, t0.Add(1e9), SettleLimit)
	if len(held) != 0 || !slices.Equal(watched, []string{"p1"}) || len(Plan(ovnWant("a", "b", "c", "d", "e"), out)) != 0 {
		t.Fatalf("e wanted back: held %v, watched %v; want watched and no step", held, watched)
	}
}

// A member added on its own is followed until Octavia lists it, also when the Service wants more meanwhile.
func TestAnAdditionOnItsOwnIsFollowed(t *testing.T) {
	cur := withIDs("a", "b", "c", "d")
	steps := Plan(ovnWant("a", "b", "c", "d", "x"), cur)
	if len(steps) != 1 || steps[0].Kind != CreateMember || steps[0].Add.Address != "x" {
		t.Fatalf("Plan = %+v, want x created on its own", steps)
	}
	s, ok := SentBy(steps[0], cur, t0)
	if !ok || !s.Partial || s.Want != "a:80,b:80,c:80,d:80,x:80" {
		t.Fatalf("SentBy = %+v, %v; want a partial change to a, b, c, d, x", s, ok)
	}
	sent := map[string]Sent{"p1": s}
	if out, held, _ := HoldSent(cur, ovnWant("a", "b", "c", "d", "x", "y"), sent, t0.Add(1e9), SettleLimit); !slices.Equal(held, []string{"p1"}) ||
		len(Plan(ovnWant("a", "b", "c", "d", "x", "y"), out)) != 0 {
		t.Fatalf("x not listed yet, y wanted too: held %v; want p1 held and no step", held)
	}
	out, held, _ := HoldSent(withIDs("a", "b", "c", "d", "x"), ovnWant("a", "b", "c", "d", "x", "y"), sent, t0.Add(2e9), SettleLimit)
	if steps := Plan(ovnWant("a", "b", "c", "d", "x", "y"), out); len(held) != 0 || len(sent) != 0 || len(steps) != 1 || steps[0].Add.Address != "y" {
		t.Fatalf("x listed: held %v, records %v, planned %+v; want y created", held, sent, steps)
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
