// Package slim trims the objects Raven's caches keep to what Raven reads, and keeps one copy of the values
// that many cached objects repeat (a namespace's name and subnet, a node's name, a ReplicaSet's labels and
// container ports), so that a cached pod costs what its own fields cost.
package slim
