package octavia

import (
	"sync"
	"time"
)

// DeleteResend is how long a load balancer or health monitor delete Octavia accepted is left to the provider before
// it is sent again. ovn-octavia-provider 8.0.0 reports ACTIVE for a load balancer after each request it handles,
// which turns one Octavia had marked PENDING_DELETE back to ACTIVE while the delete waits in the provider's queue: Raven sent
// the delete of one 100-member load balancer 111 times in 7 minutes (2026-11-28, make bench-services), and the
// provider then failed 110 of them, one after the other, while other load balancers waited behind them.
const DeleteResend = time.Minute

// Deletes remembers when Raven last sent each load balancer's or health monitor's delete. A nil *Deletes
// remembers nothing: every delete is sent.
type Deletes struct {
	mu   sync.Mutex
	sent map[string]time.Time
}

// Due tells whether a delete of the object id may be sent at now: none was sent within DeleteResend.
func (d *Deletes) Due(id string, now time.Time) bool {
	if d == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for obj, at := range d.sent {
		if now.Sub(at) >= DeleteResend {
			delete(d.sent, obj) // also bounds the map: entries live at most DeleteResend
		}
	}
	_, recent := d.sent[id]
	return !recent
}

// Sent records that the delete of the object id was sent at now.
func (d *Deletes) Sent(id string, now time.Time) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent == nil {
		d.sent = map[string]time.Time{}
	}
	d.sent[id] = now
}
