// Package octavia is the Service layer above Octavia. desired.go, diff.go and provider.go are pure: what a
// Service should look like (one listener and one pool per Service port, members from ready EndpointSlice
// endpoints, options the provider accepts) and the smallest plan that takes a load balancer from what Octavia
// reports to that, each rule a table test. apply.go is the I/O: read a load balancer's graph, create one (with
// its graph where the provider allows), apply one step of a plan, delete. sent.go, deletes.go and backends.go are
// the memory a slow provider needs: the member changes sent that Octavia does not show yet, the load balancer
// deletes it has queued, and the members of every load balancer as last read (a pod's port outlives its
// membership).
package octavia
