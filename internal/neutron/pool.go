package neutron

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// PoolConfig sizes the port pools, with Cilium's watermarks.
type PoolConfig struct {
	// MinFree: below this many free ports, a network's pool is refilled.
	MinFree int
	// Batch: ports made by one bulk request.
	Batch int
	// Max: free ports a pool holds at most.
	Max int
	// Recycle returns the port of a deleted or finished pod to its namespace's pool, while the pool has room,
	// instead of deleting it: new pods of a namespace whose pods are replaced find ports at once, at the cost
	// of more Neutron updates.
	Recycle bool
	// IdleAfter: a namespace where no pod took a port for this long gives its free ports back (0: never).
	IdleAfter time.Duration
	// PerNode keeps a pool per node × namespace whose ports are bound to the node in advance
	// (binding:host_id), and fills it only where pods are being created. A pod then takes a port with one tag
	// request on its critical path, and no port update: under ML2/OVN a binding update costs as much as a
	// create. Without PerNode, pools are per namespace, unbound, and a pod's take binds the port.
	PerNode bool
	// Budget caps the free ports of all pools together, cluster-wide (0: no cap). Pools fill only where pods
	// are created, so what a cluster keeps idle follows demand; the budget bounds it whatever the number of
	// nodes × namespaces. A pool that finds the budget spent is not refilled: its pods get ports made for them
	// until an idle pool gives its ports back (IdleAfter) or pods take from the others.
	Budget int
}

// PoolPortName is the name of a port waiting in a pool.
const PoolPortName = "raven-pool"

// Pools keeps ready ports per namespace network (and per node with PerNode), so that a new pod takes one
// without waiting for a port create. Pool ports are tagged raven.kind=pool.
//
// Unbound pools (the default) belong to a namespace, not to a node, so a cluster holds namespaces × MinFree
// idle ports; one port update (its node, its name and its UID as device_id, in one call) and the annotation
// lie on a pod's critical path. Neutron records the claim (device_id) before the pod is annotated; the pod's
// tags follow in the background. Until they do, the index treats a pool-tagged port with a device_id as that
// pod's.
//
// Pools per node (PerNode) hold ports bound to their node in advance. A pod's take asks Neutron nothing: the
// claim is held in memory and in the pod's annotation, and the port's tags, then its name and device_id, follow
// in the background. A restarted Raven finds such a claim by the pods' annotations before it hands out any
// pool port (Snapshot.Annotated); one whose tags are in but not its name, by a pod-tagged port named as a
// pool port.
//
// Either way every resync offers unfinished claims to the workers again, so no claim is lost to a crash, a
// full queue or a Neutron that keeps failing.
type Pools struct {
	M   *Manager
	Cfg PoolConfig
	// Nodes lists the names of the cluster's nodes (nil: unknown). Tend empties the pool of a node it does not
	// list, whatever IdleAfter: no pod can take a port bound to a node that is gone.
	Nodes func(ctx context.Context) ([]string, error)

	mu       sync.Mutex
	lastTake time.Time
	// takenAt is when a pod last asked for a port of each pool (by network, then host): pools fill only where pods are
	// created. refilling, shrinking and returning are by poolKey too; closed is by network.
	takenAt   map[string]map[string]time.Time
	shrinking map[string]bool
	started   time.Time
	refilling map[string]bool
	closed    map[string]bool
	returning map[string]int // recycled ports on their way back
	// making counts the ports refills are creating now: they count against the budget before they exist.
	making int
	// starved counts the refills the budget cut short or refused.
	starved int64
	// pending are the claims whose tags Neutron does not show yet, by port ID, with the time each is due.
	pending map[string]pendingClaim
	// held are the claims a worker has in hand: the owner's UID by port ID. A port's claim is in one worker's
	// hands at a time, and is not pending meanwhile.
	held map[string]string
	wake chan struct{}
	ctx  context.Context
	// retry is the delay before a claim's first retry; each further try waits one more (default 100 ms).
	retry time.Duration
	// quiet is how long no pod may have taken a port before a claim that is its pod's already (by the tags, or
	// held in memory and in the pod's annotation) is written to Neutron (default claimQuiet).
	quiet time.Duration
	// bg counts the pools being emptied in the background.
	bg sync.WaitGroup
	// upkeep holds a token per Neutron request of pool upkeep (a refill's create, an idle pool's delete) in
	// flight: upkeepInFlight at once, whatever the number of pools.
	upkeep chan struct{}
	// vms are the nested nodes whose pods took from their trunk pools, by name: a refill finds the trunk
	// through them.
	vms map[string]VMNode
}

// claimQuiet: a burst's pods are still being plugged for a few seconds after the last of them took its port,
// and each write of a claim costs Neutron (and, through ML2/OVN, ovn-northd) CPU that the plugging needs.
const claimQuiet = 3 * time.Second

type pendingClaim struct {
	c   Claim
	due time.Time
}

// Start runs the background workers until ctx ends. Claims enqueued before Start wait for it.
func (p *Pools) Start(ctx context.Context, workers int) {
	p.mu.Lock()
	p.ctx = ctx
	p.started = time.Now()
	p.init()
	p.mu.Unlock()
	for range max(workers, 1) {
		go p.work(ctx)
	}
}

func (p *Pools) init() {
	if p.refilling == nil {
		p.refilling, p.closed, p.pending, p.held = map[string]bool{}, map[string]bool{}, map[string]pendingClaim{}, map[string]string{}
		p.takenAt, p.shrinking = map[string]map[string]time.Time{}, map[string]bool{}
		p.wake = make(chan struct{}, 1)
		p.vms = map[string]VMNode{}
		p.upkeep = make(chan struct{}, upkeepInFlight)
	}
}

// upkeepInFlight is the number of Neutron requests that pool upkeep sends at once, all pools together. Pools
// fall idle together (those a burst filled, IdleAfter later), and a resync empties them all at once: with a
// delete in flight per pool, at 50,000 pods in the scale benchmark, pods' creates queued behind those deletes
// (create → annotation p50 80 s, and 29.6 s at p99 for ports made by hand beside Raven, in the run of
// 2026-12-06 02:16 UTC). One request at a time leaves the other workers to pods.
const upkeepInFlight = 1

// upkeepTurn waits for the pools' turn to send a Neutron request of upkeep, then for pods to stop arriving
// (yield, up to 30 s); the caller sends one request and calls done. ok is false when ctx ended.
func (p *Pools) upkeepTurn(ctx context.Context) (done func(), ok bool) {
	p.mu.Lock()
	p.init()
	turn := p.upkeep
	p.mu.Unlock()
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	p.yield(ctx, 500*time.Millisecond, 30*time.Second)
	return func() { <-turn }, true
}

func (p *Pools) work(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		c, ok, wait := p.next()
		if ok {
			p.complete(ctx, c)
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
	}
}

// next takes one due claim off the pending set into a worker's hands (see complete); when none is due, wait
// says how long until one is (at most a second).
func (p *Pools) next() (c Claim, ok bool, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	now := time.Now()
	wait = time.Second
	for id, pc := range p.pending {
		if !pc.due.After(now) {
			delete(p.pending, id)
			p.held[id] = pc.c.Owner.UID
			return pc.c, true, 0
		}
		wait = min(wait, pc.due.Sub(now))
	}
	return Claim{}, false, wait
}

// Take hands the pod a free port of its namespace's pool (its node's, with PerNode), if there is one, and tops
// the pool up. The claim is recorded in Neutron before Take returns: by name, device_id and the pod's node in
// one port update, or, for a port bound to the pod's node already, by the pod's tags. When Neutron refuses the
// claim the port stays in the pool; when the outcome is unknown it leaves the pool until the next listing.
func (p *Pools) Take(ctx context.Context, nn *NamespaceNet, pod PodRef, owner ownership.Owner) (openstack.Port, bool, error) {
	host := ""
	switch {
	case pod.VM != nil:
		host = TrunkPool(pod.VM.Name)
	case p.Cfg.PerNode && pod.Node == "":
		return openstack.Port{}, false, nil // not scheduled yet: no node's pool to take from
	case p.Cfg.PerNode:
		host = pod.Node
	}
	port, ok := p.M.X.Claim(nn.Network.ID, host, owner, pod.Name)
	p.mu.Lock()
	p.init()
	p.lastTake = time.Now()
	if p.takenAt[nn.Network.ID] == nil {
		p.takenAt[nn.Network.ID] = map[string]time.Time{}
	}
	p.takenAt[nn.Network.ID][host] = p.lastTake
	if pod.VM != nil {
		p.vms[pod.VM.Name] = *pod.VM
	}
	p.mu.Unlock()
	p.Kick(nn, host)
	switch {
	case !ok:
		return port, false, nil
	case pod.VM != nil:
		return p.takeSubport(ctx, port, pod, owner)
	case host != "" && port.HostID == host && sameGroups(port.SecurityGroups, pod.SecurityGroups):
		return p.takeBound(port, owner, false)
	}
	u := openstack.PortUpdate{Name: &pod.Name, DeviceID: &pod.UID}
	if pod.Node != "" {
		u.HostID = &pod.Node
	}
	if !sameGroups(port.SecurityGroups, pod.SecurityGroups) {
		u.SecurityGroups = &pod.SecurityGroups
	}
	updated, err := p.M.N.UpdatePort(ctx, port.ID, u)
	if err != nil {
		// Neutron may have recorded the claim (a 500 after its commit, a timeout): handing the port to another
		// pod could give it two owners.
		p.drop(port.ID, err)
		return openstack.Port{}, false, err
	}
	claimed := p.M.X.PutClaimed(p.M.C.ID, *updated)
	p.enqueue(Claim{PortID: port.ID, Owner: owner})
	return claimed, true, nil
}

// PoolsPerNode says pods take ports from their node's pool (pools.perNode): an unscheduled pod waits for its
// node instead of getting an unbound port that a binding update would have to bind later.
func (m *Manager) PoolsPerNode() bool { return m.P != nil && m.P.Cfg.PerNode }

// takeBound claims a port bound to the pod's node already, with the pod's groups, in memory only: the pod's
// annotation records the claim, and Neutron is told in the background (its tags, then its name and
// device_id), so that no request stands between a pod and its annotation. A restarted Raven finds such a claim
// by the annotation (Snapshot.Annotated) before it hands out any pool port.
func (p *Pools) takeBound(port openstack.Port, owner ownership.Owner, subport bool) (openstack.Port, bool, error) {
	p.M.X.MarkDeferred(port.ID, owner.UID)
	p.enqueue(Claim{PortID: port.ID, Owner: owner, Name: port.Name, Deferred: true, Subport: subport})
	return port, true, nil
}

// takeSubport claims a port of a nested node's trunk pool, a subport of the VM's trunk already, like
// takeBound: in memory and in the pod's annotation, Neutron told in the background. A pod whose
// NetworkPolicies want other groups than the pool's gets them first, in one update: the annotation lets the
// node plug the port, which must not admit more than the policies say.
func (p *Pools) takeSubport(ctx context.Context, port openstack.Port, pod PodRef, owner ownership.Owner) (openstack.Port, bool, error) {
	if !sameGroups(port.SecurityGroups, pod.SecurityGroups) {
		updated, err := p.M.N.UpdatePort(ctx, port.ID, openstack.PortUpdate{SecurityGroups: &pod.SecurityGroups})
		if err != nil {
			p.drop(port.ID, err)
			return openstack.Port{}, false, err
		}
		port.SecurityGroups = updated.SecurityGroups
	}
	return p.takeBound(port, owner, true)
}

// drop undoes the in-memory claim of a port whose claim Neutron did not take: the port goes back to its pool
// when Neutron refused, and leaves it until a listing shows its state when the outcome is unknown.
func (p *Pools) drop(portID string, err error) {
	if refused(err) {
		p.M.X.Unclaim(portID)
	} else {
		p.M.X.Forget(portID)
	}
}

// refused says Neutron answered that it did not apply a change (as opposed to an error that leaves the
// outcome unknown).
func refused(err error) bool {
	switch openstack.KindOf(err) {
	case openstack.KindBadRequest, openstack.KindConflict, openstack.KindForbidden, openstack.KindUnauthorized,
		openstack.KindQuota, openstack.KindExhausted, openstack.KindImmutable, openstack.KindUnsupported:
		return true
	}
	return false
}

// Claim is a pool port whose claim Neutron does not show whole yet: the pod's tags are missing, or (Tagged)
// its name (Name) and device_id are, or (Deferred) all three are.
type Claim struct {
	PortID   string
	Owner    ownership.Owner
	Name     string
	Tagged   bool
	Deferred bool
	// Subport: the port is a trunk's subport, whose claim has no device_id.
	Subport bool
	tries   int
}

// Offer hands the workers claims to finish (the resync offers every one the index holds); one already
// pending or in a worker's hands keeps its place, and one the index no longer holds is dropped.
func (p *Pools) Offer(claims []Claim) {
	for _, c := range claims {
		p.enqueue(c)
	}
}

func (p *Pools) enqueue(c Claim) {
	p.mu.Lock()
	p.init()
	p.enqueueLocked(c)
	p.mu.Unlock()
	p.wakeUp()
}

// enqueueLocked makes c pending, if its pod still holds the claim: a port changes hands (recycling), and the
// claim of its last pod, offered late, must neither be written over its next pod's nor keep that pod's claim
// out. A claim of the same pod pending or in a worker's hands already keeps its place. p.mu is held.
func (p *Pools) enqueueLocked(c Claim) {
	if !p.M.X.ClaimedBy(c.PortID, c.Owner.UID) {
		return // finished, or the port is gone or another pod's
	}
	if uid, ok := p.held[c.PortID]; ok && uid == c.Owner.UID {
		return
	}
	if pc, ok := p.pending[c.PortID]; ok && pc.c.Owner.UID == c.Owner.UID {
		return
	}
	step := p.retry
	if step == 0 {
		step = 100 * time.Millisecond
	}
	p.pending[c.PortID] = pendingClaim{c: c, due: time.Now().Add(time.Duration(min(c.tries, 50)) * step)}
}

func (p *Pools) wakeUp() {
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// Pending is the number of claims waiting for their tags.
func (p *Pools) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

// yield waits, up to limit, while pods are arriving (one took a port in the last quiet) or wait for
// Neutron: pool upkeep must not take CPU and Neutron time from a burst.
func (p *Pools) yield(ctx context.Context, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		p.mu.Lock()
		recent := time.Since(p.lastTake) < quiet
		p.mu.Unlock()
		if !recent && (p.M.B == nil || !p.M.B.Busy()) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// complete finishes a claim next handed to a worker, and takes it out of the worker's hands: its next step,
// or the same step after a failure, is pending again.
func (p *Pools) complete(ctx context.Context, c Claim) {
	again := p.write(ctx, c)
	p.mu.Lock()
	if p.held[c.PortID] == c.Owner.UID {
		delete(p.held, c.PortID)
	}
	if again != nil {
		p.enqueueLocked(*again)
	}
	p.mu.Unlock()
	p.wakeUp()
}

// write gives the claimed port its pod's tags (then, for a claim held in memory and in its pod's annotation
// only, its name and device_id next), or, for a port claimed by its tags, its pod's name and device_id, as long
// as the pod holds the claim. It returns the claim's next step, or the same after a failure (due later: a
// claim is never dropped), or nil when the claim is finished.
func (p *Pools) write(ctx context.Context, c Claim) *Claim {
	// A short yield for a claim Neutron shows by device_id only: until this call, the pod's port shows in
	// Neutron as a pool port, and a slow Neutron keeps pods' creates in flight for minutes during a burst. A
	// claim Neutron shows by its tags, or that the pod's annotation holds, is the pod's already; what Neutron
	// lacks of it waits for the burst to end, so that it does not queue in front of other pods' takes.
	quiet, limit := 500*time.Millisecond, 2*time.Second
	if c.Tagged || c.Deferred {
		quiet, limit = p.quiet, 30*time.Second
		if quiet == 0 {
			quiet = claimQuiet
		}
	}
	p.yield(ctx, quiet, limit)
	if !p.M.X.ClaimedBy(c.PortID, c.Owner.UID) {
		return nil // confirmed meanwhile, or the port is gone or another pod's
	}
	var err error
	if c.Tagged {
		u := openstack.PortUpdate{Name: &c.Name, DeviceID: &c.Owner.UID}
		if c.Subport {
			u.DeviceID = nil
		}
		_, err = p.M.N.UpdatePort(ctx, c.PortID, u)
	} else {
		err = p.M.N.ReplaceTags(ctx, openstack.ResourcePorts, c.PortID, c.Owner.Tags())
	}
	switch {
	case err == nil && c.Deferred:
		// The pod's tags are in: its name and device_id follow, after the burst.
		p.M.X.MarkTagged(c.PortID, c.Owner.UID)
		return &Claim{PortID: c.PortID, Owner: c.Owner, Name: c.Name, Tagged: true, Subport: c.Subport}
	case err == nil, openstack.IsNotFound(err): // tagged, or the pod went and its port with it
		p.M.X.Confirm(c.PortID, c.Owner.UID)
		return nil
	default:
		klog.FromContext(ctx).Error(err, "Recording a pool port's new owner in Neutron; will retry", "port", c.PortID, "pod", c.Owner.Name)
		c.tries++
		return &c
	}
}

// recyclable says port may go back to nn's pool: pools recycle, the port is on nn's network, and it is not
// claimed yet. A nested pod's port is a subport of its VM's trunk: it is deleted, not recycled.
func (p *Pools) recyclable(nn *NamespaceNet, port openstack.Port) bool {
	if !p.Cfg.Recycle || nn == nil || nn.Network.ID != port.NetworkID || p.M.X.Claimed(port.ID) {
		return false
	}
	return !isSubport(port) && (p.M.T == nil || !p.M.T.Carries(port.ID))
}

// Recycle makes port, whose pod is gone or finished, a free port of its namespace's pool again. ok is false
// when the pool is full, closed or not recycling, or the port is claimed and not yet recorded in Neutron:
// the caller deletes it instead.
func (p *Pools) Recycle(ctx context.Context, nn *NamespaceNet, port openstack.Port) (ok bool, err error) {
	if !p.recyclable(nn, port) {
		return false, nil
	}
	// A port of a node's pool goes back to that node's pool, still bound; an unbound pool takes it unbound.
	host := ""
	if p.Cfg.PerNode {
		host = port.HostID
	}
	key := poolKey(nn.Network.ID, host)
	// Reserve a place first: several workers recycle at once, and the pool must not grow past Max.
	p.mu.Lock()
	if p.closed[nn.Network.ID] || p.M.X.FreeIn(nn.Network.ID, host)+p.returning[key] >= p.Cfg.Max || p.roomLocked() < 1 {
		p.mu.Unlock()
		return false, nil
	}
	if p.returning == nil {
		p.returning = map[string]int{}
	}
	p.returning[key]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.returning[key]--; p.returning[key] == 0 {
			delete(p.returning, key)
		}
		p.mu.Unlock()
	}()
	// Detach first, tag last: until the tags say pool, nobody can take the port, so no write of this
	// function lands after a new owner's. A crash in between leaves a detached port of a gone pod, which
	// the sweep releases.
	name, dev := PoolPortName, ""
	// A recycled port leaves its pod's NetworkPolicy groups behind: the pool hands out ports with the pod groups.
	groups := p.M.C.PodSecurityGroups
	u := openstack.PortUpdate{Name: &name, DeviceID: &dev, SecurityGroups: &groups}
	if host == "" {
		u.HostID = &host // unbound pools take it unbound
	}
	updated, err := p.M.N.UpdatePort(ctx, port.ID, u)
	if err != nil {
		return false, err
	}
	owner := ownership.Owner{Cluster: p.M.C.ID, Kind: ownership.KindPool, Name: nn.Namespace}
	if err := p.M.N.ReplaceTags(ctx, openstack.ResourcePorts, port.ID, owner.Tags()); err != nil {
		return false, err
	}
	updated.Tags = owner.Tags()
	p.M.X.PutPort(p.M.C.ID, *updated)
	return true, nil
}

// Kick refills the network's pool for host ("": the unbound one) in the background when it runs low.
func (p *Pools) Kick(nn *NamespaceNet, host string) {
	if nn == nil || nn.Subnet == nil {
		return
	}
	key := poolKey(nn.Network.ID, host)
	p.mu.Lock()
	defer p.mu.Unlock()
	// Pool ports must carry their tags from the first moment (a free port without them would be nobody's):
	// without tags on create, there are no pools.
	if p.ctx == nil || !p.M.C.Caps.TagsOnPortCreate || p.refilling[key] || p.closed[nn.Network.ID] ||
		p.M.X.FreeIn(nn.Network.ID, host) >= p.Cfg.MinFree {
		return
	}
	p.refilling[key] = true
	go p.refill(p.ctx, *nn, host)
}

// Tend runs with every resync: pools where pods were created lately are topped up; a pool where no pod
// took a port for IdleAfter (counted from Raven's start when no pod came since), or whose node is gone, gives
// its free ports back.
func (p *Pools) Tend(ctx context.Context, nets []NamespaceNet, now time.Time) {
	hosts := make([][]string, len(nets))
	perNode := false
	for i := range nets {
		hosts[i] = p.hostsOf(nets[i].Network.ID)
		perNode = perNode || slices.ContainsFunc(hosts[i], func(h string) bool { return h != "" })
	}
	gone := func(string) bool { return false }
	if perNode {
		gone = p.goneNodes(ctx)
	}
	for i := range nets {
		for _, host := range hosts[i] {
			node := host
			if vm, ok := trunkPoolNode(host); ok {
				node = vm
			}
			p.tend(ctx, &nets[i], host, now, node != "" && gone(node))
		}
	}
}

// goneNodes says which nodes the cluster no longer has; none when Nodes is unset or fails.
func (p *Pools) goneNodes(ctx context.Context) func(node string) bool {
	if p.Nodes == nil {
		return func(string) bool { return false }
	}
	names, err := p.Nodes(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing the nodes to find the pools of deleted nodes; will retry at the next resync")
		return func(string) bool { return false }
	}
	live := make(map[string]bool, len(names))
	for _, name := range names {
		live[name] = true
	}
	return func(node string) bool { return !live[node] }
}

// hostsOf lists the pools of a network: those that hold free ports, and those pods took from.
func (p *Pools) hostsOf(networkID string) []string {
	hosts := p.M.X.PoolHosts(networkID)
	p.mu.Lock()
	defer p.mu.Unlock()
	have := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		have[h] = true
	}
	for host := range p.takenAt[networkID] {
		if !have[host] {
			hosts = append(hosts, host)
		}
	}
	return hosts
}

// tend empties the pool for host when it is idle or its node is gone, or tops it up.
func (p *Pools) tend(ctx context.Context, nn *NamespaceNet, host string, now time.Time, nodeGone bool) {
	key := poolKey(nn.Network.ID, host)
	p.mu.Lock()
	p.init()
	taken, ok := p.takenAt[nn.Network.ID][host]
	if !ok {
		taken = p.started // no pod since Raven started: the pool is as old as this process
	}
	idle := nodeGone || p.Cfg.IdleAfter > 0 && now.Sub(taken) >= p.Cfg.IdleAfter
	if nodeGone {
		delete(p.takenAt[nn.Network.ID], host) // once empty, the pool is not tended again
	}
	busy := p.refilling[key] || p.shrinking[key]
	if idle && !busy && p.M.X.FreeIn(nn.Network.ID, host) > 0 {
		p.shrinking[key] = true
		p.bg.Go(func() { p.shrink(ctx, *nn, host, nodeGone) })
	}
	p.mu.Unlock()
	// Only the pools of the configured kind are refilled (per node, or unbound; trunk pools always); those of
	// the other kind, left from before a change of pools.perNode, are emptied once idle.
	_, trunk := trunkPoolNode(host)
	if !idle && (trunk || (host != "") == p.Cfg.PerNode) {
		p.Kick(nn, host)
	}
}

// shrink deletes the free ports of an idle pool, or of the pool of a node that is gone. Each is taken out of
// the pool first, so that no pod can be handed a port being deleted.
func (p *Pools) shrink(ctx context.Context, nn NamespaceNet, host string, nodeGone bool) {
	defer func() {
		p.mu.Lock()
		delete(p.shrinking, poolKey(nn.Network.ID, host))
		p.mu.Unlock()
	}()
	n := 0
	for ctx.Err() == nil {
		done, ok := p.upkeepTurn(ctx)
		if !ok {
			break
		}
		port, ok := p.M.X.TakeFree(nn.Network.ID, host)
		if !ok {
			done()
			break
		}
		err := p.deleteFree(ctx, host, port.ID)
		done()
		if err != nil {
			p.M.X.PutPort(p.M.C.ID, port) // back into the pool; the next resync tries again
			klog.FromContext(ctx).Error(err, "Deleting a free port of a pool being emptied", "port", port.ID, "namespace", nn.Namespace,
				"node", host, "nodeGone", nodeGone)
			return
		}
		p.M.X.DropPort(port.ID)
		n++
	}
	if node, trunk := trunkPoolNode(host); trunk && nodeGone {
		p.M.T.Forget(node)
	}
	klog.FromContext(ctx).V(2).Info("Emptied a port pool", "namespace", nn.Namespace, "node", host, "nodeGone", nodeGone, "deleted", n)
}

// deleteFree deletes a free port taken out of host's pool; a trunk pool's port comes off its trunk first
// (Neutron refuses to delete a subport).
func (p *Pools) deleteFree(ctx context.Context, host, portID string) error {
	if _, trunk := trunkPoolNode(host); trunk {
		if err := p.M.T.Detach(ctx, portID); err != nil {
			return err
		}
	}
	return openstack.IgnoreNotFound(p.M.N.DeletePort(ctx, portID))
}

// Close stops refilling a network (its namespace is going away).
func (p *Pools) Close(networkID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	p.closed[networkID] = true
	delete(p.takenAt, networkID)
}

func (p *Pools) refill(ctx context.Context, nn NamespaceNet, host string) {
	log := klog.FromContext(ctx).WithValues("namespace", nn.Namespace, "network", nn.Network.ID, "node", host)
	key := poolKey(nn.Network.ID, host)
	defer func() {
		p.mu.Lock()
		delete(p.refilling, key)
		p.mu.Unlock()
	}()
	owner := ownership.Owner{Cluster: p.M.C.ID, Kind: ownership.KindPool, Name: nn.Namespace}
	bind := host
	vm, nested, known := p.vmOf(host)
	if nested && !known {
		// No pod of the node took a port since Raven started: its VM's address, which finds the trunk, is not
		// known yet. The node's next pod refills the pool.
		log.V(2).Info("Not refilling a trunk pool before a pod of its node takes a port")
		return
	}
	if nested {
		// A trunk pool's ports are unbound, and tagged with their node: the trunk's parent is what is bound.
		owner.Node, bind = vm.Name, ""
	}
	for ctx.Err() == nil {
		n := p.reserve(nn.Network.ID, key, host)
		if n <= 0 {
			return
		}
		done, ok := p.upkeepTurn(ctx)
		if !ok {
			p.unreserve(n)
			return
		}
		specs := make([]openstack.PortSpec, n)
		for i := range specs {
			specs[i] = openstack.PortSpec{Name: PoolPortName, NetworkID: nn.Network.ID, SubnetID: nn.Subnet.ID,
				DeviceOwner: DeviceOwner, Description: Marker(owner.Tags()), Tags: owner.Tags(),
				SecurityGroups: p.M.C.PodSecurityGroups, HostID: bind}
		}
		ports, err := p.M.N.CreatePorts(ctx, specs)
		done()
		if err != nil {
			p.unreserve(n)
			log.Error(err, "Refilling the port pool; will retry when a pod next takes a port")
			return
		}
		kept := make([]openstack.Port, 0, len(ports))
		for _, port := range ports {
			if err := KeepTags(ctx, p.M.N, &port, owner.Tags()); err != nil {
				log.Error(err, "A pool port came back untagged and could not be tagged", "port", port.ID)
				continue
			}
			kept = append(kept, port)
		}
		if nested {
			p.attach(ctx, vm, kept)
		}
		for _, port := range kept {
			p.M.X.PutPort(p.M.C.ID, port)
		}
		p.unreserve(n)
		log.V(2).Info("Refilled port pool", "created", len(ports), "free", p.M.X.FreeIn(nn.Network.ID, host))
	}
}

// vmOf is the nested node of a trunk pool's host (nested false for any other pool's), as its last pod named it
// (known false when no pod of it took a port since Raven started).
func (p *Pools) vmOf(host string) (vm VMNode, nested, known bool) {
	node, nested := trunkPoolNode(host)
	if !nested {
		return VMNode{}, false, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	vm, known = p.vms[node]
	return vm, true, known
}

// attach puts a trunk pool's new ports on the node VM's trunk, all in one request. A port it could not attach
// stays in the pool: the pod that takes it attaches it (Manager.Attach) before its annotation is written.
func (p *Pools) attach(ctx context.Context, vm VMNode, ports []openstack.Port) {
	if len(ports) == 0 {
		return
	}
	ids := make([]string, len(ports))
	for i := range ports {
		ids[i] = ports[i].ID
	}
	if _, err := p.M.T.AttachAll(ctx, vm, ids); err != nil {
		klog.FromContext(ctx).Error(err, "Attaching a trunk pool's new ports to the node VM's trunk; each is attached when a pod takes it",
			"node", vm.Name, "ports", len(ids))
		return
	}
	for i := range ports {
		ports[i].DeviceOwner = openstack.SubportOwner
	}
}

// Refilling is the number of pools being refilled now.
func (p *Pools) Refilling() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.refilling)
}

// reserve books the ports the next refill of the pool (key, for host on the network) makes: a batch, cut to
// the pool's room under Max and to what the cluster-wide budget has left; 0 when the pool needs none or the
// budget is spent.
func (p *Pools) reserve(networkID, key, host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	free := p.M.X.FreeIn(networkID, host) + p.returning[key] // recycled ports on their way count
	if p.closed[networkID] || free >= p.Cfg.MinFree {
		return 0
	}
	n := min(max(p.Cfg.Batch, 1), p.Cfg.Max-free)
	if n <= 0 {
		return 0
	}
	if room := p.roomLocked(); room < n {
		p.starved++
		n = room
	}
	if n > 0 {
		p.making += n
	}
	return n
}

func (p *Pools) unreserve(n int) {
	p.mu.Lock()
	p.making -= n
	p.mu.Unlock()
}

// roomLocked is how many more free ports the budget allows: what the pools hold, what refills are making and
// what recycling brings back all count.
func (p *Pools) roomLocked() int {
	if p.Cfg.Budget <= 0 {
		return int(^uint(0) >> 1)
	}
	used := p.M.X.FreeTotal() + p.making
	for _, n := range p.returning {
		used += n
	}
	return p.Cfg.Budget - used
}

// Starved is the number of refills the budget cut short or refused since Raven started.
func (p *Pools) Starved() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starved
}
