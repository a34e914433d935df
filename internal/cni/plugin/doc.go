// Package plugin is raven-cni, the thin CNI plugin: it forwards each verb with its environment and
// configuration to raven-node over the node's unix socket, and prints the daemon's result or error.
// It keeps no state and knows nothing of Kubernetes, Neutron or OVS.
package plugin
