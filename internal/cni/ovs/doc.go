// Package ovs is the daemon's only way to Open vSwitch: a narrow, context-first Client over ovs-vsctl and
// ovs-appctl, and the external_ids keys Raven writes on the Interfaces it plugs. Package ovsfake holds a
// stateful in-memory Client for tests.
package ovs
