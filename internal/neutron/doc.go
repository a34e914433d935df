// Package neutron turns Raven's intent into idempotent Neutron operations: the cluster-wide objects
// (subnet pool, router, service network), one network and subnet per namespace, and one port per pod.
// It keeps an in-memory index of the cluster's tagged networks and ports, loaded with a few list calls at
// start and refreshed by every resync, so that a reconcile of an object already in sync makes no call.
package neutron
