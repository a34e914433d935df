// Package daemon wires raven-node: its flags, the installation of raven-cni and its conflist on the
// node, the node's pod informer, the event recorder, the OVS client and the CNI server on its socket.
package daemon
