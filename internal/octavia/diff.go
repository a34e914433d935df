package octavia

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

// StepKind is one kind of change to a load balancer.
type StepKind string

// The changes a plan is made of, in the order they must run.
const (
	DeletePool     StepKind = "DeletePool"
	DeleteListener StepKind = "DeleteListener"
	CreateListener StepKind = "CreateListener"
	CreatePool     StepKind = "CreatePool"
	ReplaceMembers StepKind = "ReplaceMembers"
	DeleteMember   StepKind = "DeleteMember"
	// AddMembers is a batch update that keeps every member the pool has and adds the new ones: it removes none.
	AddMembers StepKind = "AddMembers"
	// Health monitors come last: a port serves before its members are probed.
	CreateMonitor StepKind = "CreateMonitor"
	DeleteMonitor StepKind = "DeleteMonitor"
)

// Step is one Octavia write. Octavia locks a load balancer while it applies a change, so a plan runs
// one step at a time, each after the load balancer is ACTIVE again.
type Step struct {
	Kind     StepKind
	ID       string // the pool, listener or monitor to delete, the listener of a new pool, the pool of members or of a new monitor
	Listener Listener
	Member   openstack.Member // DeleteMember: the member to remove from pool ID
	// Add: AddMembers, the new members (Apply sends them with every member the pool has); Listener.Members is
	// what the Service wants.
	Add []openstack.MemberSpec
}

// Current is what Octavia reports for a load balancer.
type Current struct {
	Listeners []openstack.Listener
	Pools     []openstack.Pool
	Members   map[string][]openstack.Member      // by pool ID
	Monitors  map[string]openstack.MonitorStatus // by pool ID
}

// Plan returns the steps that take cur to want, deletions first; it is empty when they match.
func Plan(want []Listener, cur Current) []Step {
	wantBy := map[string]Listener{}
	for _, l := range want {
		wantBy[l.Key()] = l
	}
	listenerBy := map[string]openstack.Listener{}
	for _, l := range cur.Listeners {
		listenerBy[l.Protocol+":"+strconv.Itoa(l.ProtocolPort)] = l
	}
	poolOf := map[string]openstack.Pool{} // by listener ID
	var steps, monitors []Step
	for _, p := range cur.Pools {
		l, ok := listenerOfPool(p, cur.Listeners)
		w, wanted := wantBy[l.Protocol+":"+strconv.Itoa(l.ProtocolPort)]
		if !ok || !wanted || p.LBAlgorithm != w.Algorithm || p.Protocol != w.Protocol {
			steps = append(steps, Step{Kind: DeletePool, ID: p.ID})
			continue
		}
		poolOf[l.ID] = p
	}
	for key, l := range listenerBy {
		if _, ok := wantBy[key]; !ok {
			steps = append(steps, Step{Kind: DeleteListener, ID: l.ID})
		}
	}
	for _, w := range want {
		l, ok := listenerBy[w.Key()]
		if !ok {
			steps = append(steps, Step{Kind: CreateListener, Listener: w})
			continue
		}
		p, ok := poolOf[l.ID]
		if !ok {
			steps = append(steps, Step{Kind: CreatePool, ID: l.ID, Listener: w})
			continue
		}
		step, monitor := planPool(w, p, cur.Members[p.ID])
		steps = append(steps, step...)
		monitors = append(monitors, monitor...)
	}
	return append(steps, monitors...)
}

// planPool is what an existing pool needs: its members, and its monitor (which comes after every other step).
func planPool(w Listener, p openstack.Pool, members []openstack.Member) (steps, monitors []Step) {
	if !settling(members) && !sameMembers(members, w.Members) {
		if w.MonitorSlowsMembers && p.MonitorID != "" && memberChanges(members, w.Members) >= monitorDropAt {
			// The monitor goes first; the members follow, then the monitor again (plans to come).
			return []Step{{Kind: DeleteMonitor, ID: p.MonitorID, Listener: w}}, nil
		}
		if s, ok := oneChange(w, p.ID, members); ok {
			steps = append(steps, s)
		} else {
			steps = append(steps, Step{Kind: ReplaceMembers, ID: p.ID, Listener: w})
		}
	}
	switch {
	case w.Monitor != nil && p.MonitorID == "" && !settling(members):
		// The monitor waits until the provider has made the pool's members: 8.0.0 puts the load balancer back
		// to ACTIVE while it still makes them one by one, and each member it makes under a monitor also gets a
		// health-check mapping and, once probed, a status event of its own.
		monitors = append(monitors, Step{Kind: CreateMonitor, ID: p.ID, Listener: w})
	case w.Monitor == nil && p.MonitorID != "":
		monitors = append(monitors, Step{Kind: DeleteMonitor, ID: p.MonitorID, Listener: w})
	}
	return steps, monitors
}

// oneByOneMax is how many members that go are removed before the members that come are added. A backend that
// stops being ready leaves first; when more go at once (a rolling update's old pods), the new members are added
// before the rest of the removals, so that new backends are not held behind the old ones' removal.
const oneByOneMax = 2

// oneChange is the member change of a pool to make before anything else on a provider whose batch update is slow
// to remove (Provider.OneByOne): a member that goes, deleted on its own, or the new members added in a batch that
// removes none. `make bench-provider` (2026-11-28, 8.0.0): a member removed in a batch update left OVN NB after
// 8.7-10.3 s in a pool of 10 that stay and 44.0-44.4 s in a pool of 50, deleted on its own after 0.2 s; a member added in a
// batch was in NB after 0.3 s, and the provider idle again after 1.4-1.7 s, with 10 or 50 that stay. Up to
// oneByOneMax removals come first, then the additions, then the other removals one by one while they are no more
// than the members that stay; a pool that loses more gets one batch.
func oneChange(w Listener, pool string, members []openstack.Member) (Step, bool) {
	if !w.OneByOne {
		return Step{}, false
	}
	gone, added := memberDiff(members, w.Members)
	staying := len(members) - len(gone)
	switch {
	case len(gone) > 0 && (len(gone) <= oneByOneMax || len(added) == 0) && len(gone) <= staying:
		m := slices.MinFunc(gone, func(a, b openstack.Member) int {
			return strings.Compare(addrPort(a.Address, a.ProtocolPort), addrPort(b.Address, b.ProtocolPort))
		})
		return Step{Kind: DeleteMember, ID: pool, Listener: w, Member: m}, true
	case len(added) > 0 && len(gone) > 0 && len(gone) <= staying:
		return Step{Kind: AddMembers, ID: pool, Listener: w, Add: added}, true
	}
	return Step{}, false
}

// settling reports that the provider still applies an earlier member change to a pool: a member of it is
// PENDING_*. The pool's members are then left alone until it is done. ovn-octavia-provider 8.0.0 (2025.1) puts a
// load balancer back to ACTIVE as soon as it has handled the first request of a batch member update, the members
// that stay, while the member it removes waits in its queue, PENDING_DELETE, behind work for other load balancers;
// each batch update sent meanwhile queued the same delete again. Seen on the local stack: an unready backend sent
// every second or two for 30 s, and left the rotation after 34 s; its member then stayed listed while it was gone
// from OVN, so that the backend, ready again, was never added back.
func settling(members []openstack.Member) bool {
	return slices.ContainsFunc(members, func(m openstack.Member) bool {
		return strings.HasPrefix(m.ProvisioningStatus, "PENDING_")
	})
}

// Settling lists the pools of cur whose members the provider is still changing (see settling), sorted: the
// caller looks again shortly rather than at the next resync.
func Settling(cur Current) []string {
	var out []string
	for poolID, members := range cur.Members {
		if settling(members) {
			out = append(out, poolID)
		}
	}
	slices.Sort(out)
	return out
}

// SettleLimit is how long a pool may stay settling without progress before its change is sent again: a provider
// that lost a request leaves its member PENDING_* for good (ovn-octavia-provider 3.0.0 after Octavia was stopped
// and started: a member PENDING_CREATE for 4 min, until the test gave up), and waiting for it would hold the pool.
// A provider that works through a long queue is not resent to: 8.0.0 removed 9 members of a monitored pool one
// about every 5 s, and each resend queued the same work again.
const SettleLimit = 20 * time.Second

// Settle is when a pool's wait for the provider began, and what was pending then.
type Settle struct {
	Since   time.Time
	Pending string // the pending members and their states: a change means progress
}

// pendingOf describes a pool's pending members, in a form that changes when the provider makes progress.
func pendingOf(members []openstack.Member) string {
	var out []string
	for _, m := range members {
		if strings.HasPrefix(m.ProvisioningStatus, "PENDING_") {
			out = append(out, m.ID+"="+m.ProvisioningStatus)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// ExpireSettling returns cur with the members of each pool that has been settling for longer than limit without
// progress shown as unfinished (see unfinished), so that Plan sends its change again; the pool's wait then starts
// over, so that a change is sent again at most once per limit. want is what the Service asks of its pools. since
// holds the waits of cur's pools, and of no other load balancer's: it is updated (a pool whose pending members
// changed starts a new wait; pools no longer settling leave it).
func ExpireSettling(cur Current, want []Listener, since map[string]Settle, now time.Time, limit time.Duration) Current {
	settlingNow := Settling(cur)
	for id := range since {
		if !slices.Contains(settlingNow, id) {
			delete(since, id)
		}
	}
	var desired map[string][]openstack.MemberSpec
	out, cloned := cur, false
	for _, id := range settlingNow {
		pending := pendingOf(cur.Members[id])
		first, ok := since[id]
		if !ok || first.Pending != pending {
			since[id] = Settle{Since: now, Pending: pending}
			continue
		}
		if now.Sub(first.Since) < limit {
			continue
		}
		since[id] = Settle{Since: now, Pending: pending}
		if !cloned {
			out.Members, cloned = maps.Clone(cur.Members), true
			desired = desiredMembers(want, cur)
		}
		out.Members[id] = unfinished(cur.Members[id], desired[id])
	}
	return out
}

// unfinished shows the members of a pool whose member change the provider left unfinished as Plan must see them to
// send that change again: a pending member the Service wants is shown gone, so that Plan sends it again (in a batch
// that keeps the pool's members), and every other member settled, so that Plan removes again one it does not want.
// Shown settled, a wanted member still listed PENDING_* looked in place, and was never sent again: a member
// PENDING_CREATE that the provider never made, or PENDING_DELETE after a removal that the Service undid (a backend
// unready, then ready again) while the provider took it out of the datapath without Octavia listing it gone.
func unfinished(members []openstack.Member, want []openstack.MemberSpec) []openstack.Member {
	wanted := keySet(want, specAddrPort)
	out := make([]openstack.Member, 0, len(members))
	for _, m := range members {
		if strings.HasPrefix(m.ProvisioningStatus, "PENDING_") && wanted[addrPort(m.Address, m.ProtocolPort)] {
			continue
		}
		m.ProvisioningStatus = "ACTIVE"
		out = append(out, m)
	}
	return out
}

// monitorDropAt is how many member changes make a slow provider's monitor go for the update: dropping and
// making it again costs the provider one pass over the members, each change under the monitor one pass.
const monitorDropAt = 3

// memberChanges is how many members an update adds or removes.
func memberChanges(cur []openstack.Member, want []openstack.MemberSpec) int {
	gone, added := memberDiff(cur, want)
	return len(gone) + len(added)
}

// memberDiff is what going from the members cur to want changes, by address and port: the members of cur that
// want does not have, in cur's order, and those of want that cur does not have, in want's order.
func memberDiff(cur []openstack.Member, want []openstack.MemberSpec) (gone []openstack.Member, added []openstack.MemberSpec) {
	wanted, have := keySet(want, specAddrPort), keySet(cur, memberAddrPort)
	for _, m := range cur {
		if !wanted[addrPort(m.Address, m.ProtocolPort)] {
			gone = append(gone, m)
		}
	}
	for _, m := range want {
		if !have[addrPort(m.Address, m.ProtocolPort)] {
			added = append(added, m)
		}
	}
	return gone, added
}

// FailedMonitors describes the health monitors the provider could not set up (provisioning status ERROR),
// sorted: their pools balance without probing.
func FailedMonitors(cur Current) []string {
	var out []string
	for poolID, m := range cur.Monitors {
		if m.ProvisioningStatus == "ERROR" {
			out = append(out, "health monitor "+m.ID+" of pool "+poolID)
		}
	}
	slices.Sort(out)
	return out
}

func listenerOfPool(p openstack.Pool, ls []openstack.Listener) (openstack.Listener, bool) {
	for _, l := range ls {
		if l.ID == p.ListenerID || (l.DefaultPoolID != "" && l.DefaultPoolID == p.ID) {
			return l, true
		}
	}
	return openstack.Listener{}, false
}

func sameMembers(cur []openstack.Member, want []openstack.MemberSpec) bool {
	if len(cur) != len(want) {
		return false
	}
	// Octavia's status tree, read once per load balancer, names no member's subnet; an address belongs to
	// one subnet, so address and port identify a member. A subnet Octavia does name must match.
	withSubnet := slices.ContainsFunc(cur, func(m openstack.Member) bool { return m.SubnetID != "" })
	key := func(addr string, port int, subnet string) string {
		k := addr + ":" + strconv.Itoa(port)
		if withSubnet {
			k += "@" + subnet
		}
		return k
	}
	a := make([]string, 0, len(cur))
	for _, m := range cur {
		a = append(a, key(m.Address, m.ProtocolPort, m.SubnetID))
	}
	b := make([]string, 0, len(want))
	for _, m := range want {
		b = append(b, key(m.Address, m.ProtocolPort, m.SubnetID))
	}
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Graph is want as the listeners of a fully populated load balancer create, every object tagged with tags.
func Graph(want []Listener, tags []string) []openstack.ListenerGraph {
	out := make([]openstack.ListenerGraph, 0, len(want))
	for _, w := range want {
		out = append(out, openstack.ListenerGraph{
			Listener: openstack.ListenerSpec{Name: w.Name, Protocol: w.Protocol, ProtocolPort: w.Port, Tags: tags},
			Pool:     openstack.PoolSpec{Name: w.PoolName(), Protocol: w.Protocol, LBAlgorithm: w.Algorithm, Tags: tags},
			Members:  w.Members,
		})
	}
	return out
}
