package annotations

// Annotation keys. The kuryr.org names are the contract CNI plugins and users already know.
const (
	// Pod: the Neutron port of the pod, and the subnet it is on.
	PodPort   = "kuryr.org/neutron-port"
	PodSubnet = "kuryr.org/neutron-subnet"
	// Namespace: the namespace's network and subnet.
	NamespaceNetwork = "kuryr.org/neutron-network"
	NamespaceSubnet  = "kuryr.org/neutron-subnet"
	// Service: the VIP (address, port, load balancer, floating IP) and the pools.
	ServiceVIP   = "kuryr.org/neutron-vip"
	ServicePools = "kuryr.org/neutron-pool"
)

// PodPortCheck is raven-node's request to the controller: the pod's interface plugged for this port (the value,
// a port ID) lost its OVN binding, so check now, with one GET, whether Neutron still has the port. The
// controller makes a gone port again as its resync would, and removes the annotation either way.
const PodPortCheck = "raven.io/port-check"

// Finalizers Raven sets so that it can clean up OpenStack before the object goes away.
const (
	NamespaceFinalizer = "raven.openstack.org/network"
	ServiceFinalizer   = "raven.openstack.org/load-balancer"
)

// FieldManager is the name Raven's writes carry in managedFields.
const FieldManager = "raven"
