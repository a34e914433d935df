// Package cni holds the node side of Raven: the CNI plugin raven-cni and the per-node daemon raven-node
// that plugs each pod's Neutron port into the pod's network namespace on Open vSwitch under OVN.
//
// The plugin (package plugin) is a thin shim: it forwards every CNI verb over a root-only unix socket to
// the daemon (package server), which owns the pod informer, the OVS work (package ovs) and the namespace
// work (package plug). The wire format between the two is in package wire; package daemon wires the
// daemon's flags to a running server.
package cni
