package ovs

// Monitor shows the Interface table as raven-node's one monitor of it last saw it, without asking the
// database: what follows the bindings of many interfaces reads it on every change for free.
type Monitor interface {
	// Snapshot returns every interface the monitor shows (of every bridge), and a channel closed at the
	// monitor's next change.
	Snapshot() ([]Interface, <-chan struct{})
}

var _ Monitor = (*Watch)(nil)

// Snapshot implements Monitor. Before the monitor's first update it shows no interface.
func (w *Watch) Snapshot() ([]Interface, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Interface, 0, len(w.rows))
	for name, ids := range w.rows {
		out = append(out, Interface{Name: name, ExternalIDs: ids})
	}
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return out, w.changed
}
