package neutron

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack/fake"
)

// A node's pool holds ports bound to the node: once the node is deleted no pod can take them, whatever
// pools.idleAfter says.
func TestThePoolOfADeletedNodeIsEmptied(t *testing.T) {
	listed := func(names ...string) func(context.Context) ([]string, error) {
		return func(context.Context) ([]string, error) { return names, nil }
	}
	cases := []struct {
		name      string
		idleAfter time.Duration
		perNode   bool
		// pools are the hosts whose pools hold a free port ("": the unbound pool).
		pools []string
		nodes func(context.Context) ([]string, error)
		// wantKept are the pools that keep their port.
		wantKept []string
		// wantListed says whether Tend asks for the nodes.
		wantListed bool
	}{
		{name: "the pool of a deleted node is emptied although pools never idle", perNode: true,
			pools: []string{"node-a", "node-b"}, nodes: listed("node-a"), wantKept: []string{"node-a"}, wantListed: true},
		{name: "the pool of a deleted node is emptied before it is idle", perNode: true, idleAfter: time.Hour,
			pools: []string{"node-a", "node-b"}, nodes: listed("node-a"), wantKept: []string{"node-a"}, wantListed: true},
		{name: "the pool of a deleted node left from before perNode was switched off is emptied",
			pools: []string{"", "node-b"}, nodes: listed("node-a"), wantKept: []string{""}, wantListed: true},
		{name: "no pool is emptied when the nodes cannot be listed", perNode: true,
			pools: []string{"node-a", "node-b"}, nodes: func(context.Context) ([]string, error) { return nil, errors.New("forbidden") },
			wantKept: []string{"node-a", "node-b"}, wantListed: true},
		{name: "the nodes are not listed when no pool is a node's",
			pools: []string{""}, nodes: listed(), wantKept: []string{""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := fake.NewNeutron()
			m, nn := setupNamespace(t, n)
			listedNodes := false
			m.P = &Pools{M: m, Cfg: PoolConfig{Max: 5, Batch: 1, PerNode: tc.perNode, IdleAfter: tc.idleAfter},
				Nodes: func(ctx context.Context) ([]string, error) { listedNodes = true; return tc.nodes(ctx) }}
			m.P.Start(ctx, 1)
			ports := map[string]string{} // port ID by host
			for _, host := range tc.pools {
				ports[host] = boundPoolPort(t, n, m, nn, host).ID
			}
			m.P.Tend(ctx, []NamespaceNet{*nn}, time.Now())
			m.P.bg.Wait()
			for _, host := range tc.pools {
				kept := slices.Contains(tc.wantKept, host)
				n.Lock()
				_, inNeutron := n.Ports[ports[host]]
				n.Unlock()
				if free := m.X.FreeIn(nn.Network.ID, host); free != map[bool]int{true: 1}[kept] || inNeutron != kept {
					t.Fatalf("the pool of %q holds %d free ports (in Neutron: %v); want it kept: %v", host, free, inNeutron, kept)
				}
			}
			if listedNodes != tc.wantListed {
				t.Fatalf("Tend listed the nodes: %v, want %v", listedNodes, tc.wantListed)
			}
		})
	}
}
