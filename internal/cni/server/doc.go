// Package server is raven-node's CNI server: it answers the requests raven-cni forwards over the unix
// socket. ADD waits (bounded) in the node's pod cache for the port Raven announced for exactly this pod
// and this node, plugs it (package plug), adds it to the integration bridge (package ovs) and waits for
// ovn-controller's ovn-installed. DEL, GC and CHECK are purely local. Its only state is what OVS and the
// API hold, so a restart loses nothing.
package server
