// Package server is raven-node's CNI server: it answers the requests raven-cni forwards over the unix
// socket. ADD waits (bounded) in the node's pod cache for the port Raven announced for exactly this pod
// and this node, plugs it (package plug), adds it to the integration bridge (package ovs) and waits for
// ovn-controller's ovn-installed. On a nested node the port is a VLAN subport, plugged on the VM's bridge or,
// on the kernel-VLAN path, as a VLAN link on the VM's NIC with no OVS at all, and ready once its gateway
// answers ARP. DEL, GC and CHECK are purely local. Its only state is what OVS (or the pods' namespaces) and
// the API hold, so a restart loses nothing.
package server
