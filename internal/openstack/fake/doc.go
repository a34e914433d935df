// Package fake is a stateful, in-memory Neutron and Octavia for unit tests: it keeps the objects, hands out
// addresses, filters by tags like the real services, counts calls, and fails chosen operations on demand.
// Tests assert the end state, not the sequence of calls.
//
// Indexed (Neutron.Index, Octavia.Index) and with UUID-shaped IDs, the same stores hold the objects of the
// simulated cloud of internal/openstack/sim: lists come in pages (the *Page methods), and lists by network,
// device, owner, address or tag, gets and creates do not look at every object.
package fake
