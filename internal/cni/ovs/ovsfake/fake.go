package ovsfake

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/raven-net/raven/internal/cni/ovs"
)

// OVS is an in-memory bridge. By default ovn-controller sets ovn-installed on every port as it is added.
type OVS struct {
	mu     sync.Mutex
	ifaces map[string]map[string]string
	// changed is closed and replaced on every change, to wake WaitInstalled.
	changed chan struct{}

	// NoOVNController leaves ovn-installed unset (the port bound elsewhere, or ovn-controller down).
	NoOVNController bool
	// AddPortErr, when set, is returned by AddPort.
	AddPortErr error
	// HealthErr, when set, is returned by Health.
	HealthErr error
	// Tags holds each port's VLAN tag as AddPort set it (0: none). Guarded by the fake's lock (TagOf).
	Tags map[string]int
}

// TagOf is the VLAN tag AddPort gave the port.
func (o *OVS) TagOf(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.Tags[name]
}

var _ ovs.Client = (*OVS)(nil)

// New returns an empty bridge.
func New() *OVS {
	return &OVS{ifaces: map[string]map[string]string{}, changed: make(chan struct{})}
}

func (o *OVS) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// AddPort implements ovs.Client.
func (o *OVS) AddPort(_ context.Context, name string, tag int, ids map[string]string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.AddPortErr != nil {
		return o.AddPortErr
	}
	if o.Tags == nil {
		o.Tags = map[string]int{}
	}
	o.Tags[name] = tag
	cur := maps.Clone(ids) // a new row: nothing of a former plug stays
	if cur == nil {
		cur = map[string]string{}
	}
	o.ifaces[name] = cur
	if !o.NoOVNController {
		cur[ovs.KeyOVNInstalled] = "true"
	}
	o.notify()
	return nil
}

// DelPort implements ovs.Client.
func (o *OVS) DelPort(_ context.Context, name string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.ifaces, name)
	o.notify()
	return nil
}

// Interface implements ovs.Client.
func (o *OVS) Interface(_ context.Context, name string) (ovs.Interface, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids, ok := o.ifaces[name]
	if !ok {
		return ovs.Interface{}, false, nil
	}
	return ovs.Interface{Name: name, ExternalIDs: maps.Clone(ids)}, true, nil
}

// Interfaces implements ovs.Client.
func (o *OVS) Interfaces(_ context.Context) ([]ovs.Interface, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []ovs.Interface
	for _, name := range slices.Sorted(maps.Keys(o.ifaces)) {
		out = append(out, ovs.Interface{Name: name, ExternalIDs: maps.Clone(o.ifaces[name])})
	}
	return out, nil
}

// WaitInstalled implements ovs.Client: the interface's row must carry plugged's external_ids too.
func (o *OVS) WaitInstalled(ctx context.Context, name string, plugged map[string]string) error {
	for {
		o.mu.Lock()
		ids, ok := o.ifaces[name]
		iface := ovs.Interface{Name: name, ExternalIDs: ids}
		done := ok && iface.Installed() && iface.Carries(plugged)
		ch := o.changed
		o.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interface %s: %w", name, ovs.ErrNotInstalled)
		case <-ch:
		}
	}
}

// Health implements ovs.Client.
func (o *OVS) Health(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.HealthErr
}

// Install sets ovn-installed on an existing interface, as ovn-controller does once its flows are in.
func (o *OVS) Install(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ids, ok := o.ifaces[name]; ok {
		ids[ovs.KeyOVNInstalled] = "true"
		o.notify()
	}
}

// Set replaces the whole state of an interface (a port left from before a restart).
func (o *OVS) Set(name string, ids map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ifaces[name] = maps.Clone(ids)
	o.notify()
}

// Names lists the interfaces on the bridge.
func (o *OVS) Names() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.ifaces))
}
