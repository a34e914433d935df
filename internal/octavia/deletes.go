package octavia

import (
	"sync"
	"time"
)

// DeleteResend is how long a load balancer or health monitor delete Octavia accepted is left to the provider,
// without progress, before it is sent again. ovn-octavia-provider 8.0.0 reports ACTIVE for a load balancer after
// each request it handles, which turns one Octavia had marked PENDING_DELETE back to ACTIVE while the delete waits
// in the provider's queue: Raven sent the delete of one 100-member load balancer 111 times in 7 minutes
// (2026-11-28, make bench-services), and the provider then failed 110 of them, one after the other, while other
// load balancers waited behind them. The delete itself removes the members one at a time, each with a status
// report (2.4 s apart in bench-services at 14:57), so that a 100-member load balancer takes minutes: while its
// members go, the delete is making progress and is not sent again.
const DeleteResend = time.Minute

// Deletes remembers when Raven last sent each load balancer's or health monitor's delete, or last saw it make
// progress. A nil *Deletes remembers nothing: every delete is sent.
type Deletes struct {
	mu   sync.Mutex
	sent map[string]deleteSent
}

type deleteSent struct {
	at       time.Time
	progress string
}

// Due tells whether a delete of the object id may be sent at now: none was sent, and no progress was seen, within
// DeleteResend. progress describes what the provider has left to delete (for a load balancer, how many members
// Octavia lists); a change from the last look is progress. "" says nothing.
func (d *Deletes) Due(id string, now time.Time, progress string) bool {
	if d == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if rec, ok := d.sent[id]; ok && rec.progress != progress {
		d.sent[id] = deleteSent{at: now, progress: progress}
	}
	for obj, rec := range d.sent {
		if now.Sub(rec.at) >= DeleteResend {
			delete(d.sent, obj) // also bounds the map: entries live at most DeleteResend after the last progress
		}
	}
	_, recent := d.sent[id]
	return !recent
}

// Sent records that the delete of the object id was sent at now, with what was left then (see Due).
func (d *Deletes) Sent(id string, now time.Time, progress string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent == nil {
		d.sent = map[string]deleteSent{}
	}
	d.sent[id] = deleteSent{at: now, progress: progress}
}
