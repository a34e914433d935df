// Package octavia is the Service layer above Octavia. desired.go, diff.go and provider.go are pure: what a
// Service should look like (one listener and one pool per Service port, members from ready EndpointSlice
// endpoints, options the provider accepts) and the smallest plan that takes a load balancer from what Octavia
// reports to that, each rule a table test. apply.go is the I/O: read a load balancer's graph, create one (with
// its graph where the provider allows), apply one step of a plan, delete.
package octavia
