package pod

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Backends says whether an address is still a member of one of Raven's load balancers.
type Backends interface {
	Holds(addr string) bool
}

// BackendHold is how long the port of a pod that is gone is kept while its address is still a load balancer
// member. The provider removes members one request at a time: on ovn-octavia-provider 8.0.0 with a health
// monitor, a Deployment scaled from 10 to 1 had its last member removed 45 s after the first.
const BackendHold = 2 * time.Minute

// holdPoll is how often a held port is looked at again.
const holdPoll = time.Second

// holding says whether the ports of the pod with this UID must wait before they are released: an address of
// theirs is still a member of a load balancer (see octavia.Backends for why). After BackendHold it lets
// them go, and says so.
func (r *Reconciler) holding(ctx context.Context, uid string) bool {
	if r.Backends == nil {
		return false
	}
	log := klog.FromContext(ctx)
	now := time.Now()
	ports := r.Neutron.X.PortsOf(uid)
	for _, p := range ports {
		for _, ip := range p.FixedIPs {
			if !r.Backends.Holds(ip.IPAddress) {
				continue
			}
			waited := now.Sub(r.held.since(p.ID, now))
			if waited < BackendHold {
				log.V(3).Info("Keeping the port of a pod while its address is a load balancer member", "port", p.ID, "ip", ip.IPAddress)
				return true
			}
			log.Info("Releasing a port whose address is still a load balancer member", "port", p.ID, "ip", ip.IPAddress, "waited", waited.Round(time.Second))
		}
	}
	for _, p := range ports {
		r.held.forget(p.ID)
	}
	return false
}

// heldPorts holds when each held port was first found held.
type heldPorts struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (h *heldPorts) since(id string, now time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[string]time.Time{}
	}
	for k, t := range h.at { // released by another path (the sweep, a namespace's teardown)
		if now.Sub(t) > 10*BackendHold {
			delete(h.at, k)
		}
	}
	t, ok := h.at[id]
	if !ok {
		h.at[id], t = now, now
	}
	return t
}

func (h *heldPorts) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.at, id)
}
