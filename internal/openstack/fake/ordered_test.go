package fake

import (
	"net/netip"
	"slices"
	"testing"
)

func TestOrdered(t *testing.T) {
	var o ordered
	for _, id := range []string{"b", "d", "a", "c", "e", "c"} { // out of order, and one twice
		o.add(id)
	}
	before := o.after("")
	o.remove("b")
	o.remove("zz") // not there
	if got := live(&o, ""); !slices.Equal(got, []string{"a", "c", "d", "e"}) || o.size() != 4 || o.has("b") || !o.has("c") {
		t.Fatalf("after a remove: %v (size %d)", got, o.size())
	}
	if got := live(&o, "b"); !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Fatalf("after a removed marker: %v", got)
	}
	o.remove("a")
	o.remove("c") // half gone: swept into a new slice
	if len(o.ids) != 2 || !slices.Equal(before, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("the sweep kept %v, and the old slice reads %v", o.ids, before)
	}
	o.add("b")
	if got := live(&o, "a"); !slices.Equal(got, []string{"b", "d", "e"}) {
		t.Fatalf("after adding back: %v", got)
	}
	var none *ordered
	if none.size() != 0 || none.after("") != nil || none.has("a") {
		t.Fatal("a nil set is not empty")
	}
}

// live are the IDs after marker that are in the set.
func live(o *ordered, marker string) []string {
	var out []string
	for _, id := range o.after(marker) {
		if o.has(id) {
			out = append(out, id)
		}
	}
	return out
}

func TestAllocator(t *testing.T) {
	a := newAllocator("10.0.0.2", "10.0.0.6")
	var got []string
	for range 3 {
		ip, ok := a.allocate()
		if !ok {
			t.Fatal("no address")
		}
		got = append(got, ip.String())
	}
	a.take(mustAddr("10.0.0.5")) // asked for
	a.release(mustAddr("10.0.0.3"))
	a.release(mustAddr("10.0.0.2"))
	for {
		ip, ok := a.allocate()
		if !ok {
			break
		}
		got = append(got, ip.String())
	}
	want := []string{"10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.2", "10.0.0.3", "10.0.0.6"}
	if !slices.Equal(got, want) {
		t.Fatalf("handed out %v, want %v (the lowest free first)", got, want)
	}
	if !a.held(mustAddr("10.0.0.5")) || a.take(mustAddr("10.0.0.5")) {
		t.Fatal("an address asked for is not held")
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
