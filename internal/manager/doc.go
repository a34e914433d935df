// Package manager wires Raven together: it connects to Kubernetes and OpenStack, builds the
// controller-runtime Manager (caches, leader election, metrics, health), and registers the
// reconcilers the configuration enables along with the start-up and resync loop.
package manager
