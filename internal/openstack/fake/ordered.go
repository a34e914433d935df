package fake

import (
	"slices"
	"sort"
)

// ordered is a set of IDs that can be read in ID order from any ID on, as a paged list reads it: a sorted
// slice whose removed IDs are only marked, and swept out once they are half of it. New IDs that sort last
// (the fake's IDs grow) are appended.
type ordered struct {
	ids  []string
	gone map[string]struct{}
}

// add puts id in the set.
func (o *ordered) add(id string) {
	if _, ok := o.gone[id]; ok {
		delete(o.gone, id)
		return
	}
	n := len(o.ids)
	if n == 0 || o.ids[n-1] < id {
		o.ids = append(o.ids, id)
		return
	}
	i, found := slices.BinarySearch(o.ids, id)
	if !found { // a new slice: a reader of the old one is not disturbed
		o.ids = slices.Concat(o.ids[:i:i], []string{id}, o.ids[i:])
	}
}

// remove takes id out of the set.
func (o *ordered) remove(id string) {
	if _, found := slices.BinarySearch(o.ids, id); !found {
		return
	}
	if o.gone == nil {
		o.gone = map[string]struct{}{}
	}
	o.gone[id] = struct{}{}
	if 2*len(o.gone) >= len(o.ids) {
		o.sweep()
	}
}

// sweep drops the removed IDs into a new slice, so that a reader of the old one is not disturbed.
func (o *ordered) sweep() {
	live := make([]string, 0, len(o.ids)-len(o.gone))
	for _, id := range o.ids {
		if _, ok := o.gone[id]; !ok {
			live = append(live, id)
		}
	}
	o.ids, o.gone = live, nil
}

// size is the number of IDs in the set.
func (o *ordered) size() int {
	if o == nil {
		return 0
	}
	return len(o.ids) - len(o.gone)
}

// after returns the IDs that sort after marker (all of them for ""), in order. Removed IDs may still be among
// them: the caller checks each against its map. Adds and removes while the caller reads it leave it as it
// was; it must not be kept past the lock.
func (o *ordered) after(marker string) []string {
	if o == nil {
		return nil
	}
	i := sort.SearchStrings(o.ids, marker)
	if i < len(o.ids) && o.ids[i] == marker {
		i++
	}
	return o.ids[i:]
}

// has says whether id is in the set.
func (o *ordered) has(id string) bool {
	if o == nil {
		return false
	}
	if _, found := slices.BinarySearch(o.ids, id); !found {
		return false
	}
	_, gone := o.gone[id]
	return !gone
}

// sets are the IDs of objects by the value of one of their fields (or by one of their tags). Most values are
// an object's own (a device, an address, a uid tag): a set of one is held without an ordered of its own.
type sets map[string]idSet

// idSet is one object's ID (one), or an ordered set of several (many).
type idSet struct {
	one  string
	many *ordered
}

// add puts id in the set of value ("" is not indexed).
func (ss sets) add(value, id string) {
	if value == "" {
		return
	}
	e := ss[value]
	switch {
	case e.many != nil:
		e.many.add(id)
	case e.one == "" || e.one == id:
		e.one = id
	default:
		e.many = &ordered{}
		e.many.add(e.one)
		e.many.add(id)
		e.one = ""
	}
	ss[value] = e
}

// remove takes id out of the set of value.
func (ss sets) remove(value, id string) {
	e, ok := ss[value]
	switch {
	case !ok:
	case e.many != nil:
		e.many.remove(id)
		if e.many.size() == 0 {
			delete(ss, value)
		}
	case e.one == id:
		delete(ss, value)
	}
}

// get is the set of value, nil when no object has it.
func (ss sets) get(value string) *ordered {
	e, ok := ss[value]
	switch {
	case !ok:
		return nil
	case e.many != nil:
		return e.many
	}
	return &ordered{ids: []string{e.one}}
}

// tag indexes an object's tags (remove: takes them out).
func (ss sets) tag(id string, tags []string, remove bool) {
	for _, t := range tags {
		if remove {
			ss.remove(t, id)
		} else {
			ss.add(t, id)
		}
	}
}

// none is the empty set a filter that matches nothing selects.
var none = &ordered{}

// smallest is the smallest of the sets of values, none when one of them is empty, nil for no values.
func (ss sets) smallest(values []string) *ordered {
	var best *ordered
	for _, v := range values {
		set := ss.get(v)
		if set == nil {
			return none
		}
		if best == nil || set.size() < best.size() {
			best = set
		}
	}
	return best
}
