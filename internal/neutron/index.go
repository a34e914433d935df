package neutron

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"golang.org/x/sync/errgroup"
)

// NamespaceNet is a namespace's network and subnet.
type NamespaceNet struct {
	NamespaceUID string
	Namespace    string
	Network      openstack.Network
	Subnet       *openstack.Subnet // nil until created
	// Attached says the subnet has an interface on the cluster router.
	Attached bool
}

// Index is the in-memory view of the cluster's tagged networks and ports. Neutron stays the truth:
// Load and every resync replace the view with what Neutron lists.
type Index struct {
	mu sync.RWMutex
	// nets by namespace UID.
	nets map[string]*NamespaceNet
	// subnets finds the namespace subnet holding an address (built from nets when nil: every change of nets
	// drops it).
	subnets *subnetTable
	// ports by port ID, and port IDs by owner UID (pods) or by network (pool ports).
	ports map[string]openstack.Port
	// byNet holds the IDs of ports by network, so that a namespace's ports are found without a scan of all.
	byNet  map[string]map[string]struct{}
	byUID  map[string][]string
	byPool freePorts
	// sh holds one copy of the values ports repeat (nil: made on first use).
	sh *shared
	// claims are pool ports handed to pods whose new owner Neutron does not show yet.
	claims map[string]claimed
	// annotated is the snapshot's pod annotations while a listing is applied.
	annotated map[string]Annotation
	// touched records when Raven last changed a port, so that a snapshot listed before the change does
	// not undo it (a port created, deleted or claimed while the list was running).
	touched map[string]time.Time
	// netTouched does the same for namespace networks, by namespace UID.
	netTouched  map[string]time.Time
	portsLoaded bool
	// written are the ports this process created, claimed or changed for an owner it had seen: their owner's
	// absence from the cache is proof that it is gone, whatever the port's age.
	written map[string]bool
	// now reads the clock that dates touched and netTouched (nil: time.Now).
	now func() time.Time
}

func (x *Index) clock() time.Time {
	if x.now != nil {
		return x.now()
	}
	return time.Now()
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{
		nets: map[string]*NamespaceNet{}, ports: map[string]openstack.Port{}, byNet: map[string]map[string]struct{}{},
		byUID: map[string][]string{}, byPool: newFreePorts(),
	}
}

// Snapshot is what Neutron holds for the cluster at one moment.
type Snapshot struct {
	// Started is when the listing began; changes Raven made after it win over the snapshot.
	Started     time.Time
	Networks    []openstack.Network
	Subnets     []openstack.Subnet
	Ports       []openstack.Port // pod and pool ports
	RouterPorts []openstack.Port // interfaces of the cluster router
	// WithPorts says Ports were listed (ListNetworks leaves them out).
	WithPorts bool
	// AttachedSubnets are subnets known to be on the cluster router without a listing of its interfaces (nil when
	// RouterPorts were listed): at start, the subnets of the namespaces whose annotations say so, since the
	// namespace reconciler writes them once the interface is added. The router's interfaces, one per namespace,
	// are listed with the ports.
	AttachedSubnets map[string]bool
	// Annotated are the pods' port annotations (by port ID) as the pods' cache held them before the listing: a
	// pool port claimed in memory and in its pod's annotation only, whose tags Raven never wrote (it stopped),
	// is that pod's, not free.
	Annotated map[string]Annotation
	// shared is the table the listed ports share their repeated values with; the index keeps it.
	shared *shared
	// Yields is the number of pages of ports after which a resync's listing (Manager.Relist) waited for pod
	// port creates, and Yielded the time it waited in all.
	Yields  int
	Yielded time.Duration
}

// Annotation is a pod's port annotation: the pod as the owner of the port it names, and the pod's name.
type Annotation struct {
	Owner ownership.Owner
	Name  string
}

// List reads the snapshot with four list calls, whatever the number of namespaces and pods.
func List(ctx context.Context, n openstack.Networking, c *Cluster) (*Snapshot, error) {
	return list(ctx, n, c, nil)
}

// PageYield is the longest a resync's port listing waits, between two pages, for pod ports being created, unless
// Manager.PageYield says otherwise.
const PageYield = 2 * time.Second

// Relist reads the snapshot as List does, for a resync, but lets pods go first: before it asks for the next page
// of ports, it waits, up to PageYield, while pod ports are being created. A page holds one of Neutron's API
// workers for about 0.35 s (openstack.PortPageSize), and a resync at 50,000 pods lists for longer than a
// minute: without the wait, its pages took one of two workers the whole time and pods' creates queued for the
// other (a create → annotation p99 of 2.3 s in the scale run of 2026-12-06, 337 ms at p50).
func (m *Manager) Relist(ctx context.Context) (*Snapshot, error) {
	limit := cmp.Or(m.PageYield, PageYield)
	return list(ctx, m.N, m.C, func(ctx context.Context) time.Duration { return m.B.WaitIdle(ctx, limit) })
}

// list reads the snapshot; between, when set, runs after each full page of ports, before the next is asked for,
// and returns how long it waited.
//
// The router's interfaces, one per namespace, carry no tag of the cluster's and are a listing of their own. At
// start (between unset) it runs beside the listing of the cluster's ports, on another of Neutron's API workers:
// listed first, the interfaces of 10,000 namespaces would hold the cluster's ports back about 17 s at the
// calibrated 1.67 ms a port (bench/results/scale/model.json). A resync lists them first, so that its own
// listing keeps to one worker while pods are created.
func list(ctx context.Context, n openstack.Networking, c *Cluster, between func(context.Context) time.Duration) (*Snapshot, error) {
	s, err := ListNamespaceNetworks(ctx, n, c)
	if err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	if between != nil {
		if err := listRouterPorts(ctx, n, c, s); err != nil {
			return nil, err
		}
	} else {
		g.Go(func() error { return listRouterPorts(gctx, n, c, s) })
	}
	g.Go(func() error { return listPorts(gctx, n, c, s, between) })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	s.WithPorts = true
	return s, nil
}

// listRouterPorts lists the router's interfaces into s.
func listRouterPorts(ctx context.Context, n openstack.Networking, c *Cluster, s *Snapshot) error {
	var err error
	s.RouterPorts, err = n.ListPorts(ctx, openstack.Filter{DeviceID: c.RouterID})
	return err
}

// listPorts lists every port of the cluster into s.
func listPorts(ctx context.Context, n openstack.Networking, c *Cluster, s *Snapshot, between func(context.Context) time.Duration) error {
	// Each page is made to share the values ports repeat as it arrives, with the table the index will keep:
	// the decoded listing, whole, cost twice the index at 50,000 pods.
	s.shared = newShared()
	return n.EachPortPage(ctx, openstack.Filter{Tags: ownership.ClusterSelector(c.ID)}, func(page []openstack.Port) {
		for _, p := range page {
			s.Ports = append(s.Ports, s.shared.port(p))
		}
		// A page shorter than a full one is the last: nothing follows it to wait for.
		if between != nil && len(page) == openstack.PortPageSize {
			if d := between(ctx); d > 0 {
				s.Yields++
				s.Yielded += d
			}
		}
	})
}

// ListNetworks reads the namespace networks, their subnets and the router's interfaces (three list calls),
// without the pod ports.
func ListNetworks(ctx context.Context, n openstack.Networking, c *Cluster) (*Snapshot, error) {
	s, err := ListNamespaceNetworks(ctx, n, c)
	if err != nil {
		return nil, err
	}
	if err := listRouterPorts(ctx, n, c, s); err != nil {
		return nil, err
	}
	return s, nil
}

// ListNamespaceNetworks reads the namespace networks and their subnets (two list calls): with AttachedSubnets,
// enough to serve new pods while the ports, and the router's interfaces among them, are listed.
func ListNamespaceNetworks(ctx context.Context, n openstack.Networking, c *Cluster) (*Snapshot, error) {
	s := &Snapshot{Started: time.Now()}
	var err error
	if s.Networks, err = n.ListNetworks(ctx, openstack.Filter{Tags: ownership.Selector(c.ID, ownership.KindNamespace)}); err != nil {
		return nil, err
	}
	if s.Subnets, err = n.ListSubnets(ctx, openstack.Filter{Tags: ownership.Selector(c.ID, ownership.KindNamespace)}); err != nil {
		return nil, err
	}
	return s, nil
}

// Replace swaps the whole view for the snapshot, except what Raven changed after the listing began.
func (x *Index) Replace(cluster string, s *Snapshot) {
	nets := namespaceNets(cluster, s)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.replaceNetsLocked(nets, s.Started)
	if s.WithPorts {
		x.replacePortsLocked(cluster, s)
		x.portsLoaded = true
	}
}

// ListKind lists the cluster's ports of one kind (one paginated list): at start, the Service ports, so that the
// Service reconciler can work while every other port is still being listed.
func ListKind(ctx context.Context, n openstack.Networking, c *Cluster, kind ownership.Kind) (started time.Time, ports []openstack.Port, err error) {
	started = time.Now()
	ports, err = n.ListPorts(ctx, openstack.Filter{Tags: ownership.Selector(c.ID, kind)})
	return started, ports, err
}

// AddListed records ports that a listing begun at started returned (ListKind), except those Raven changed after
// it began, as Replace would; the rest of the view stays as it is.
func (x *Index) AddListed(cluster string, started time.Time, ports []openstack.Port) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range ports {
		if t, ok := x.touched[p.ID]; ok && t.After(started) {
			continue // Raven's view is newer
		}
		x.dropLocked(p.ID)
		x.putLocked(cluster, p)
	}
}

// PortsLoaded says the index holds every port of the cluster (a full listing was applied); before that it
// knows only ports this process wrote.
func (x *Index) PortsLoaded() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.portsLoaded
}

// replaceNetsLocked swaps in the listed namespace networks, except those Raven set or dropped after the
// listing began: a network created while a resync was listing stays, one deleted meanwhile stays gone.
func (x *Index) replaceNetsLocked(nets map[string]*NamespaceNet, started time.Time) {
	old, touched := x.nets, x.netTouched
	x.nets, x.subnets = nets, nil
	x.netTouched = map[string]time.Time{}
	for uid, t := range touched {
		if !t.After(started) {
			continue
		}
		x.netTouched[uid] = t
		if cur, ok := old[uid]; ok {
			x.nets[uid] = cur
		} else {
			delete(x.nets, uid)
		}
	}
}

// namespaceNets assembles the cluster's namespace networks from a listing: each with its subnet, and
// whether the router has an interface on it.
func namespaceNets(cluster string, s *Snapshot) map[string]*NamespaceNet {
	nets := map[string]*NamespaceNet{}
	byNet := map[string]*NamespaceNet{}
	for _, n := range s.Networks {
		o, ok := ownership.Parse(n.Tags)
		if !ok || o.Cluster != cluster || o.Kind != ownership.KindNamespace || o.UID == "" {
			continue
		}
		nn := &NamespaceNet{NamespaceUID: o.UID, Namespace: o.Name, Network: n}
		if old, dup := nets[o.UID]; dup && old.Network.CreatedAt.Before(n.CreatedAt) {
			continue // keep the oldest; the sweep removes the other
		}
		nets[o.UID] = nn
		byNet[n.ID] = nn
	}
	for i := range s.Subnets {
		sub := s.Subnets[i]
		if nn := byNet[sub.NetworkID]; nn != nil && ownership.Owns(cluster, sub.Tags) {
			nn.Subnet = &sub
		}
	}
	markAttached(nets, s.RouterPorts)
	for _, nn := range nets {
		if nn.Subnet != nil && s.AttachedSubnets[nn.Subnet.ID] {
			nn.Attached = true
		}
	}
	return nets
}

// markAttached marks the namespace networks whose subnet has one of the router's ports on it.
func markAttached(nets map[string]*NamespaceNet, routerPorts []openstack.Port) {
	bySubnet := map[string]*NamespaceNet{} // only the subnet each network keeps
	for _, nn := range nets {
		if nn.Subnet != nil {
			bySubnet[nn.Subnet.ID] = nn
		}
	}
	for _, p := range routerPorts {
		for _, ip := range p.FixedIPs {
			if nn := bySubnet[ip.SubnetID]; nn != nil {
				nn.Attached = true
			}
		}
	}
}

// replacePortsLocked swaps in the listed ports, except those Raven changed after the listing began: its
// own view of them is newer.
func (x *Index) replacePortsLocked(cluster string, s *Snapshot) {
	x.annotated = s.Annotated
	defer func() { x.annotated = nil }()
	old, touched := x.ports, x.touched
	newer := func(id string) bool { t, ok := touched[id]; return ok && t.After(s.Started) }
	x.ports, x.byNet = map[string]openstack.Port{}, map[string]map[string]struct{}{}
	x.byUID, x.sh = map[string][]string{}, s.shared
	if x.sh == nil {
		x.sh = newShared()
	}
	x.byPool = newFreePorts()
	x.touched = map[string]time.Time{}
	listed := map[string]bool{}
	for _, p := range s.Ports {
		listed[p.ID] = true
		if newer(p.ID) {
			if cur, ok := old[p.ID]; ok {
				x.putLocked(cluster, cur) // changed after the listing began: Raven's view is newer
			}
			continue // deleted after the listing began
		}
		x.putLocked(cluster, p)
	}
	for id, cur := range old {
		if !listed[id] && newer(id) {
			x.putLocked(cluster, cur) // created after the listing began
		}
	}
	for id, t := range touched {
		if t.After(s.Started) {
			x.touched[id] = t
		}
	}
}

// Network returns a copy of a namespace's network, or nil.
func (x *Index) Network(nsUID string) *NamespaceNet {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if nn, ok := x.nets[nsUID]; ok {
		c := *nn
		return &c
	}
	return nil
}

// NetworkByID returns a copy of the namespace network with this Neutron network ID, or nil.
func (x *Index) NetworkByID(networkID string) *NamespaceNet {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, nn := range x.nets {
		if nn.Network.ID == networkID {
			c := *nn
			return &c
		}
	}
	return nil
}

// Networks returns copies of every namespace network.
func (x *Index) Networks() []NamespaceNet {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]NamespaceNet, 0, len(x.nets))
	for _, nn := range x.nets {
		out = append(out, *nn)
	}
	return out
}

// SetNetwork records a namespace's network.
func (x *Index) SetNetwork(nn NamespaceNet) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.nets[nn.NamespaceUID], x.subnets = &nn, nil
	x.touchNet(nn.NamespaceUID)
}

// DropNetwork forgets a namespace's network.
func (x *Index) DropNetwork(nsUID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.nets, nsUID)
	x.subnets = nil
	x.touchNet(nsUID)
}

func (x *Index) touchNet(uid string) {
	if x.netTouched == nil {
		x.netTouched = map[string]time.Time{}
	}
	x.netTouched[uid] = x.clock()
}

// PortsOf returns the ports recorded for an owner UID, oldest first.
func (x *Index) PortsOf(uid string) []openstack.Port {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]openstack.Port, 0, len(x.byUID[uid]))
	for _, id := range x.byUID[uid] {
		out = append(out, x.ports[id])
	}
	slices.SortFunc(out, func(a, b openstack.Port) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// Owns says how many ports the index has of uid's, and whether portID is one of them, without copying them.
func (x *Index) Owns(uid, portID string) (n int, has bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ids := x.byUID[uid]
	return len(ids), slices.Contains(ids, portID)
}

// OwnedBy says the index has the port as one of uid's.
func (x *Index) OwnedBy(portID, uid string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Contains(x.byUID[uid], portID)
}

// PortsOn returns the pod and pool ports on a network.
func (x *Index) PortsOn(networkID string) []openstack.Port {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]openstack.Port, 0, len(x.byNet[networkID]))
	for id := range x.byNet[networkID] {
		out = append(out, x.ports[id])
	}
	return out
}

func (x *Index) setPortLocked(p openstack.Port) {
	if old, ok := x.ports[p.ID]; ok && old.NetworkID != p.NetworkID {
		x.unlinkLocked(old)
	}
	if x.sh == nil {
		x.sh = newShared()
	}
	p = x.sh.port(p)
	x.ports[p.ID] = p
	if x.byNet == nil {
		x.byNet = map[string]map[string]struct{}{}
	}
	if x.byNet[p.NetworkID] == nil {
		x.byNet[p.NetworkID] = map[string]struct{}{}
	}
	x.byNet[p.NetworkID][p.ID] = struct{}{}
}

func (x *Index) deletePortLocked(id string) {
	if p, ok := x.ports[id]; ok {
		x.unlinkLocked(p)
	}
	delete(x.ports, id)
}

func (x *Index) unlinkLocked(p openstack.Port) {
	if ids := x.byNet[p.NetworkID]; ids != nil {
		delete(ids, p.ID)
		if len(ids) == 0 {
			delete(x.byNet, p.NetworkID)
		}
	}
}

// ofKindLocked yields every port whose owner is of the given kind, with that owner. Callers hold mu.
func (x *Index) ofKindLocked(kind ownership.Kind) iter.Seq2[openstack.Port, ownership.Owner] {
	return func(yield func(openstack.Port, ownership.Owner) bool) {
		for _, p := range x.ports {
			if o, _ := ownership.Parse(p.Tags); o.Kind == kind && !yield(p, o) {
				return
			}
		}
	}
}

// PortsOfKind returns every port whose owner is of the given kind.
func (x *Index) PortsOfKind(kind ownership.Kind) []openstack.Port {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []openstack.Port
	for p := range x.ofKindLocked(kind) {
		out = append(out, p)
	}
	return out
}

// Owned is what the resync needs of a port to judge whether its owner is gone: its ID, owner and last change.
// The strings are the index's own.
type Owned struct {
	ID    string
	Owner ownership.Owner
	// Last is the later of the port's creation and its last update (a pool port's claim).
	Last time.Time
}

// OwnedOfKind returns every port whose owner is of the given kind, as Owned: a resync at 50,000 pods read
// the whole of each port here, about 20 MB of copies, to look at three fields.
func (x *Index) OwnedOfKind(kind ownership.Kind) []Owned {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]Owned, 0, len(x.ports))
	for p, o := range x.ofKindLocked(kind) {
		last := p.CreatedAt
		if p.UpdatedAt.After(last) {
			last = p.UpdatedAt
		}
		out = append(out, Owned{ID: p.ID, Owner: o, Last: last})
	}
	return out
}

// CountOfKind is the number of ports whose owner is of the given kind.
func (x *Index) CountOfKind(kind ownership.Kind) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := 0
	for range x.ofKindLocked(kind) {
		n++
	}
	return n
}

// Port returns the port of that ID, if the index has it.
func (x *Index) Port(id string) (openstack.Port, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p, ok := x.ports[id]
	return p, ok
}

// PutPort records a port.
func (x *Index) PutPort(cluster string, p openstack.Port) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropLocked(p.ID)
	x.putLocked(cluster, p)
	x.touch(p.ID)
}

func (x *Index) touch(id string) {
	if x.touched == nil {
		x.touched = map[string]time.Time{}
	}
	x.touched[id] = x.clock()
	if x.written == nil {
		x.written = map[string]bool{}
	}
	x.written[id] = true
}

// Known says the index holds the port.
func (x *Index) Known(id string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.ports[id]
	return ok
}

// Written says this process created, claimed or changed the port (see Index.written).
func (x *Index) Written(id string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.written[id]
}

func (x *Index) putLocked(cluster string, p openstack.Port) {
	o, ok := ownership.Parse(p.Tags)
	if !ok || o.Cluster != cluster {
		return
	}
	p = x.applyClaimLocked(cluster, p, o)
	o, _ = ownership.Parse(p.Tags)
	switch {
	case (o.Kind == ownership.KindPod || o.Kind == ownership.KindService) && o.UID != "":
		x.setPortLocked(p)
		x.byUID[o.UID] = append(x.byUID[o.UID], p.ID)
	case o.Kind == ownership.KindPool:
		x.setPortLocked(p)
		x.byPool.add(poolKeyOf(p), p.ID)
	}
}

// applyClaimLocked returns p as its claim makes it (the pod's, in name, device_id and tags), updating what
// Neutron shows of a claim in memory, or finding a claim Neutron holds that this process never made.
func (x *Index) applyClaimLocked(cluster string, p openstack.Port, o ownership.Owner) openstack.Port {
	if x.claims == nil {
		x.claims = map[string]claimed{}
	}
	if c, ok := x.claims[p.ID]; ok {
		switch {
		case o.Kind == ownership.KindPool && p.DeviceID == c.owner.UID:
			c.recorded = true // Neutron shows the claim; only the tags are missing
		case o.Kind == ownership.KindPod && o.UID == c.owner.UID:
			c.tagged = true // Neutron shows the claim by its tags; only name and device_id are missing
		}
		x.claims[p.ID] = c
		return applyClaim(p, c)
	}
	c, found := x.foundClaim(cluster, p, o)
	if !found {
		return p
	}
	c.subport = isSubport(p)
	x.claims[p.ID] = c
	return applyClaim(p, c)
}

// foundClaim finds a claim Neutron (or a pod's annotation) holds that this process never made.
func (x *Index) foundClaim(cluster string, p openstack.Port, o ownership.Owner) (claimed, bool) {
	if a, ok := x.annotated[p.ID]; ok && o.Kind == ownership.KindPool && p.DeviceID == "" && a.Owner.UID != "" {
		// A pool port bound in advance, claimed in memory and in its pod's annotation only (Raven stopped
		// before it wrote the pod's tags): the port is that pod's; its tags, name and device_id follow.
		return claimed{owner: a.Owner, name: a.Name, deferred: true}, true
	}
	switch {
	case o.Kind == ownership.KindPod && o.UID != "" && p.DeviceID == "" && p.Name == PoolPortName:
		// A pool port bound in advance, claimed by its pod's tags, whose name and device_id never followed:
		// they are finished in the background.
		_, name, _ := strings.Cut(o.Name, "/")
		return claimed{owner: o, name: name, tagged: true}, true
	case o.Kind == ownership.KindPool && p.DeviceID != "":
		// Claimed in Neutron by a pod (device_id) whose tags never followed (Raven stopped, or Neutron
		// kept failing): the port is that pod's.
		return claimed{owner: ownership.Owner{Cluster: cluster, Kind: ownership.KindPod, UID: p.DeviceID, Name: o.Name + "/" + p.Name},
			name: p.Name, recorded: true}, true
	}
	return claimed{}, false
}

// DropPort forgets a port, and any claim on it.
func (x *Index) DropPort(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(id)
	delete(x.written, id)
}

// forgetLocked drops the port and any claim on it, and marks it changed by Raven (see touch).
func (x *Index) forgetLocked(id string) {
	x.dropLocked(id)
	delete(x.claims, id)
	x.touch(id)
}

func (x *Index) dropLocked(id string) {
	p, ok := x.ports[id]
	if !ok {
		return
	}
	x.deletePortLocked(id)
	if o, _ := ownership.Parse(p.Tags); o.UID != "" {
		x.byUID[o.UID] = slices.DeleteFunc(x.byUID[o.UID], func(s string) bool { return s == id })
		if len(x.byUID[o.UID]) == 0 {
			delete(x.byUID, o.UID)
		}
	}
	x.byPool.remove(poolKeyOf(p), id)
}

// Port is openstack.Port, re-exported so that controllers can name it without the openstack package.
type Port = openstack.Port

// FixedIP is openstack.FixedIP, re-exported for the same reason.
type FixedIP = openstack.FixedIP

// poolKey names a pool: a network's free ports bound to host ("": unbound), or those on a nested node's
// trunk (host: TrunkPool(node)).
func poolKey(networkID, host string) string { return networkID + "|" + host }

// poolKeyOf is the pool a free port belongs to: its nested node's trunk pool when its tags name one, else
// the pool of the host it is bound to. A trunk's subport shows its VM's hypervisor as binding:host_id: it is
// never one of that hypervisor's ports.
func poolKeyOf(p openstack.Port) string {
	if o, _ := ownership.Parse(p.Tags); o.Node != "" {
		return poolKey(p.NetworkID, TrunkPool(o.Node))
	}
	return poolKey(p.NetworkID, p.HostID)
}

// trunkPoolPrefix starts the pool host of a nested node's trunk pool; no node name holds a colon.
const trunkPoolPrefix = "trunk:"

// TrunkPool is the pool host of the nested node's trunk pool: ports attached to the node VM's trunk in advance.
func TrunkPool(node string) string { return trunkPoolPrefix + node }

// trunkPoolNode is the nested node of a trunk pool's host, ok false for the pool of a chassis or an unbound one.
func trunkPoolNode(host string) (node string, ok bool) {
	return strings.CutPrefix(host, trunkPoolPrefix)
}

// FreeIn counts the free pool ports of a network that are bound to host ("": the unbound ones).
func (x *Index) FreeIn(networkID, host string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byPool.in(poolKey(networkID, host)))
}

// PoolHosts lists the hosts that hold free ports of the network ("" for unbound ones).
func (x *Index) PoolHosts(networkID string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byPool.hostsOf(networkID)
}

// Claim moves a free pool port of the network bound to host ("": an unbound one) to the owner, in memory
// only, and returns the port as it will look once Neutron is told. The claim survives Replace until Confirm.
func (x *Index) Claim(networkID, host string, owner ownership.Owner, name string) (openstack.Port, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ids := x.byPool.in(poolKey(networkID, host))
	if len(ids) == 0 {
		return openstack.Port{}, false
	}
	return x.claimLocked(ids[0], owner, name), true
}

// TakeFree takes one free port out of the network's pool for host (to delete it); false when none is left.
func (x *Index) TakeFree(networkID, host string) (openstack.Port, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ids := x.byPool.in(poolKey(networkID, host))
	if len(ids) == 0 {
		return openstack.Port{}, false
	}
	p := x.ports[ids[0]]
	x.dropLocked(p.ID)
	x.touch(p.ID)
	return p, true
}

func (x *Index) claimLocked(id string, owner ownership.Owner, name string) openstack.Port {
	p := x.ports[id]
	x.dropLocked(id)
	if x.claims == nil {
		x.claims = map[string]claimed{}
	}
	c := claimed{owner: owner, name: name, free: p, subport: isSubport(p)}
	x.claims[id] = c
	p = applyClaim(p, c)
	x.touch(id)
	x.setPortLocked(p)
	x.byUID[owner.UID] = append(x.byUID[owner.UID], id)
	return p
}

// Unclaim puts a port claimed in memory back into its pool: Neutron could not be told of the claim.
func (x *Index) Unclaim(portID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	c, ok := x.claims[portID]
	if !ok || c.recorded || c.tagged || c.deferred {
		return
	}
	delete(x.claims, portID)
	x.dropLocked(portID)
	x.setPortLocked(c.free)
	x.byPool.add(poolKeyOf(c.free), portID)
	x.touch(portID)
}

// Forget drops a port whose state in Neutron is unknown (a claim whose update failed without saying whether
// Neutron applied it), so that nobody takes it; the next listing shows what Neutron holds. The touch keeps a
// listing that began earlier from handing it back as free.
func (x *Index) Forget(portID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(portID)
}

// PutClaimed records a claimed port as Neutron returned it after the claim (device_id set, tags still
// the pool's), and returns it as its pod will see it. putLocked applies the claim and marks it recorded.
func (x *Index) PutClaimed(cluster string, p openstack.Port) openstack.Port {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.claims[p.ID]; !ok {
		return p
	}
	x.dropLocked(p.ID)
	x.putLocked(cluster, p)
	x.touch(p.ID)
	return x.ports[p.ID]
}

// Claims returns the claims Neutron records but does not show whole yet: by device_id without the pod's
// tags, or by the pod's tags without its name and device_id (Tagged).
func (x *Index) Claims() []Claim {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]Claim, 0, len(x.claims))
	for id, c := range x.claims {
		if c.recorded || c.tagged || c.deferred {
			out = append(out, Claim{PortID: id, Owner: c.owner, Name: c.name, Tagged: c.tagged, Deferred: c.deferred && !c.tagged,
				Subport: c.subport})
		}
	}
	return out
}

// MarkDeferred records that the pod uid's claim of a port is handed out before Neutron is told (the pod's
// annotation carries it).
func (x *Index) MarkDeferred(portID, uid string) {
	x.mark(portID, uid, func(c *claimed) { c.deferred = true })
}

// MarkTagged records that Neutron shows the pod uid's claim of a port by the pod's tags (a pool port bound in
// advance, claimed without a port update): the port is the pod's, its name and device_id are still the pool's.
func (x *Index) MarkTagged(portID, uid string) {
	x.mark(portID, uid, func(c *claimed) { c.tagged = true })
}

// mark changes the claim on a port, if the pod uid holds it: a port changes hands (recycling), and a claim of
// its last pod must not change the claim of its next.
func (x *Index) mark(portID, uid string, f func(*claimed)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if c, ok := x.claims[portID]; ok && c.owner.UID == uid {
		f(&c)
		x.claims[portID] = c
		x.touch(portID)
	}
}

// Confirm forgets the pod uid's claim of a port once Neutron shows it (or the port is gone); another pod's
// claim of the port stays. The touch keeps a listing that began before Neutron changed from handing the port
// back to the pool.
func (x *Index) Confirm(portID, uid string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if c, ok := x.claims[portID]; ok && c.owner.UID == uid {
		delete(x.claims, portID)
		x.touch(portID)
	}
}

// Claimed says a pool port was claimed, by any pod, and Neutron does not show it yet.
func (x *Index) Claimed(portID string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.claims[portID]
	return ok
}

// ClaimedBy says the pod uid claimed the pool port and Neutron does not show it yet.
func (x *Index) ClaimedBy(portID, uid string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	c, ok := x.claims[portID]
	return ok && c.owner.UID == uid
}

type claimed struct {
	owner ownership.Owner
	name  string
	// free is the port as it was in the pool, to put back when Neutron refuses the claim.
	free openstack.Port
	// recorded says Neutron shows the claim (the pod's UID as device_id).
	recorded bool
	// tagged says Neutron shows the claim by the pod's tags (name and device_id still the pool's).
	tagged bool
	// deferred says the claim is in memory and in the pod's annotation only: a port bound in advance, handed
	// out before Neutron is told. It is never put back into the pool.
	deferred bool
	// subport says the port is a trunk's subport: its claim is written without a device_id.
	subport bool
}

// applyClaim is p as the claim makes it: its pod's name, tags and (but on a subport, which has none) UID as
// device_id.
func applyClaim(p openstack.Port, c claimed) openstack.Port {
	p.Name, p.Tags = c.name, c.owner.Tags()
	if !c.subport {
		p.DeviceID = c.owner.UID
	}
	return p
}

// isSubport says a port is, or is made to become, a trunk's subport: Neutron shows it as one, or its pool is
// a nested node's trunk pool. A subport has no device_id (Neutron refuses to make a port with one a subport).
func isSubport(p openstack.Port) bool {
	o, _ := ownership.Parse(p.Tags)
	return p.DeviceOwner == openstack.SubportOwner || o.Node != ""
}

// FreeTotal counts the free pool ports of every network.
func (x *Index) FreeTotal() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byPool.total
}
