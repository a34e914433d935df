// Package fake is a stateful, in-memory Neutron and Octavia for unit tests: it keeps the objects, hands out
// addresses, filters by tags like the real services, counts calls, and fails chosen operations on demand.
// Tests assert the end state, not the sequence of calls.
package fake
