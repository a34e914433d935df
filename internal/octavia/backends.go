package octavia

import "sync"

// Backends is the addresses of the members of Raven's load balancers as Octavia last listed them, by Service.
// A pod's port must outlive its membership: the ovn provider removes a member's health-check mapping only
// while the member's logical switch port exists (ovn-octavia-provider 8.0.0 logs "Logical_Switch_Port not
// found" and keeps the mapping, and with it the subnet's ovn-lb-hm port, for good), and an address released
// while it is still a member may go to another pod that would then get the Service's traffic.
// The zero value is ready to use; a nil *Backends holds nothing.
type Backends struct {
	mu   sync.Mutex
	by   map[string]map[string]struct{} // Service → its members' addresses
	refs map[string]int                 // address → Services whose members have it
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
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(service)
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

// Forget drops a Service whose load balancer is gone.
func (b *Backends) Forget(service string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(service)
}

func (b *Backends) drop(service string) {
	for a := range b.by[service] {
		if b.refs[a]--; b.refs[a] <= 0 {
			delete(b.refs, a)
		}
	}
	delete(b.by, service)
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
