// Package ovsfake is a stateful in-memory ovs.Client for tests, with hooks to make ovn-controller slow,
// absent or broken.
package ovsfake
