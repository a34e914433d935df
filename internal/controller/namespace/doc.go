// Package namespace reconciles Namespaces into Neutron networks: one network per namespace with one
// subnet from the cluster's pod subnet pool, attached to the cluster router, announced in the
// kuryr.org/neutron-network and kuryr.org/neutron-subnet annotations. A finalizer holds a deleted
// namespace until its ports are gone and its router interface, subnet and network are removed.
package namespace
