//go:build bench

package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/openstack"
)

// rate is the churn rate: the flag's, or half of what the simulated Neutron can create and delete, one port
// each, with its workers.
func (b *bench) rate(t testing.TB) float64 {
	if *churnRate > 0 {
		return *churnRate
	}
	m, _ := b.res["model"].(map[string]any)
	op := func(name string, fallback float64) float64 {
		ops, _ := m["ops"].(map[string]any)
		if o, ok := ops[name].(map[string]any); ok {
			base, _ := o["base_ms"].(float64)
			item, _ := o["per_item_ms"].(float64)
			return base + item // a single create counts as one item
		}
		return fallback
	}
	workers := 1.0
	if w, ok := m["workers"].(map[string]any); ok {
		if n, ok := w["neutron"].(float64); ok && n > 0 {
			workers = n
		}
	}
	perPod := op("neutron port create", 300) + op("neutron port delete", 120)
	r := workers * 1000 / perPod / 2
	t.Logf("churn rate %.2f pods/s: half of %g Neutron workers / %.0f ms of port create + delete", r, workers, perPod)
	return r
}

// floorChurn is the same work without Raven: a port created at the churn rate straight on the simulator, then
// deleted, timed from the request to the answer.
func (b *bench) floorChurn(ctx context.Context, t *testing.T, rate float64) []float64 {
	c, err := openstack.NewClients(ctx, b.dir+"/clouds.yaml", "sim", nil)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Networking
	net, err := n.CreateNetwork(ctx, openstack.NetworkSpec{Name: "floor"})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := n.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: net.ID, Name: "floor", CIDR: "100.64.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ms []float64
	tick(ctx, t, rate, func(i int) {
		start := time.Now()
		p, err := n.CreatePort(ctx, openstack.PortSpec{Name: fmt.Sprintf("floor-%d", i), NetworkID: net.ID, SubnetID: sub.ID,
			HostID: nodeName(i % 3)})
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		mu.Unlock()
		if err := n.DeletePort(ctx, p.ID); err != nil {
			t.Error(err)
		}
	})
	_ = n.DeleteSubnet(ctx, sub.ID)
	_ = n.DeleteNetwork(ctx, net.ID)
	return ms
}

// tick calls do(i) in its own goroutine rate times a second for the churn phase's length, and waits for all.
func tick(ctx context.Context, t *testing.T, rate float64, do func(i int)) {
	t.Helper()
	every := time.Duration(float64(time.Second) / rate)
	end := time.Now().Add(time.Duration(*churnSecs) * time.Second)
	var wg sync.WaitGroup
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
		wg.Go(func() { do(i) })
		time.Sleep(every) // the pacing of the load itself, not a wait for a result
	}
	wg.Wait()
}

// churnPhase creates pods at a steady rate on random nodes of random namespaces, deletes each once it is
// annotated, and times create → annotation beside the floor.
func (b *bench) churnPhase(ctx context.Context, t *testing.T, to shape, r map[string]any) {
	rate := b.rate(t)
	logf(t, "churn floor: ports straight on the simulator at %.2f/s for %d s", rate, *churnSecs)
	b.s.reset(t)
	floor := b.floorChurn(ctx, t, rate)
	// What the simulator served in the floor's window: the floor's own calls, and Raven's meanwhile.
	floorOps := opCalls(b.s.stats(t))
	logf(t, "churn floor: the simulator's calls in its window: %v", floorOps)
	leader, _ := b.leader(t)
	logf(t, "churn: pods at %.2f/s for %d s", rate, *churnSecs)
	b.s.reset(t)
	before := leader.usage(t)
	var mu sync.Mutex
	var ms []float64
	missed := 0
	rng := rand.New(rand.NewPCG(uint64(to.pods), 7))
	var rmu sync.Mutex
	tick(ctx, t, rate, func(i int) {
		rmu.Lock()
		ns, node := namespaceName(rng.IntN(to.namespaces)), nodeName(rng.IntN(to.nodes))
		rmu.Unlock()
		name := fmt.Sprintf("churn-%d-%d", to.pods, i)
		start := time.Now()
		if _, err := b.k.client.CoreV1().Pods(ns).Create(ctx, benchPod(ns, name, node), metav1.CreateOptions{}); err != nil {
			t.Error(err)
			return
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if at, ok := b.w.at(ns + "/" + name); ok {
				mu.Lock()
				ms = append(ms, float64(at.Sub(start).Microseconds())/1000)
				mu.Unlock()
				break
			}
			if time.Now().After(deadline) {
				mu.Lock()
				missed++
				mu.Unlock()
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := b.k.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
	after := leader.usage(t)
	st := b.s.stats(t)
	pods := float64(len(ms) + missed)
	res := map[string]any{
		"rate_per_s": rate, "seconds": *churnSecs, "pods": pods, "missed": missed,
		"p50_ms": percentile(ms, 0.5), "p99_ms": percentile(ms, 0.99), "max_ms": percentile(ms, 1),
		"floor_p50_ms": percentile(floor, 0.5), "floor_p99_ms": percentile(floor, 0.99), "floor_samples": len(floor),
		"p99_above_floor_ms": percentile(ms, 0.99) - percentile(floor, 0.99),
		"calls":              st.Totals.Calls, "calls_per_pod": float64(st.Totals.Calls) / pods, "writes_per_pod": float64(st.Totals.Writes) / pods,
		"by_op":                 opCalls(st),
		"floor_by_op":           floorOps,
		"raven_cpu_s":           after.CPUSeconds - before.CPUSeconds,
		"raven_cpu_ms_per_pod":  1000 * (after.CPUSeconds - before.CPUSeconds) / pods,
		"free_pool_ports_after": st.object("free_pool_ports"),
		"budget_starved":        leader.metric(t, "raven_port_pool_budget_starved_total"),
	}
	r["churn"] = res
	logf(t, "churn: %d pods, create → annotation p50 %.0f ms, p99 %.0f ms (floor p50 %.0f, p99 %.0f); %.1f calls per pod; Raven CPU %.1f ms per pod; %v free pool ports",
		len(ms), res["p50_ms"], res["p99_ms"], res["floor_p50_ms"], res["floor_p99_ms"], res["calls_per_pod"], res["raven_cpu_ms_per_pod"], res["free_pool_ports_after"])
	logf(t, "churn: the simulator's calls in its window: %v", res["by_op"])
	if missed > 0 {
		t.Errorf("%d churn pods were not annotated within 2 minutes", missed)
	}
}
