// Package orphan runs Raven's start-up and resync loop. At start it ensures the cluster-wide Neutron
// objects and loads the index, then opens the gate for the reconcilers. Every resync period it lists
// the cluster's tagged objects again, sends the owners of objects that vanished out of band back to
// their reconcilers, and deletes objects whose Kubernetes owner no longer exists once they are older
// than the grace period. Objects without this cluster's tag are never listed, so never touched.
package orphan
