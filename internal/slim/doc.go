// Package slim holds the transforms of Raven's caches: each keeps only what Raven reads of a pod, node or
// EndpointSlice, and one copy of the values that many cached objects repeat (a namespace's name and subnet, a
// node's name, a ReplicaSet's labels and container ports), so that a cached pod costs about what its own
// fields cost.
package slim
