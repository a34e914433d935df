package neutron

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// drain plays the pool workers' part in the test's goroutine: it finishes every claim that is due, one at a
// time, as if no pod had taken a port for a while.
func drain(ctx context.Context, p *Pools) {
	for {
		settle(p)
		c, ok, _ := p.next()
		if !ok {
			return
		}
		p.complete(ctx, c)
	}
}

// finishHolding drains the claims of a port until a worker holds the claim's last step (the one that ends
// with Confirm: the tags of a claim Neutron shows by device_id, the name and device_id of one it shows by its
// tags); during runs while it holds it, then the worker finishes it.
func finishHolding(ctx context.Context, t *testing.T, p *Pools, during func()) {
	t.Helper()
	for {
		settle(p)
		c, ok, _ := p.next()
		if !ok {
			t.Fatal("no claim to finish")
		}
		if c.Deferred {
			p.complete(ctx, c) // the tags; the name and device_id follow
			continue
		}
		during()
		p.complete(ctx, c)
		return
	}
}

// settle says no pod has taken a port lately, so that a worker writes a claim at once.
func settle(p *Pools) {
	p.mu.Lock()
	p.lastTake = time.Time{}
	p.mu.Unlock()
}

func podOwner(p PodRef) ownership.Owner {
	return ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: p.UID, Name: p.Namespace + "/" + p.Name}
}

// describe says what Neutron shows of a port.
func describe(n *fake.Neutron, id string) (name, device, owner string) {
	n.Lock()
	defer n.Unlock()
	p, ok := n.Ports[id]
	if !ok {
		return "", "", "(deleted)"
	}
	o, _ := ownership.Parse(p.Tags)
	return p.Name, p.DeviceID, string(o.Kind) + ":" + o.UID
}

// inFlight is Neutron with a hook that runs once, in the middle of the next port update or tag request: what
// happens while a worker waits for Neutron.
type inFlight struct {
	openstack.Networking
	hook func()
}

func (n *inFlight) fire() {
	if h := n.hook; h != nil {
		n.hook = nil
		h()
	}
}

func (n *inFlight) UpdatePort(ctx context.Context, id string, u openstack.PortUpdate) (*openstack.Port, error) {
	n.fire()
	return n.Networking.UpdatePort(ctx, id, u)
}

func (n *inFlight) ReplaceTags(ctx context.Context, r openstack.Resource, id string, tags []string) error {
	n.fire()
	return n.Networking.ReplaceTags(ctx, r, id, tags)
}

// With pools.recycle a port changes hands: the claim of a pod that is gone must never be written over the
// port that another pod now uses, nor end that pod's claim, whatever a resync offers the workers meanwhile.
func TestAPortsClaimIsItsOwnersOnly(t *testing.T) {
	cases := []struct {
		name    string
		perNode bool
		// stale is how a resync offers pod a's claim to the workers a second time: while a worker holds it
		// ("held"), from a list of claims read before the worker finished it ("read"), or while the worker
		// waits for Neutron to write it ("in flight").
		stale string
	}{
		{name: "a claim a resync offers while a worker holds it is not written over the port's next pod", stale: "held"},
		{name: "a claim a resync read before it was finished is not written over the port's next pod", stale: "read"},
		{name: "a claim a resync offers while its write is in flight is not written again by a second worker", stale: "in flight"},
		{name: "a per-node claim a resync offers while a worker holds it is not written over the port's next pod", perNode: true, stale: "held"},
		{name: "a per-node claim a resync read before it was finished is not written over the port's next pod", perNode: true, stale: "read"},
		{name: "a per-node claim a resync offers while its write is in flight is not written again by a second worker", perNode: true, stale: "in flight"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recycleAndRetake(t, tc.perNode, tc.stale)
		})
	}
}

// recycleAndRetake: pod a takes a pool port; a worker finishes the claim while a resync offers it again
// (stale); pod a is deleted, its port recycled and taken by pod b; the workers finish what is pending. Pod b's
// port must be pod b's, in Neutron and after a listing.
func recycleAndRetake(t *testing.T, perNode bool, stale string) {
	r := podATakesAPoolPort(t, perNode)
	read := r.finishPodAsClaimWhileAResyncOffersIt(t, stale)
	if stale != "in flight" {
		r.checkPodAsClaimIsFinished(t)
		r.m.P.Offer(read)
		r.deletePodAAndTakeForPodB(t)
		if r.bPort.ID != r.port.ID {
			t.Fatalf("pod b took port %q, want pod a's port, recycled", r.bPort.ID)
		}
	}
	drain(r.ctx, r.m.P)
	r.checkPodAsPortIsPodBsOrDeleted(t)
	// A resync sees pod b's port as pod b's: the sweep of pod a's ports cannot touch it.
	relist(r.ctx, t, r.n, r.m)
	r.checkOnlyPodBHasAPort(t)
	r.checkNoClaimIsLeft(t)
}

// recycling is what recycleAndRetake works on: a namespace with one pool port, which pod a took, and pod b.
type recycling struct {
	ctx     context.Context
	n       *fake.Neutron
	neutron *inFlight // what the manager calls: n, with a hook
	m       *Manager
	nn      *NamespaceNet
	host    string // the pool's node; "" for the namespace's pool
	a, b    PodRef
	port    openstack.Port // the pool port pod a took
	bPort   openstack.Port // the port pod b took, once it did
}

// podATakesAPoolPort makes a namespace whose pools recycle (per node when perNode) with one pool port, and
// has pod a take it.
func podATakesAPoolPort(t *testing.T, perNode bool) *recycling {
	t.Helper()
	r := &recycling{
		a:   PodRef{UID: "uid-a", Namespace: "ns", Name: "a", Node: "node-a"},
		b:   PodRef{UID: "uid-b", Namespace: "ns", Name: "b", Node: "node-a"},
		ctx: context.Background(),
		n:   fake.NewNeutron(),
	}
	r.m, r.nn = setupNamespace(t, r.n)
	r.neutron = &inFlight{Networking: r.n}
	r.m.N = r.neutron
	r.m.P = &Pools{M: r.m, Cfg: PoolConfig{Max: 5, Batch: 1, Recycle: true, PerNode: perNode}, retry: time.Millisecond, quiet: time.Nanosecond}
	if perNode {
		r.host = "node-a"
	}
	r.port = boundPoolPort(t, r.n, r.m, r.nn, r.host)
	if got, ok, err := r.m.P.Take(r.ctx, r.nn, r.a, podOwner(r.a)); err != nil || !ok || got.ID != r.port.ID {
		t.Fatalf("pod a's Take = %s, %v, %v; want the free port", got.ID, ok, err)
	}
	return r
}

// finishPodAsClaimWhileAResyncOffersIt has a worker finish pod a's claim while a resync offers it a second
// time, as stale says: while the worker holds it ("held"), from a list of claims read while it does ("read":
// the list is returned), or while the worker waits for Neutron to write it ("in flight": then a second worker
// drains the claims, and pod a is deleted and pod b takes a port, before Neutron answers the first).
func (r *recycling) finishPodAsClaimWhileAResyncOffersIt(t *testing.T, stale string) []Claim {
	t.Helper()
	var read []Claim
	finishHolding(r.ctx, t, r.m.P, func() {
		switch stale {
		case "held":
			r.m.P.Offer(r.m.X.Claims())
		case "read":
			read = r.m.X.Claims()
		case "in flight":
			r.neutron.hook = func() {
				r.m.P.Offer(r.m.X.Claims())
				drain(r.ctx, r.m.P) // a second worker
				r.deletePodAAndTakeForPodB(t)
			}
		}
	})
	return read
}

// deletePodAAndTakeForPodB: pod a is deleted, and pod b takes a port.
func (r *recycling) deletePodAAndTakeForPodB(t *testing.T) {
	t.Helper()
	if _, err := r.m.ReleasePorts(r.ctx, r.a.UID); err != nil {
		t.Errorf("releasing pod a's port: %v", err)
	}
	var err error
	if r.bPort, _, err = r.m.P.Take(r.ctx, r.nn, r.b, podOwner(r.b)); err != nil {
		t.Errorf("pod b's Take: %v", err)
	}
}

// checkPodAsClaimIsFinished: Neutron shows pod a's port as pod a's.
func (r *recycling) checkPodAsClaimIsFinished(t *testing.T) {
	t.Helper()
	if name, dev, owner := describe(r.n, r.port.ID); !ownedInNeutron(r.n, r.port.ID, r.a) {
		t.Fatalf("pod a's claim is not finished: Neutron shows name %q, device_id %q, owner %s", name, dev, owner)
	}
}

// checkPodAsPortIsPodBsOrDeleted: Neutron shows pod a's former port as pod b's when pod b took it, and as
// deleted otherwise.
func (r *recycling) checkPodAsPortIsPodBsOrDeleted(t *testing.T) {
	t.Helper()
	if r.bPort.ID == r.port.ID {
		if name, dev, owner := describe(r.n, r.port.ID); !ownedInNeutron(r.n, r.port.ID, r.b) {
			t.Fatalf("pod b's port shows name %q, device_id %q, owner %s in Neutron; want pod b's", name, dev, owner)
		}
	} else if _, _, owner := describe(r.n, r.port.ID); owner != "(deleted)" {
		// Pod a was deleted before Neutron showed its claim: its port is not recycled but deleted.
		t.Fatalf("pod a's port is %s, and not pod b's; want it deleted", owner)
	}
}

// checkOnlyPodBHasAPort: the index gives pod b the port it took, pod a none, and the pool no free port.
func (r *recycling) checkOnlyPodBHasAPort(t *testing.T) {
	t.Helper()
	var want []string // pod b's ports
	if r.bPort.ID != "" {
		want = []string{r.bPort.ID}
	}
	got := []string{}
	for _, p := range r.m.X.PortsOf(r.b.UID) {
		got = append(got, p.ID)
	}
	if !slices.Equal(got, want) || len(r.m.X.PortsOf(r.a.UID)) != 0 || r.m.X.FreeIn(r.nn.Network.ID, r.host) != 0 {
		t.Fatalf("after a resync pod b has ports %v, pod a %v, the pool %d free; want pod b's %v, pod a none, the pool none",
			got, r.m.X.PortsOf(r.a.UID), r.m.X.FreeIn(r.nn.Network.ID, r.host), want)
	}
}

// checkNoClaimIsLeft: no claim is pending for the workers, nor held in the index.
func (r *recycling) checkNoClaimIsLeft(t *testing.T) {
	t.Helper()
	if r.m.P.Pending() != 0 || len(r.m.X.Claims()) != 0 {
		t.Fatalf("%d claims pending, %d in the index; want none", r.m.P.Pending(), len(r.m.X.Claims()))
	}
}

// A worker confirms, marks and checks the claim it holds, by port and pod: the claim of another pod on the
// same port is not its to end.
func TestIndexClaimsAreByOwner(t *testing.T) {
	pool := ownership.Owner{Cluster: "c1", Kind: ownership.KindPool, Name: "ns"}
	a, b := podOwner(PodRef{UID: "uid-a", Namespace: "ns", Name: "a"}), podOwner(PodRef{UID: "uid-b", Namespace: "ns", Name: "b"})
	cases := []struct {
		name string
		act  func(x *Index)
		// want says whether pod b's claim is still there, and tagged.
		wantClaimed, wantTagged bool
	}{
		{name: "another pod's confirm leaves the claim", act: func(x *Index) { x.Confirm("p1", a.UID) }, wantClaimed: true},
		{name: "its own pod's confirm ends the claim", act: func(x *Index) { x.Confirm("p1", b.UID) }},
		{name: "another pod's mark leaves the claim as it is", act: func(x *Index) { x.MarkTagged("p1", a.UID) }, wantClaimed: true},
		{name: "its own pod's mark changes the claim", act: func(x *Index) { x.MarkTagged("p1", b.UID) }, wantClaimed: true, wantTagged: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := NewIndex()
			x.PutPort("c1", openstack.Port{ID: "p1", NetworkID: "n", Tags: pool.Tags()})
			x.Claim("n", "", b, "b")
			tc.act(x)
			if x.ClaimedBy("p1", a.UID) {
				t.Fatal("the claim is pod a's")
			}
			claims := x.Claims()
			if got := x.ClaimedBy("p1", b.UID); got != tc.wantClaimed {
				t.Fatalf("pod b's claim held: %v, want %v", got, tc.wantClaimed)
			}
			if tagged := len(claims) == 1 && claims[0].Tagged; tagged != tc.wantTagged {
				t.Fatalf("claims %+v; want tagged %v", claims, tc.wantTagged)
			}
		})
	}
}

// The workers' queue follows the index: it holds a port's claim once, and only while the claim's pod holds it.
func TestPendingClaimsFollowTheIndex(t *testing.T) {
	a := PodRef{UID: "uid-a", Namespace: "ns", Name: "a", Node: "node-a"}
	b := PodRef{UID: "uid-b", Namespace: "ns", Name: "b", Node: "node-a"}
	cases := []struct {
		name string
		// act runs after pod a took port, a per-node pool port (its claim is pending).
		act func(t *testing.T, m *Manager, port string)
		// wantPending is the owner of the port's pending claim ("": none).
		wantPending string
		// wantWrites is how many requests the workers sent Neutron.
		wantWrites int
	}{
		{
			name: "a claim a resync offers while a worker holds it is not pending a second time",
			act: func(t *testing.T, m *Manager, port string) {
				if _, ok, _ := m.P.next(); !ok {
					t.Fatal("no claim to hand a worker")
				}
				m.P.Offer(m.X.Claims())
			},
		},
		{
			name: "a claim a resync read before its pod's port changed hands is not queued",
			act: func(t *testing.T, m *Manager, port string) {
				read := m.X.Claims()
				c, _, _ := m.P.next()
				m.P.complete(context.Background(), c) // the tags; the name and device_id are pending
				c, _, _ = m.P.next()
				m.P.complete(context.Background(), c) // the claim is finished
				m.P.Offer(read)
			},
			wantWrites: 2,
		},
		{
			name: "the claim of the port's next pod takes the place of its last pod's",
			act: func(t *testing.T, m *Manager, port string) {
				retake(t, m, port, a, b)
				m.P.Offer(m.X.Claims())
			},
			wantPending: b.UID,
		},
		{
			name: "a worker writes nothing of a claim its pod no longer holds",
			act: func(t *testing.T, m *Manager, port string) {
				c, _, _ := m.P.next()
				retake(t, m, port, a, b)
				m.P.complete(context.Background(), c)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			n := fake.NewNeutron()
			m, nn := setupNamespace(t, n)
			m.P = &Pools{M: m, Cfg: PoolConfig{Max: 5, Batch: 1, PerNode: true}, retry: time.Millisecond, quiet: time.Nanosecond}
			port := boundPoolPort(t, n, m, nn, "node-a")
			if _, ok, err := m.P.Take(ctx, nn, a, podOwner(a)); err != nil || !ok {
				t.Fatalf("pod a's Take: %v, %v", ok, err)
			}
			settle(m.P)
			writes := n.Wrote()
			tc.act(t, m, port.ID)
			m.P.mu.Lock()
			pc, pending := m.P.pending[port.ID]
			m.P.mu.Unlock()
			if got := pc.c.Owner.UID; pending != (tc.wantPending != "") || got != tc.wantPending {
				t.Fatalf("the port's pending claim is pod %q's (pending %v), want %q's", got, pending, tc.wantPending)
			}
			if m.P.Pending() > 1 {
				t.Fatalf("%d claims pending, want the port's at most", m.P.Pending())
			}
			if got := n.Wrote() - writes; got != tc.wantWrites {
				t.Fatalf("the workers sent Neutron %d writes, want %d", got, tc.wantWrites)
			}
		})
	}
}

// retake moves the port from pod from to pod to in the index, as a recycle and a take do: from's claim is
// over, the port is free, and to claims it.
func retake(t *testing.T, m *Manager, portID string, from, to PodRef) {
	t.Helper()
	m.X.Confirm(portID, from.UID)
	free := ownership.Owner{Cluster: "c1", Kind: ownership.KindPool, Name: "ns"}
	m.X.PutPort("c1", openstack.Port{ID: portID, Name: PoolPortName, NetworkID: m.X.Network("ns-uid").Network.ID, HostID: to.Node, Tags: free.Tags()})
	if got, ok := m.X.Claim(m.X.Network("ns-uid").Network.ID, to.Node, podOwner(to), to.Name); !ok || got.ID != portID {
		t.Fatalf("pod %s could not claim the port", to.Name)
	}
	m.X.MarkDeferred(portID, to.UID)
}
