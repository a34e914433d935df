package ovs

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// SetExternalIDs implements Client: one ovs-vsctl transaction that sets the keys of set and removes those of
// unset. Like AddPort it does not wait for ovs-vswitchd: the caller waits for what ovn-controller writes back.
func (v *VSCtl) SetExternalIDs(ctx context.Context, name string, set map[string]string, unset ...string) error {
	args := []string{"--no-wait", "--", "set", "Interface", name}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		args = append(args, fmt.Sprintf("external_ids:%s=%s", k, quote(set[k])))
	}
	for _, k := range unset {
		args = append(args, "--", "remove", "Interface", name, "external_ids", quote(k))
	}
	if _, err := v.vsctl(ctx, args...); err != nil {
		return fmt.Errorf("setting external_ids of interface %s: %w", name, err)
	}
	return nil
}
