// Package wire is what raven-cni and raven-node say to each other over the unix socket: the network
// configuration the plugin reads, the request that carries one CNI invocation, and the response.
package wire
