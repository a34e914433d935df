package octavia

import (
	"cmp"
	"slices"
	"strings"
	"sync"
)

// Backends is the addresses of the members of Raven's load balancers as Octavia last listed them, by Service.
// A pod's port must outlive its membership: the ovn provider removes a member's health-check mapping only
// while the member's logical switch port exists (ovn-octavia-provider 8.0.0 logs "Logical_Switch_Port not
// found" and keeps the mapping, and with it the subnet's ovn-lb-hm port, for good), and an address released
// while it is still a member may go to another pod that would then get the Service's traffic.
// It also keeps, for the NetworkPolicy controller, what each Service's load balancer serves as last seen: its
// members by listener (a client reaches every one of them through the VIP until Octavia drops it) and the
// floating IPs Raven made for it; Changed says when either changes.
// The zero value is ready to use; a nil *Backends holds nothing.
type Backends struct {
	mu   sync.Mutex
	by   map[string]map[string]struct{} // Service → its members' addresses
	refs map[string]int                 // address → Services whose members have it
	// members and fips are, by Service, its members by listener and its floating IPs, sorted.
	members map[string][]ListenerMember
	fips    map[string][]string
	changed chan struct{}
}

// ListenerMember is one member of a load balancer and the listener that sends to it.
type ListenerMember struct {
	// Protocol is the listener's, lower case ("tcp", "udp", "sctp"), and Port its port (the Service port).
	Protocol string
	Port     int
	// Address and MemberPort are where the member receives (the backend and its target port).
	Address    string
	MemberPort int
}

// ListenerMembers are the members of cur that a listener sends to, sorted (PENDING_* ones included; a pool
// without a listener sends nothing).
func ListenerMembers(cur Current) []ListenerMember {
	var out []ListenerMember
	for _, p := range cur.Pools {
		l, ok := listenerOfPool(p, cur.Listeners)
		if !ok {
			continue
		}
		for _, m := range cur.Members[p.ID] {
			out = append(out, ListenerMember{Protocol: strings.ToLower(l.Protocol), Port: l.ProtocolPort, Address: m.Address, MemberPort: m.ProtocolPort})
		}
	}
	slices.SortFunc(out, compareMembers)
	return slices.Compact(out)
}

func compareMembers(a, b ListenerMember) int {
	return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Address, b.Address), cmp.Compare(a.MemberPort, b.MemberPort))
}

// Observe records the members of a Service's load balancer, PENDING_* ones included, as read in cur.
func (b *Backends) Observe(service string, cur Current) {
	if b == nil {
		return
	}
	now := map[string]struct{}{}
	for _, ms := range cur.Members {
		for _, m := range ms {
			now[m.Address] = struct{}{}
		}
	}
	members := ListenerMembers(cur)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(service)
	b.setMembers(service, members)
	if len(now) == 0 {
		return
	}
	if b.by == nil {
		b.by, b.refs = map[string]map[string]struct{}{}, map[string]int{}
	}
	b.by[service] = now
	for a := range now {
		b.refs[a]++
	}
}

// ObserveFloatingIPs records the floating IPs Raven made for a Service's load balancer (none: nil).
func (b *Backends) ObserveFloatingIPs(service string, addrs []string) {
	if b == nil {
		return
	}
	addrs = slices.Compact(slices.Sorted(slices.Values(addrs)))
	b.mu.Lock()
	defer b.mu.Unlock()
	if slices.Equal(b.fips[service], addrs) {
		return
	}
	if len(addrs) == 0 {
		delete(b.fips, service)
	} else {
		if b.fips == nil {
			b.fips = map[string][]string{}
		}
		b.fips[service] = addrs
	}
	b.notify()
}

// Forget drops a Service whose load balancer is gone.
func (b *Backends) Forget(service string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(service)
	b.setMembers(service, nil)
	if _, ok := b.fips[service]; ok {
		delete(b.fips, service)
		b.notify()
	}
}

func (b *Backends) drop(service string) {
	for a := range b.by[service] {
		if b.refs[a]--; b.refs[a] <= 0 {
			delete(b.refs, a)
		}
	}
	delete(b.by, service)
}

// setMembers records a Service's members by listener, and says so on Changed when they changed.
func (b *Backends) setMembers(service string, members []ListenerMember) {
	if slices.Equal(b.members[service], members) {
		return
	}
	if len(members) == 0 {
		delete(b.members, service)
	} else {
		if b.members == nil {
			b.members = map[string][]ListenerMember{}
		}
		b.members[service] = members
	}
	b.notify()
}

// notify says on Changed, without waiting, that what a load balancer serves changed.
func (b *Backends) notify() {
	if b.changed == nil {
		return // nobody listens
	}
	select {
	case b.changed <- struct{}{}:
	default: // a change is already waiting to be read: it covers this one
	}
}

// Changed receives a value after what a load balancer serves (its members by listener, its floating IPs) changed;
// changes made while one waits to be read are folded into it. For one reader; nil on a nil *Backends.
func (b *Backends) Changed() <-chan struct{} {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{}, 1)
	}
	return b.changed
}

// Members are the members of the Service's load balancer by listener, as last listed (a copy).
func (b *Backends) Members(service string) []ListenerMember {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.members[service])
}

// FloatingIPs are the floating IPs Raven made for the Service's load balancer, as last seen (a copy).
func (b *Backends) FloatingIPs(service string) []string {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.fips[service])
}

// Holds says whether addr is a member of one of the load balancers, as last listed.
func (b *Backends) Holds(addr string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refs[addr] > 0
}
