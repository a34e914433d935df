package octavia

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

// Sent is a member change Raven sent to a pool and Octavia does not show yet. ovn-octavia-provider 8.0.0 reports
// every member it still has as ACTIVE after each request it handles, so that a member it has yet to delete shows
// ACTIVE again, not PENDING_DELETE: the pool looks settled and different from what was sent. Sending the change
// again queued the same deletions again (a scale from 10 to 1 sent 10 batch updates, one per member the provider
// removed). A pool whose listing still moves is left to the provider.
type Sent struct {
	Want  string    // the members sent
	Seen  string    // the members Octavia listed at the last look
	Since time.Time // when the change was sent, or Octavia's listing of the pool last changed
	// Partial: the change is a step towards what the Service wants (one member removed or added), not all of it.
	Partial bool
}

// WatchLimit is how long a pool whose sent change the Service no longer wants is looked at while Octavia's listing
// of it stands still: the provider may apply a queued change long after it was sent (8.0.0 works through a pool's
// members one request at a time, with a status call per listener after each), and once it does, Plan must see
// what it undid. A look is one status read of the Service's load balancer, every 2 s at most.
const WatchLimit = 3 * time.Minute

// NewSent records a change of a pool's members from cur to want, sent at now.
func NewSent(cur []openstack.Member, want []openstack.MemberSpec, now time.Time) Sent {
	return Sent{Want: specKey(want), Seen: memberKey(cur), Since: now}
}

// SentBy records the member change step s makes to its pool, whose members were cur, at now; false for a step
// that changes no members.
func SentBy(s Step, cur Current, now time.Time) (Sent, bool) {
	members := cur.Members[s.ID]
	switch s.Kind {
	case ReplaceMembers:
		return NewSent(members, s.Listener.Members, now), true
	case DeleteMember:
		rest := slices.DeleteFunc(slices.Clone(members), func(m openstack.Member) bool {
			return m.Address == s.Member.Address && m.ProtocolPort == s.Member.ProtocolPort
		})
		return Sent{Want: memberKey(rest), Seen: memberKey(members), Since: now, Partial: true}, true
	case AddMembers:
		// s.Add holds only members the pool does not have (oneChange).
		return Sent{Want: specKey(append(specsOf(members), s.Add...)), Seen: memberKey(members), Since: now, Partial: true}, true
	}
	return Sent{}, false
}

// HoldSent returns cur with each pool that has a change in sent which Octavia does not show yet, is still what
// want asks, and whose listing changed within limit, shown as holding the sent members, PENDING_UPDATE: Plan
// leaves it alone, and Settling looks again shortly. held lists those pools. sent is updated: a change Octavia
// shows, or no longer wanted, or that made no progress for limit (then Plan sends it again), leaves it.
//
// A pool whose Service now wants other members than were sent is not held (Plan acts on what is wanted now; a
// member removed on its own, Sent.Partial, is the exception while what is wanted does not undo it), but
// while Octavia does not show the sent change yet the provider may still apply it: watched lists those pools, to be
// looked at again until Octavia shows it (then Plan sees what it undid) or its listing stood still for WatchLimit. Seen
// on 2025.1: a backend made unready, then ready again before Octavia listed its removal, looked in place to Raven,
// which stopped looking; the queued removal then took it out of the pool for good. Raven stopped looking after
// limit (SettleLimit, 20 s) of a listing that stood still before 2026-12-07: a removal the provider applies later
// than that has the same effect (one of two causes that fit that day's CI failure, a TCP pool with 4 of its 5
// backends; docs/operations.md).
func HoldSent(cur Current, want []Listener, sent map[string]Sent, now time.Time, limit time.Duration) (out Current, held, watched []string) {
	desired := desiredMembers(want, cur)
	out = cur
	for id, s := range sent {
		have := memberKey(cur.Members[id])
		w, wanted := desired[id]
		if have != s.Seen {
			s.Seen, s.Since = have, now
			sent[id] = s
		}
		switch {
		case !wanted || have == s.Want:
			delete(sent, id)
			continue
		case specKey(w) != s.Want && !partOf(s, have, w):
			if now.Sub(s.Since) >= WatchLimit {
				delete(sent, id)
				continue
			}
			watched = append(watched, id)
			continue
		case now.Sub(s.Since) >= limit:
			delete(sent, id)
			continue
		}
		if len(held) == 0 {
			out.Members = maps.Clone(cur.Members)
		}
		shown := make([]openstack.Member, 0, len(w))
		for _, m := range w {
			shown = append(shown, openstack.Member{Address: m.Address, ProtocolPort: m.ProtocolPort, SubnetID: m.SubnetID, ProvisioningStatus: "PENDING_UPDATE"})
		}
		out.Members[id] = shown
		held = append(held, id)
	}
	slices.Sort(held)
	slices.Sort(watched)
	return out, held, watched
}

// partOf reports that s is a step towards w (one member removed on its own) that w does not undo: the pool is
// held until Octavia lists it, as a batch update is.
func partOf(s Sent, have string, w []openstack.MemberSpec) bool {
	return s.Partial && towards(have, s.Want, specKey(w))
}

// towards reports that going from the members have to sent changes nothing that want undoes: what sent removes,
// want does not have, and what it adds, want has. All three are member keys (memberKey, specKey).
func towards(have, sent, want string) bool {
	h, s, w := splitKey(have), splitKey(sent), splitKey(want)
	for k := range h {
		if !s[k] && w[k] {
			return false
		}
	}
	for k := range s {
		if !h[k] && !w[k] {
			return false
		}
	}
	return true
}

func splitKey(key string) map[string]bool {
	out := map[string]bool{}
	if key == "" {
		return out
	}
	for _, k := range strings.Split(key, ",") {
		out[k] = true
	}
	return out
}

// desiredMembers is the members want asks of each pool of cur, matched as Plan matches them.
func desiredMembers(want []Listener, cur Current) map[string][]openstack.MemberSpec {
	wantBy := map[string]Listener{}
	for _, l := range want {
		wantBy[l.Key()] = l
	}
	out := map[string][]openstack.MemberSpec{}
	for _, p := range cur.Pools {
		l, ok := listenerOfPool(p, cur.Listeners)
		if w, wanted := wantBy[l.Protocol+":"+strconv.Itoa(l.ProtocolPort)]; ok && wanted {
			out[p.ID] = w.Members
		}
	}
	return out
}

// memberKey and specKey name a set of members by address and port, in the same form, so that what Octavia lists
// and what was sent compare.
func memberKey(ms []openstack.Member) string {
	return setKey(ms, memberAddrPort)
}

func specKey(ms []openstack.MemberSpec) string {
	return setKey(ms, specAddrPort)
}

// specsOf is members as the specs that make them, subnets included.
func specsOf(members []openstack.Member) []openstack.MemberSpec {
	out := make([]openstack.MemberSpec, 0, len(members))
	for _, m := range members {
		out = append(out, openstack.MemberSpec{Name: m.Name, Address: m.Address, ProtocolPort: m.ProtocolPort, SubnetID: m.SubnetID})
	}
	return out
}

// addrPort names a member by address and port: the form of every member key and set here.
func addrPort(addr string, port int) string { return addr + ":" + strconv.Itoa(port) }

func memberAddrPort(m openstack.Member) (string, int)   { return m.Address, m.ProtocolPort }
func specAddrPort(m openstack.MemberSpec) (string, int) { return m.Address, m.ProtocolPort }

// keySet is the set of address:port keys of ms.
func keySet[T any](ms []T, key func(T) (string, int)) map[string]bool {
	out := make(map[string]bool, len(ms))
	for _, m := range ms {
		out[addrPort(key(m))] = true
	}
	return out
}

func setKey[T any](ms []T, key func(T) (string, int)) string {
	keys := make([]string, 0, len(ms))
	for _, m := range ms {
		keys = append(keys, addrPort(key(m)))
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}
