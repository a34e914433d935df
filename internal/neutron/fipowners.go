package neutron

import (
	"context"
	"sync"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// fipOwners knows which Services hold floating IPs, from a cluster-wide listing and what Raven did since, so
// that a Service that wants none costs no request: with thousands of ClusterIP Services, a listing per Service
// at every start would dominate it.
type fipOwners struct {
	mu sync.Mutex
	// known: a listing was recorded; until then every Service's floating IPs are listed.
	known bool
	uids  map[string]bool
	// touched is when Raven last made or released a Service's floating IP: a listing begun before that does
	// not overrule it.
	touched map[string]time.Time
}

// NoteFloatingIPs records a listing of the cluster's Service floating IPs, begun at started.
func (m *Manager) NoteFloatingIPs(fips []openstack.FloatingIP, started time.Time) {
	f := &m.fips
	f.mu.Lock()
	defer f.mu.Unlock()
	uids := map[string]bool{}
	for _, fip := range fips {
		if o, _ := ownership.Parse(fip.Tags); o.UID != "" {
			uids[o.UID] = true
		}
	}
	for uid, at := range f.touched {
		if at.After(started) {
			uids[uid] = f.uids[uid]
		} else {
			delete(f.touched, uid)
		}
	}
	f.uids, f.known = uids, true
}

// LoadFloatingIPs lists the cluster's Service floating IPs and records them (one paginated request).
func (m *Manager) LoadFloatingIPs(ctx context.Context) error {
	started := time.Now()
	fips, err := m.N.ListFloatingIPs(ctx, openstack.Filter{Tags: ownership.Selector(m.C.ID, ownership.KindService)})
	if err != nil {
		return err
	}
	m.NoteFloatingIPs(fips, started)
	return nil
}

// holdsNone says the Service surely holds no floating IP.
func (f *fipOwners) holdsNone(uid string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known && uid != "" && !f.uids[uid]
}

func (f *fipOwners) set(uid string, holds bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.uids == nil {
		f.uids = map[string]bool{}
	}
	if f.touched == nil {
		f.touched = map[string]time.Time{}
	}
	f.uids[uid] = holds
	f.touched[uid] = time.Now()
}
