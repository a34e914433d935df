// Package ownership is Raven's tag schema. Every OpenStack object Raven creates carries the tags built
// here: the cluster ID, the kind of owner and the owner's UID. Raven decides what it may touch from these
// tags only, never from names, and never touches an object without its own cluster's tag.
package ownership
