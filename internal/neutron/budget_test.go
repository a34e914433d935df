package neutron

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// freeInNeutron counts the free pool ports Neutron holds: pool-tagged, no device.
func freeInNeutron(n *fake.Neutron) int {
	n.Lock()
	defer n.Unlock()
	free := 0
	for _, p := range n.Ports {
		if o, _ := ownership.Parse(p.Tags); o.Kind == ownership.KindPool && p.DeviceID == "" {
			free++
		}
	}
	return free
}

// TestTheBudgetBoundsIdlePortsWhateverTheNodesTimesNamespaces creates a pod in every namespace × node pair, so
// that every per-node pool is wanted, and checks that the free ports never pass the cluster-wide budget.
func TestTheBudgetBoundsIdlePortsWhateverTheNodesTimesNamespaces(t *testing.T) {
	cases := []struct {
		name              string
		budget            int
		namespaces, nodes int
		wantFree          int // exactly, once every refill has ended
	}{
		{name: "no budget: every wanted pool fills to its low watermark", budget: 0, namespaces: 3, nodes: 4, wantFree: 3 * 4 * 2},
		{name: "a budget below the wanted pools caps the free ports", budget: 7, namespaces: 3, nodes: 4, wantFree: 7},
		{name: "a budget above what the pools want leaves them alone", budget: 100, namespaces: 2, nodes: 2, wantFree: 2 * 2 * 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := fake.NewNeutron()
			m := setup(t, n)
			m.P = &Pools{M: m, Cfg: PoolConfig{MinFree: 2, Max: 4, Batch: 2, PerNode: true, Budget: tc.budget}}
			m.P.Start(ctx, 2)
			for i := range tc.namespaces {
				nn, err := m.EnsureNamespace(ctx, fmt.Sprintf("ns-%d", i), fmt.Sprintf("ns-%d", i))
				if err != nil {
					t.Fatal(err)
				}
				for j := range tc.nodes {
					pod := PodRef{UID: fmt.Sprintf("u-%d-%d", i, j), Namespace: nn.Namespace, Name: "p", Node: fmt.Sprintf("node-%d", j)}
					owner := ownership.Owner{Cluster: m.C.ID, Kind: ownership.KindPod, UID: pod.UID, Name: nn.Namespace + "/p"}
					if _, _, err := m.P.Take(ctx, nn, pod, owner); err != nil {
						t.Fatal(err)
					}
					m.P.Kick(nn, pod.Node)
				}
			}
			m.P.Tend(ctx, m.X.Networks(), time.Now())
			eventually(t, "every refill ends", func() bool { return m.P.Refilling() == 0 })
			if got := m.X.FreeTotal(); got != tc.wantFree {
				t.Fatalf("%d free pool ports in the index, want %d", got, tc.wantFree)
			}
			if got := freeInNeutron(n); got != tc.wantFree {
				t.Fatalf("%d free pool ports in Neutron, want %d", got, tc.wantFree)
			}
			if starved := m.P.Starved() > 0; starved != (tc.budget > 0 && tc.budget < tc.namespaces*tc.nodes*2) {
				t.Fatalf("Starved() = %d; want refills starved only when the budget is below what the pools want", m.P.Starved())
			}
		})
	}
}

func TestFreePortsIndex(t *testing.T) {
	f := newFreePorts()
	f.add(poolKey("n1", ""), "a")
	f.add(poolKey("n1", "node-1"), "b")
	f.add(poolKey("n1", "node-1"), "c")
	f.add(poolKey("n2", "node-1"), "d")
	f.remove(poolKey("n1", "node-1"), "b")
	f.remove(poolKey("n1", "node-1"), "x") // not there: nothing changes
	if f.total != 3 {
		t.Fatalf("total %d, want 3", f.total)
	}
	if got := fmt.Sprint(f.hostsOf("n1")); got != "[ node-1]" {
		t.Fatalf("hosts of n1 %s, want the unbound pool and node-1", got)
	}
	f.remove(poolKey("n1", "node-1"), "c")
	f.remove(poolKey("n1", ""), "a")
	if len(f.hostsOf("n1")) != 0 || len(f.ids) != 1 || f.total != 1 {
		t.Fatalf("after emptying n1: hosts %v, pools %v, total %d", f.hostsOf("n1"), f.ids, f.total)
	}
}
