package ovsfake

import (
	"context"
	"fmt"

	"github.com/raven-net/raven/internal/cni/ovs"
)

// SetExternalIDs implements ovs.Client. Unless NoOVNController, ovn-controller claims the port the row then
// names at once: ovn-installed is set again, as on AddPort.
func (o *OVS) SetExternalIDs(_ context.Context, name string, set map[string]string, unset ...string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids, ok := o.ifaces[name]
	if !ok {
		return fmt.Errorf("setting external_ids of interface %s: no row %q in table Interface", name, name)
	}
	for k, v := range set {
		ids[k] = v
	}
	for _, k := range unset {
		delete(ids, k)
	}
	if !o.NoOVNController && ids[ovs.KeyIfaceID] != "" {
		ids[ovs.KeyOVNInstalled] = "true"
	}
	o.notify()
	return nil
}
