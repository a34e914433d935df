package neutron

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// upkeepCounter is a Neutron that records how many pool upkeep requests (port deletes, bulk creates) it serves at once.
type upkeepCounter struct {
	openstack.Networking
	mu        sync.Mutex
	now, most int
	creates   int
	deletes   int
}

func (f *upkeepCounter) enter(deleting bool) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now++
	f.most = max(f.most, f.now)
	if deleting {
		f.deletes++
	} else {
		f.creates++
	}
	return func() { f.mu.Lock(); f.now--; f.mu.Unlock() }
}

func (f *upkeepCounter) DeletePort(ctx context.Context, id string) error {
	defer f.enter(true)()
	return f.Networking.DeletePort(ctx, id)
}

func (f *upkeepCounter) CreatePorts(ctx context.Context, specs []openstack.PortSpec) ([]openstack.Port, error) {
	defer f.enter(false)()
	return f.Networking.CreatePorts(ctx, specs)
}

// TestPoolUpkeepSendsOneRequestAtATime checks that many pools emptied or refilled together send Neutron one
// request at a time, so that pods' creates never queue behind them.
func TestPoolUpkeepSendsOneRequestAtATime(t *testing.T) {
	const nodes = 20
	cases := []struct {
		name string
		// act makes the pools' upkeep happen and waits for its end.
		act         func(t *testing.T, ctx context.Context, m *Manager, nn *NamespaceNet)
		wantCreates bool
		wantDeletes bool
	}{
		{name: "idle pools, emptied by one resync", wantDeletes: true,
			act: func(t *testing.T, ctx context.Context, m *Manager, nn *NamespaceNet) {
				m.P.Tend(ctx, []NamespaceNet{*nn}, time.Now().Add(time.Hour))
				m.P.bg.Wait()
				if free := m.X.FreeTotal(); free != 0 {
					t.Fatalf("%d free ports left in idle pools", free)
				}
			}},
		{name: "pools refilled after pods came to every node", wantCreates: true,
			act: func(t *testing.T, ctx context.Context, m *Manager, nn *NamespaceNet) {
				for i := range nodes {
					pod := PodRef{UID: fmt.Sprintf("u-%d", i), Namespace: nn.Namespace, Name: "p", Node: fmt.Sprintf("node-%d", i)}
					owner := ownership.Owner{Cluster: m.C.ID, Kind: ownership.KindPod, UID: pod.UID, Name: nn.Namespace + "/p"}
					if _, _, err := m.P.Take(ctx, nn, pod, owner); err != nil {
						t.Fatal(err)
					}
					m.P.Kick(nn, pod.Node)
				}
				eventually(t, "every refill ends", func() bool { return m.P.Refilling() == 0 })
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := fake.NewNeutron()
			m, nn := setupNamespace(t, n)
			for i := range nodes {
				boundPoolPort(t, n, m, nn, fmt.Sprintf("node-%d", i))
			}
			// A busy Neutron: each write takes a while, so that requests sent together overlap.
			n.Delay = 2 * time.Millisecond
			f := &upkeepCounter{Networking: n}
			m.N = f
			m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: 2, Max: 4, Batch: 2, PerNode: true, IdleAfter: time.Minute}}
			m.P.Start(ctx, 1)
			tc.act(t, ctx, m, nn)
			f.mu.Lock()
			defer f.mu.Unlock()
			if (f.creates > 0) != tc.wantCreates || (f.deletes > 0) != tc.wantDeletes {
				t.Fatalf("%d bulk creates and %d deletes; want creates %v, deletes %v", f.creates, f.deletes, tc.wantCreates, tc.wantDeletes)
			}
			if f.most != upkeepInFlight {
				t.Fatalf("%d upkeep requests in flight at once, want %d", f.most, upkeepInFlight)
			}
		})
	}
}
