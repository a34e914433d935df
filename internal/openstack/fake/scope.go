package fake

import (
	"slices"
	"sync"

	"github.com/raven-net/raven/internal/openstack"
)

// Listing is one list request the fake answered, with what it was scoped by.
type Listing struct {
	Method string
	// Filter is a Neutron listing's filter.
	Filter openstack.Filter
	// Tags are an Octavia listing's tags.
	Tags []string
	// IDs are the objects a listing is of: the load balancer of its listeners or pools, the pool of its
	// members, the subnet of PortsWithAddress, the parent ports of ListTrunks.
	IDs []string
	// netTags are the tags, when it was listed, of each network Filter names.
	netTags map[string][]string
}

// listings records every listing of a fake, under a lock of its own.
type listings struct {
	mu  sync.Mutex
	all []Listing
}

func (l *listings) add(x Listing) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, x)
}

func (l *listings) unscoped(cluster string, scoped func(Listing, string) bool) []Listing {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Listing
	for _, x := range l.all {
		if !scoped(x, cluster) {
			out = append(out, x)
		}
	}
	return out
}

// ForgetListings drops the listings recorded so far: a test's setup made them.
func (n *Neutron) ForgetListings() {
	n.lists.mu.Lock()
	defer n.lists.mu.Unlock()
	n.lists.all = nil
}

// clusterTag is the tag every object of the cluster carries (ownership's raven.cluster=<id>).
func clusterTag(cluster string) string { return "raven.cluster=" + cluster }

// listed records a listing. Caller holds n.mu.
func (n *Neutron) listed(method string, f openstack.Filter, ids ...string) {
	x := Listing{Method: method, Filter: f, IDs: ids, netTags: map[string][]string{}}
	for _, id := range append(slices.Clone(f.NetworkIDs), f.NetworkID) {
		if net, ok := n.Nets[id]; ok && id != "" {
			x.netTags[id] = slices.Clone(net.Tags)
		}
	}
	n.lists.add(x)
}

// Unscoped returns the listings so far that the cluster's tag, its networks, Raven's project or named objects
// did not scope: each would read every object of its kind in the cloud that Raven's credentials see. A
// listing is scoped when its tags hold the cluster's; when it names an object (ID, DeviceID: one device's
// ports); when it is by Raven's project (the fake's Project); when it is of external networks (an admin's,
// which every project sees); when every network it is by (NetworkID, NetworkIDs) carried the cluster's tag;
// and, for PortsWithAddress and ListTrunks, when it names a subnet or parent ports. A lookup by name or
// description alone is not scoped.
func (n *Neutron) Unscoped(cluster string) []Listing {
	project := n.ProjectID()
	return n.lists.unscoped(cluster, func(x Listing, cluster string) bool {
		return project != "" && x.Filter.ProjectID == project || neutronScoped(x, cluster)
	})
}

func neutronScoped(x Listing, cluster string) bool {
	switch x.Method {
	case "PortsWithAddress", "ListTrunks":
		return len(x.IDs) > 0 && !slices.Contains(x.IDs, "")
	}
	f := x.Filter
	if slices.Contains(f.Tags, clusterTag(cluster)) || f.ID != "" || f.DeviceID != "" || f.External {
		return true
	}
	nets := slices.Clone(f.NetworkIDs)
	if f.NetworkID != "" {
		nets = append(nets, f.NetworkID)
	}
	if len(nets) == 0 && f.NetworkIDs == nil {
		return false
	}
	return !slices.ContainsFunc(nets, func(id string) bool { return !slices.Contains(x.netTags[id], clusterTag(cluster)) })
}

// listed records a listing.
func (o *Octavia) listed(method string, tags []string, ids ...string) {
	o.lists.add(Listing{Method: method, Tags: slices.Clone(tags), IDs: ids})
}

// ForgetListings drops the listings recorded so far: a test's setup made them.
func (o *Octavia) ForgetListings() {
	o.lists.mu.Lock()
	defer o.lists.mu.Unlock()
	o.lists.all = nil
}

// Unscoped returns the listings so far that neither the cluster's tag nor a named parent (load balancer,
// pool) scoped.
func (o *Octavia) Unscoped(cluster string) []Listing {
	return o.lists.unscoped(cluster, func(x Listing, cluster string) bool {
		if len(x.IDs) > 0 {
			return !slices.Contains(x.IDs, "")
		}
		return slices.Contains(x.Tags, clusterTag(cluster))
	})
}
