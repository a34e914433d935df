package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Parked holds the keys of objects that wait for something that happens once (a start's listing), so that
// they come back once, when it has happened, instead of every second until then. The zero Parked is ready.
type Parked struct {
	mu   sync.Mutex
	done bool
	keys map[types.NamespacedName]struct{}
}

// Park keeps key until Release. It returns false once Release has run: the caller must not wait then.
func (p *Parked) Park(key types.NamespacedName) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return false
	}
	if p.keys == nil {
		p.keys = map[types.NamespacedName]struct{}{}
	}
	p.keys[key] = struct{}{}
	return true
}

// Release says the awaited thing has happened, and returns the keys parked until then. Park refuses every key
// after it.
func (p *Parked) Release() []types.NamespacedName {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	out := make([]types.NamespacedName, 0, len(p.keys))
	for k := range p.keys {
		out = append(out, k)
	}
	p.keys = nil
	return out
}
