package neutron

import (
	"context"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// poolPort makes a free, unbound pool port of namespace ns in Neutron and the index.
func poolPort(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet) openstack.Port {
	t.Helper()
	return boundPoolPort(t, n, m, nn, "")
}

// ownedInNeutron says Neutron shows the port as the pod's: its name, its UID as device_id, its tags.
func ownedInNeutron(n *fake.Neutron, id string, pod PodRef) bool {
	n.Lock()
	defer n.Unlock()
	p, ok := n.Ports[id]
	if !ok {
		return false
	}
	o, _ := ownership.Parse(p.Tags)
	return p.Name == pod.Name && p.DeviceID == pod.UID && o.Kind == ownership.KindPod && o.UID == pod.UID
}

func TestPoolClaimsAreNeverLost(t *testing.T) {
	pod := PodRef{UID: "uid-1", Namespace: "ns", Name: "p", Node: "node-a"}
	owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: pod.UID, Name: "ns/p"}
	cases := []struct {
		name string
		// tagFailures makes the tag call fail this many times first.
		tagFailures int
		// restart builds a new index from Neutron after the claim, as a restarted Raven does.
		restart bool
	}{
		{name: "a claim taken before the workers start is finished once they start"},
		{name: "a claim whose tag call fails more often than any retry budget is finished when Neutron recovers", tagFailures: 15},
		{name: "a claim Neutron records but whose tags never came is finished by a restarted Raven's resync", restart: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := fake.NewNeutron()
			m, nn := setupNamespace(t, n)
			m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: 0, Max: 5, Batch: 1}, retry: time.Millisecond}
			free := poolPort(t, n, m, nn)
			if tc.tagFailures > 0 {
				n.Fail("ReplaceTags", tc.tagFailures, serverError)
			}
			port, ok, err := m.P.Take(ctx, nn, pod, owner)
			if err != nil || !ok || port.ID != free.ID {
				t.Fatalf("Take = %s, %v, %v; want the free port", port.ID, ok, err)
			}
			if port.HostID != "node-a" {
				t.Fatalf("the claimed port is bound to %q, want the pod's node", port.HostID)
			}
			if tc.restart {
				restart(t, n, m, pod, free.ID, nn.Network.ID, "")
			}
			m.P.Start(ctx, 2)
			eventually(t, "Neutron shows the port as the pod's", func() bool { return ownedInNeutron(n, free.ID, pod) })
			eventually(t, "no claim is pending", func() bool { return m.P.Pending() == 0 && len(m.X.Claims()) == 0 })
		})
	}
}

// restart stops Raven after a claim: a new process lists Neutron, must find the claimed port to be the pod's
// and not free in the pool for host, and offers the claims it finds.
func restart(t *testing.T, n *fake.Neutron, m *Manager, pod PodRef, portID, networkID, host string) {
	t.Helper()
	m.P = &Pools{M: m, Cfg: m.P.Cfg, retry: time.Millisecond}
	m.X = NewIndex()
	snap, err := List(context.Background(), n, m.C)
	if err != nil {
		t.Fatal(err)
	}
	// The pod's annotation names its port, as the pods' cache shows it to a restarted Raven.
	owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: pod.UID, Name: pod.Namespace + "/" + pod.Name}
	snap.Annotated = map[string]Annotation{portID: {Owner: owner, Name: pod.Name}}
	m.X.Replace("c1", snap)
	if got := m.X.PortsOf(pod.UID); len(got) != 1 || got[0].ID != portID || m.X.FreeIn(networkID, host) != 0 {
		t.Fatalf("after a restart the claimed port is not the pod's (ports %v, free %d)", got, m.X.FreeIn(networkID, host))
	}
	m.P.Offer(m.X.Claims())
}

func TestATakeNeutronRefusesLeavesThePortInThePool(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	m.P = &Pools{M: m, Cfg: PoolConfig{Max: 5, Batch: 1}}
	free := poolPort(t, n, m, nn)
	n.Fail("UpdatePort", 1, openstack.NewError("neutron port update", openstack.KindConflict, 409, "Conflict"))
	pod := PodRef{UID: "uid-1", Namespace: "ns", Name: "p", Node: "node-a"}
	owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: pod.UID, Name: "ns/p"}
	if _, _, err := m.P.Take(ctx, nn, pod, owner); err == nil {
		t.Fatal("Take succeeded although Neutron refused the claim")
	}
	if m.X.FreeIn(nn.Network.ID, "") != 1 || len(m.X.PortsOf(pod.UID)) != 0 || len(m.X.Claims()) != 0 {
		t.Fatal("a refused claim did not leave the port free in the pool")
	}
	port, ok, err := m.P.Take(ctx, nn, pod, owner)
	if err != nil || !ok || port.ID != free.ID {
		t.Fatalf("the retry did not take the same free port: %v %v", ok, err)
	}
}

func TestRefill(t *testing.T) {
	cases := []struct {
		name         string
		tagsOnCreate bool
		wantFree     int
	}{
		{name: "a pool fills up to its low watermark", tagsOnCreate: true, wantFree: 3},
		{name: "without tags on create no pool port is made, and refill stops at once", tagsOnCreate: false, wantFree: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := fake.NewNeutron()
			n.Caps.TagsOnPortCreate = tc.tagsOnCreate
			m, nn := setupNamespace(t, n)
			m.C.Caps.TagsOnPortCreate = tc.tagsOnCreate
			m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: 3, Max: 5, Batch: 2}}
			m.P.Start(ctx, 1)
			m.P.Kick(nn, "")
			eventually(t, "the refill ends", func() bool { return m.P.Refilling() == 0 })
			if got := m.X.FreeIn(nn.Network.ID, ""); got < tc.wantFree || got > 5 || tc.wantFree == 0 && got != 0 {
				t.Fatalf("free ports %d, want at least %d and at most Max", got, tc.wantFree)
			}
			n.Lock()
			defer n.Unlock()
			for _, p := range n.Ports {
				if o, _ := ownership.Parse(p.Tags); o.Kind != ownership.KindPool || p.HostID != "" {
					t.Fatalf("pool port %s: tags %v, host %q; want pool tags and unbound", p.ID, p.Tags, p.HostID)
				}
			}
		})
	}
}

func TestAPortIsBoundToItsPodsNode(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	pod := PodRef{UID: "uid-1", Namespace: "ns", Name: "p"}
	port, _, err := m.EnsurePort(ctx, pod, nn, "")
	if err != nil || port.HostID != "" {
		t.Fatalf("an unscheduled pod's port: %v, host %q; want unbound", err, port.HostID)
	}
	pod.Node = "node-a"
	port, _, err = m.EnsurePort(ctx, pod, nn, port.ID)
	if err != nil || port.HostID != "node-a" || port.VIFType != "ovs" {
		t.Fatalf("after scheduling: %v, host %q, vif %q; want bound to node-a", err, port.HostID, port.VIFType)
	}
	writes := n.Wrote()
	if _, _, err = m.EnsurePort(ctx, pod, nn, port.ID); err != nil || n.Wrote() != writes {
		t.Fatalf("a bound port was written again (%d writes, %v)", n.Wrote()-writes, err)
	}
}

func TestPoolsFillOnlyWherePodsAreCreated(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := fake.NewNeutron()
	m, busy := setupNamespace(t, n)
	idle, err := m.EnsureNamespace(ctx, "idle-uid", "idle")
	if err != nil {
		t.Fatal(err)
	}
	m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: 2, Max: 4, Batch: 2, IdleAfter: time.Minute}}
	m.P.Start(ctx, 1)
	// A namespace without pods that still holds free ports (from an earlier run) keeps them for IdleAfter
	// from Raven's start, then gives them back.
	poolPort(t, n, m, idle)
	poolPort(t, n, m, idle)
	pod := PodRef{UID: "u1", Namespace: "ns", Name: "p", Node: "node-a"}
	if _, _, err := m.EnsurePort(ctx, pod, busy, ""); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	m.P.Tend(ctx, m.X.Networks(), now)
	eventually(t, "the busy namespace's pool fills", func() bool {
		return m.X.FreeIn(busy.Network.ID, "") >= 2 && m.P.Refilling() == 0
	})
	if m.X.FreeIn(idle.Network.ID, "") != 2 {
		t.Fatalf("a restart emptied a pool at once (%d free ports left of 2)", m.X.FreeIn(idle.Network.ID, ""))
	}
	// Once no pod asked for IdleAfter, both pools go.
	m.P.Tend(ctx, m.X.Networks(), now.Add(2*time.Minute))
	eventually(t, "the pools of namespaces gone idle empty", func() bool {
		return m.X.FreeIn(busy.Network.ID, "") == 0 && m.X.FreeIn(idle.Network.ID, "") == 0
	})
	n.Lock()
	defer n.Unlock()
	for _, p := range n.Ports {
		if o, _ := ownership.Parse(p.Tags); o.Kind == ownership.KindPool {
			t.Fatalf("free pool port %s left in Neutron", p.ID)
		}
	}
}

func TestBeforeThePortsAreListedAPodFindsItsOwnPort(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	pod := PodRef{UID: "uid-1", Namespace: "ns", Name: "p", Node: "node-a"}
	first, _, err := m.EnsurePort(ctx, pod, nn, "")
	if err != nil {
		t.Fatal(err)
	}
	// A restarted Raven has listed the networks only.
	m.X = NewIndex()
	snap, err := ListNetworks(ctx, n, m.C)
	if err != nil {
		t.Fatal(err)
	}
	m.X.Replace("c1", snap)
	if m.X.PortsLoaded() {
		t.Fatal("the index claims to hold every port after a listing of networks")
	}
	nn = m.X.Network("ns-uid")
	again, created, err := m.EnsurePort(ctx, pod, nn, "")
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("EnsurePort = %s (created %v, %v); want the pod's own port %s, not a second one", again.ID, created, err, first.ID)
	}
}

// A claim whose update fails after Neutron applied it (a 500 after the commit, a timeout) must not put the
// port back in the pool: another pod would take a port Neutron shows as the first one's. The next listing
// gives the port to the pod Neutron names.
func TestAClaimWithAnUnknownOutcomeIsNeverHandedToAnotherPod(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	m.P = &Pools{M: m, Cfg: PoolConfig{Max: 5, Batch: 1}}
	free := poolPort(t, n, m, nn)
	a := PodRef{UID: "uid-a", Namespace: "ns", Name: "a", Node: "node-a"}
	b := PodRef{UID: "uid-b", Namespace: "ns", Name: "b", Node: "node-a"}
	owner := func(p PodRef) ownership.Owner {
		return ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: p.UID, Name: "ns/" + p.Name}
	}
	n.FailApplied("UpdatePort", 1, serverError)
	if _, _, err := m.P.Take(ctx, nn, a, owner(a)); err == nil {
		t.Fatal("Take succeeded although the update failed")
	}
	if got, ok, err := m.P.Take(ctx, nn, b, owner(b)); err != nil || ok {
		t.Fatalf("pod b took port %s, which Neutron shows as pod a's (ok %v, err %v)", got.ID, ok, err)
	}
	snap, err := List(ctx, n, m.C)
	if err != nil {
		t.Fatal(err)
	}
	m.X.Replace("c1", snap)
	if got := m.X.PortsOf(a.UID); len(got) != 1 || got[0].ID != free.ID {
		t.Fatalf("after a listing pod a's ports are %v, want the port Neutron shows as its own", got)
	}
	if m.X.FreeIn(nn.Network.ID, "") != 0 || len(m.X.PortsOf(b.UID)) != 0 {
		t.Fatal("after a listing the port is free or pod b's")
	}
}

// While pods' creates keep Neutron busy for minutes (a burst on a slow Neutron), a claim still gets its pod's
// tags within seconds: until then Neutron shows the pod's port as a free pool port.
func TestAClaimIsFinishedWhilePodCreatesStayInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	m.B = &Batcher{N: n, running: 1} // a create in flight for the whole test
	m.P = &Pools{M: m, Cfg: PoolConfig{Max: 5, Batch: 1}, retry: time.Millisecond}
	free := poolPort(t, n, m, nn)
	pod := PodRef{UID: "uid-1", Namespace: "ns", Name: "p", Node: "node-a"}
	owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: pod.UID, Name: "ns/p"}
	if _, ok, err := m.P.Take(ctx, nn, pod, owner); err != nil || !ok {
		t.Fatalf("Take: %v %v", ok, err)
	}
	start := time.Now()
	m.P.Start(ctx, 1)
	eventually(t, "Neutron shows the port as the pod's", func() bool { return ownedInNeutron(n, free.ID, pod) })
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the claim took %s to finish while a create was in flight", d)
	}
}

// boundPoolPort makes a free pool port of namespace ns bound to node ("": unbound), in Neutron and the index.
func boundPoolPort(t *testing.T, n *fake.Neutron, m *Manager, nn *NamespaceNet, node string) openstack.Port {
	t.Helper()
	pool := ownership.Owner{Cluster: "c1", Kind: ownership.KindPool, Name: "ns"}
	p, err := n.CreatePort(context.Background(), openstack.PortSpec{Name: PoolPortName, NetworkID: nn.Network.ID, DeviceOwner: DeviceOwner,
		Tags: pool.Tags(), HostID: node})
	if err != nil {
		t.Fatal(err)
	}
	m.X.PutPort("c1", *p)
	return *p
}

func TestPerNodePools(t *testing.T) {
	pod := PodRef{UID: "uid-1", Namespace: "ns", Name: "p", Node: "node-a"}
	owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: pod.UID, Name: "ns/p"}
	cases := []struct {
		name string
		// restart builds a new index from Neutron right after the take, as a restarted Raven does.
		restart bool
		// nameFailures makes the background port update fail this many times first.
		nameFailures int
	}{
		{name: "a pod takes a port bound to its node with no request at all; tags, name and device_id follow"},
		{name: "a claim held in memory and the pod's annotation only is found by a restarted Raven, and finished", restart: true},
		{name: "a claim whose name update keeps failing is finished when Neutron recovers", nameFailures: 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := fake.NewNeutron()
			m, nn := setupNamespace(t, n)
			m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: 0, Max: 5, Batch: 1, PerNode: true}, retry: time.Millisecond, quiet: time.Millisecond}
			other := boundPoolPort(t, n, m, nn, "node-b")
			free := boundPoolPort(t, n, m, nn, "node-a")
			if tc.nameFailures > 0 {
				n.Fail("UpdatePort", tc.nameFailures, serverError)
			}
			updates, tags := n.Called("UpdatePort"), n.Called("ReplaceTags")
			port, ok, err := m.P.Take(ctx, nn, pod, owner)
			if err != nil || !ok || port.ID != free.ID || port.HostID != "node-a" {
				t.Fatalf("Take = %s on %q, %v, %v; want the free port bound to node-a (node-b's is %s)", port.ID, port.HostID, ok, err, other.ID)
			}
			if n.Called("UpdatePort") != updates || n.Called("ReplaceTags") != tags {
				t.Fatalf("Take made %d port updates and %d tag requests, want none", n.Called("UpdatePort")-updates, n.Called("ReplaceTags")-tags)
			}
			if m.X.FreeIn(nn.Network.ID, "node-b") != 1 || m.X.FreeIn(nn.Network.ID, "node-a") != 0 {
				t.Fatal("the take used another node's pool")
			}
			if tc.restart {
				restart(t, n, m, pod, free.ID, nn.Network.ID, "node-a")
			}
			m.P.Start(ctx, 2)
			eventually(t, "Neutron shows the port as the pod's", func() bool { return ownedInNeutron(n, free.ID, pod) })
			eventually(t, "no claim is pending", func() bool { return m.P.Pending() == 0 && len(m.X.Claims()) == 0 })
			n.Lock()
			host := n.Ports[free.ID].HostID
			n.Unlock()
			if host != "node-a" {
				t.Fatalf("the port is bound to %q after the claim, want node-a", host)
			}
		})
	}
}

func TestPerNodePoolsFillPerNodeAndSkipUnscheduledPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	m.C.Caps.TagsOnPortCreate = true
	m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: 2, Max: 5, Batch: 2, PerNode: true}}
	m.P.Start(ctx, 1)
	owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: "uid-u", Name: "ns/u"}
	if _, ok, err := m.P.Take(ctx, nn, PodRef{UID: "uid-u", Namespace: "ns", Name: "u"}, owner); ok || err != nil {
		t.Fatalf("an unscheduled pod took a pool port (%v, %v)", ok, err)
	}
	m.P.Kick(nn, "node-a")
	eventually(t, "node-a's pool to fill", func() bool { return m.X.FreeIn(nn.Network.ID, "node-a") >= 2 && m.P.Refilling() == 0 })
	if m.X.FreeIn(nn.Network.ID, "") != 0 || m.X.FreeIn(nn.Network.ID, "node-b") != 0 {
		t.Fatal("a node's refill filled another pool")
	}
	n.Lock()
	defer n.Unlock()
	for _, p := range n.Ports {
		if p.Name == PoolPortName && p.HostID != "node-a" {
			t.Fatalf("pool port %s is bound to %q, want node-a", p.ID, p.HostID)
		}
	}
}

func TestTendRefillsOnlyPoolsOfTheConfiguredKind(t *testing.T) {
	for _, perNode := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		n := fake.NewNeutron()
		m, nn := setupNamespace(t, n)
		m.C.Caps.TagsOnPortCreate = true
		m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: 3, Max: 5, Batch: 3, PerNode: perNode, IdleAfter: time.Hour}}
		m.P.Start(ctx, 1)
		// A pool of the other kind, left from before the setting changed, below its watermark.
		other := "node-a"
		if perNode {
			other = ""
		}
		boundPoolPort(t, n, m, nn, other)
		creates := n.Called("CreatePorts")
		m.P.Tend(ctx, []NamespaceNet{*nn}, time.Now())
		eventually(t, "refills to end", func() bool { return m.P.Refilling() == 0 })
		if n.Called("CreatePorts") != creates || m.X.FreeIn(nn.Network.ID, other) != 1 {
			t.Fatalf("perNode %v: Tend refilled the pool for %q, which the setting does not keep", perNode, other)
		}
		cancel()
	}
}

func TestAClaimHeldByTheAnnotationIsWrittenOncePodsStopArriving(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := fake.NewNeutron()
	m, nn := setupNamespace(t, n)
	const quiet = 1200 * time.Millisecond // above the half second that refills wait
	m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: 0, Max: 5, Batch: 1, PerNode: true}, retry: time.Millisecond, quiet: quiet}
	first := boundPoolPort(t, n, m, nn, "node-a")
	boundPoolPort(t, n, m, nn, "node-a")
	calls := func() int { return n.Called("ReplaceTags", "UpdatePort") }
	before := calls()
	m.P.Start(ctx, 1)
	take := func(uid string) time.Time {
		pod := PodRef{UID: uid, Namespace: "ns", Name: uid, Node: "node-a"}
		owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: uid, Name: "ns/" + uid}
		if _, ok, err := m.P.Take(ctx, nn, pod, owner); err != nil || !ok {
			t.Fatalf("Take for %s: %v %v", uid, ok, err)
		}
		return time.Now()
	}
	take("uid-1")
	// Pods keep arriving: a second take half a quiet period later.
	deadline := time.Now().Add(quiet / 2)
	for time.Now().Before(deadline) {
		if calls() != before {
			t.Fatal("a claim was written to Neutron while pods were still taking ports")
		}
		time.Sleep(5 * time.Millisecond)
	}
	last := take("uid-2")
	eventually(t, "Neutron shows the first port as its pod's", func() bool {
		return ownedInNeutron(n, first.ID, PodRef{UID: "uid-1", Namespace: "ns", Name: "uid-1", Node: "node-a"})
	})
	if d := time.Since(last); d < quiet {
		t.Fatalf("the claims were written %s after the last take, want no sooner than %s", d, quiet)
	}
}
