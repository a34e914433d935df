package neutron

import (
	"context"
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
}

// PoolPortName is the name of a port waiting in a pool.
const PoolPortName = "raven-pool"

// Pools keeps ready ports per namespace network, so that a new pod takes one without waiting for Neutron:
// only its annotation lies on its critical path. Pool ports are tagged raven.kind=pool. A taken port is
// renamed to its pod, gets the pod's UID as device_id and the pod's tags in the background; until then the
// pod's annotation is the record of the claim, and the resync honours it after a restart.
type Pools struct {
	M   *Manager
	Cfg PoolConfig

	mu        sync.Mutex
	lastTake  time.Time
	refilling map[string]bool
	closed    map[string]bool
	returning map[string]int // recycled ports on their way back, by network
	finish    chan claim
	ctx       context.Context
}

type claim struct {
	portID string
	owner  ownership.Owner
	pod    PodRef
	tries  int
}

// Start runs the background workers until ctx ends.
func (p *Pools) Start(ctx context.Context, workers int) {
	p.mu.Lock()
	p.ctx = ctx
	p.refilling = map[string]bool{}
	p.closed = map[string]bool{}
	p.finish = make(chan claim, 4096)
	p.mu.Unlock()
	for range max(workers, 1) {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case c := <-p.finish:
					p.complete(ctx, c)
				}
			}
		}()
	}
}

// Take hands the pod a free port of its namespace's pool, if there is one, and tops the pool up.
func (p *Pools) Take(nn *NamespaceNet, pod PodRef, owner ownership.Owner) (openstack.Port, bool) {
	port, ok := p.M.X.Claim(nn.Network.ID, owner, pod.Name)
	p.mu.Lock()
	p.lastTake = time.Now()
	p.mu.Unlock()
	p.Kick(nn)
	if ok {
		p.enqueue(claim{portID: port.ID, owner: owner, pod: pod})
	}
	return port, ok
}

// Recover honours claims recorded only in pod annotations (Raven stopped before finishing them):
// claimed maps a pool port ID to the pod that holds it.
func (p *Pools) Recover(claimed map[string]PodRef) {
	for portID, pod := range claimed {
		owner := ownership.Owner{Cluster: p.M.C.ID, Kind: ownership.KindPod, UID: pod.UID, Name: pod.Namespace + "/" + pod.Name}
		if p.M.X.ClaimPort(portID, owner, pod.Name) {
			p.enqueue(claim{portID: portID, owner: owner, pod: pod})
		}
	}
}

func (p *Pools) enqueue(c claim) {
	select {
	case p.finish <- c:
	default:
		// The queue is full: the claim stays in the index and the pod's annotation; the next resync retries.
	}
}

// yield waits, up to limit, while pods are arriving (one took a port in the last half second) or wait
// for Neutron: pool upkeep must not take CPU and Neutron time from a burst.
func (p *Pools) yield(ctx context.Context, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		p.mu.Lock()
		recent := time.Since(p.lastTake) < 500*time.Millisecond
		p.mu.Unlock()
		if !recent && (p.M.B == nil || !p.M.B.Busy()) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// complete makes Neutron show the claim: the pod's name, UID and tags.
func (p *Pools) complete(ctx context.Context, c claim) {
	p.yield(ctx, 30*time.Second)
	name, dev := c.pod.Name, c.pod.UID
	_, err := p.M.N.UpdatePort(ctx, c.portID, openstack.PortUpdate{Name: &name, DeviceID: &dev})
	if err == nil {
		err = p.M.N.ReplaceTags(ctx, openstack.ResourcePorts, c.portID, c.owner.Tags())
	}
	switch {
	case err == nil:
		p.M.X.Confirm(c.portID)
	case openstack.IsNotFound(err):
		p.M.X.Confirm(c.portID) // the pod went and its port with it
	default:
		klog.FromContext(ctx).Error(err, "Recording a pool port's new owner in Neutron; will retry", "port", c.portID, "pod", c.owner.Name)
		if c.tries < 10 {
			c.tries++
			time.AfterFunc(time.Duration(c.tries)*time.Second, func() { p.enqueue(c) })
		}
	}
}

// Recycle makes port, whose pod is gone or finished, a free port of its namespace's pool again. ok is false
// when the pool is full, closed or not recycling, or the port is claimed and not yet recorded in Neutron:
// the caller deletes it instead.
func (p *Pools) Recycle(ctx context.Context, nn *NamespaceNet, port openstack.Port) (ok bool, err error) {
	if !p.Cfg.Recycle || nn == nil || nn.Network.ID != port.NetworkID || p.M.X.Claimed(port.ID) {
		return false, nil
	}
	// Reserve a place first: several workers recycle at once, and the pool must not grow past Max.
	p.mu.Lock()
	if p.closed[nn.Network.ID] || p.M.X.FreeIn(nn.Network.ID)+p.returning[nn.Network.ID] >= p.Cfg.Max {
		p.mu.Unlock()
		return false, nil
	}
	if p.returning == nil {
		p.returning = map[string]int{}
	}
	p.returning[nn.Network.ID]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.returning[nn.Network.ID]--; p.returning[nn.Network.ID] == 0 {
			delete(p.returning, nn.Network.ID)
		}
		p.mu.Unlock()
	}()
	// Detach first, tag last: until the tags say pool, nobody can take the port, so no write of this
	// function lands after a new owner's. A crash in between leaves a detached port of a gone pod, which
	// the sweep releases.
	name, dev := PoolPortName, ""
	updated, err := p.M.N.UpdatePort(ctx, port.ID, openstack.PortUpdate{Name: &name, DeviceID: &dev})
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

// Kick refills the network's pool in the background when it runs low.
func (p *Pools) Kick(nn *NamespaceNet) {
	if nn == nil || nn.Subnet == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil || p.refilling[nn.Network.ID] || p.closed[nn.Network.ID] || p.M.X.FreeIn(nn.Network.ID) >= p.Cfg.MinFree {
		return
	}
	p.refilling[nn.Network.ID] = true
	go p.refill(p.ctx, *nn)
}

// Close stops refilling a network (its namespace is going away).
func (p *Pools) Close(networkID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed != nil {
		p.closed[networkID] = true
	}
}

func (p *Pools) refill(ctx context.Context, nn NamespaceNet) {
	log := klog.FromContext(ctx).WithValues("namespace", nn.Namespace, "network", nn.Network.ID)
	defer func() {
		p.mu.Lock()
		delete(p.refilling, nn.Network.ID)
		p.mu.Unlock()
	}()
	owner := ownership.Owner{Cluster: p.M.C.ID, Kind: ownership.KindPool, Name: nn.Namespace}
	for ctx.Err() == nil {
		p.mu.Lock()
		closed := p.closed[nn.Network.ID]
		free := p.M.X.FreeIn(nn.Network.ID) + p.returning[nn.Network.ID] // recycled ports on their way count
		p.mu.Unlock()
		if closed || free >= p.Cfg.MinFree {
			return
		}
		n := min(max(p.Cfg.Batch, 1), p.Cfg.Max-free)
		if n <= 0 {
			return
		}
		p.yield(ctx, 30*time.Second)
		specs := make([]openstack.PortSpec, n)
		for i := range specs {
			specs[i] = openstack.PortSpec{Name: PoolPortName, NetworkID: nn.Network.ID, SubnetID: nn.Subnet.ID,
				DeviceOwner: DeviceOwner, Description: "ready port of namespace " + nn.Namespace, Tags: owner.Tags()}
		}
		ports, err := p.M.N.CreatePorts(ctx, specs)
		if err != nil {
			log.Error(err, "Refilling the port pool; will retry when a pod next takes a port")
			return
		}
		for _, port := range ports {
			p.M.X.PutPort(p.M.C.ID, port)
		}
		log.V(2).Info("Refilled port pool", "created", len(ports), "free", p.M.X.FreeIn(nn.Network.ID))
	}
}

// Refilling is the number of pools being refilled now.
func (p *Pools) Refilling() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.refilling)
}
