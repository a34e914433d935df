package ownership

import (
	"strings"
)

// Kind says what an OpenStack object was made for.
type Kind string

// The kinds of owner Raven records.
const (
	KindPod       Kind = "pod"       // a pod's port
	KindPool      Kind = "pool"      // a ready port waiting in a namespace's port pool
	KindNamespace Kind = "namespace" // a namespace's network and subnet
	KindService   Kind = "service"   // a service's VIP port, load balancer and floating IP
	KindCluster   Kind = "cluster"   // cluster-wide objects: router, subnet pool, service network
	KindPolicy    Kind = "policy"    // a security group of NetworkPolicy: a policy's, a peer's or a base one
)

const (
	clusterKey = "raven.cluster="
	kindKey    = "raven.kind="
	uidKey     = "raven.uid="
	ownerKey   = "raven.owner="
	nodeKey    = "raven.node="
	// maxTag is Neutron's limit on a tag's length.
	maxTag = 255
)

// Owner identifies who an OpenStack object belongs to.
type Owner struct {
	Cluster string
	Kind    Kind
	// UID is the Kubernetes UID of the owner (empty for cluster-wide objects and pool ports).
	UID string
	// Name is "namespace/name" (or the namespace), for people reading the tags; it is never trusted.
	Name string
	// Node is the nested node whose trunk pool a pool port belongs to (empty for every other object).
	Node string
}

// Tags renders the owner as tags, in a stable order.
func (o Owner) Tags() []string {
	tags := []string{clusterKey + o.Cluster, kindKey + string(o.Kind)}
	if o.UID != "" {
		tags = append(tags, uidKey+o.UID)
	}
	if o.Name != "" {
		t := ownerKey + o.Name
		if len(t) > maxTag {
			t = t[:maxTag]
		}
		tags = append(tags, t)
	}
	if o.Node != "" {
		// Neutron refuses a tag past 255 characters: a node whose name is longer than 244 gets no trunk pool
		// (the refill fails, and says so).
		tags = append(tags, nodeKey+o.Node)
	}
	return tags
}

// Selector is the tag filter that lists every object of this kind in the cluster.
func Selector(cluster string, kind Kind) []string {
	return []string{clusterKey + cluster, kindKey + string(kind)}
}

// ClusterSelector is the tag filter that lists every object of the cluster.
func ClusterSelector(cluster string) []string {
	return []string{clusterKey + cluster}
}

// UIDSelector is the tag filter of the cluster's objects owned by the Kubernetes object of that UID.
func UIDSelector(cluster, uid string) []string {
	return []string{clusterKey + cluster, uidKey + uid}
}

// Parse reads an owner back from tags. ok is false when the tags carry no Raven cluster.
func Parse(tags []string) (o Owner, ok bool) {
	for _, t := range tags {
		switch {
		case strings.HasPrefix(t, clusterKey):
			o.Cluster, ok = strings.TrimPrefix(t, clusterKey), true
		case strings.HasPrefix(t, kindKey):
			o.Kind = Kind(strings.TrimPrefix(t, kindKey))
		case strings.HasPrefix(t, uidKey):
			o.UID = strings.TrimPrefix(t, uidKey)
		case strings.HasPrefix(t, ownerKey):
			o.Name = strings.TrimPrefix(t, ownerKey)
		case strings.HasPrefix(t, nodeKey):
			o.Node = strings.TrimPrefix(t, nodeKey)
		}
	}
	return o, ok
}

// Owns reports whether tags mark an object of this cluster (of any kind).
func Owns(cluster string, tags []string) bool {
	o, ok := Parse(tags)
	return ok && o.Cluster == cluster
}
