// Package octavia computes what a Service should look like in Octavia (one listener and one pool per
// Service port, members from ready EndpointSlice endpoints) and the smallest plan that takes the load
// balancer from what Octavia reports to that. It is pure: no I/O, so every rule is a table test.
package octavia
