package ovsfake

import (
	"maps"
	"slices"

	"github.com/raven-net/raven/internal/cni/ovs"
)

var _ ovs.Monitor = (*OVS)(nil)

// Snapshot implements ovs.Monitor: the bridge as it is now, and a channel closed at its next change.
func (o *OVS) Snapshot() ([]ovs.Interface, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]ovs.Interface, 0, len(o.ifaces))
	for _, name := range slices.Sorted(maps.Keys(o.ifaces)) {
		out = append(out, ovs.Interface{Name: name, ExternalIDs: maps.Clone(o.ifaces[name])})
	}
	return out, o.changed
}

// Uninstall removes ovn-installed from an interface, as ovn-controller does when it releases the interface's
// logical port (the port deleted in Neutron, or bound to another chassis).
func (o *OVS) Uninstall(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ids, ok := o.ifaces[name]; ok {
		delete(ids, ovs.KeyOVNInstalled)
		o.notify()
	}
}
