package sim_test

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/sim"
)

// timed runs the calls at once and returns when each finished, from the moment they were started, soonest
// first.
func timed(t *testing.T, calls ...func() error) []time.Duration {
	t.Helper()
	took := make([]time.Duration, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	start := time.Now()
	for i, call := range calls {
		wg.Go(func() {
			errs[i] = call()
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(took)
	return took
}

func TestModel(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name  string
		model sim.Model
		calls func(e *env, network string) []func() error
		// least is the least each call takes, shortest first.
		least []time.Duration
		// op and items: the items the counters must show for op.
		op    string
		items int64
		// queued is the least time the calls waited for a worker, together.
		queued time.Duration
	}{
		{
			name:  "one worker: the second of two writes waits for the first",
			model: sim.Model{Workers: sim.Workers{Neutron: 1}, Default: sim.Default{WriteMS: 50}},
			calls: func(e *env, _ string) []func() error { return []func() error{e.mkNetwork(t), e.mkNetwork(t)} },
			least: []time.Duration{50 * ms, 100 * ms},
			op:    "neutron network create", items: 2, queued: 40 * ms,
		},
		{
			name:  "two workers: two writes at once",
			model: sim.Model{Workers: sim.Workers{Neutron: 2}, Ops: map[string]sim.Cost{"neutron network create": {BaseMS: 50}}},
			calls: func(e *env, _ string) []func() error { return []func() error{e.mkNetwork(t), e.mkNetwork(t)} },
			least: []time.Duration{50 * ms, 50 * ms},
			op:    "neutron network create", items: 2,
		},
		{
			name:  "a bulk create takes its base and a time per port",
			model: sim.Model{Workers: sim.Workers{Neutron: 4}, Ops: map[string]sim.Cost{"neutron port create": {BaseMS: 20, PerItemMS: 20}}},
			calls: func(e *env, network string) []func() error { return []func() error{e.mkPorts(t, network, 5)} },
			least: []time.Duration{120 * ms},
			op:    "neutron port create", items: 5,
		},
		{
			name:  "a list takes a time per object on its page",
			model: sim.Model{Ops: map[string]sim.Cost{"neutron port list": {BaseMS: 10, PerItemMS: 10}}},
			calls: func(e *env, network string) []func() error { return []func() error{e.lsPorts(t, network)} },
			least: []time.Duration{10*ms + 3*10*ms},
			op:    "neutron port list", items: 3,
		},
		{
			name:  "reads take the default read time, Octavia has its own workers",
			model: sim.Model{Workers: sim.Workers{Neutron: 1, Octavia: 1}, Default: sim.Default{ReadMS: 40, WriteMS: 1000}},
			calls: func(e *env, _ string) []func() error { return []func() error{e.lsLBs(t), e.lsLBs(t)} },
			least: []time.Duration{40 * ms, 80 * ms},
			op:    "octavia loadbalancer list", items: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, tc.model)
			e.s.SetLatency(false)
			net, _ := e.namespace(t, "ns", "10.1.0.0/24")
			e.ports(t, net.ID, 3)
			e.s.SetLatency(true)
			e.s.Reset()
			took := timed(t, tc.calls(e, net.ID)...)
			for i, least := range tc.least {
				if took[i] < least {
					t.Fatalf("the calls took %v, want at least %v", took, tc.least)
				}
			}
			var sum time.Duration
			for _, d := range tc.least {
				sum += d
			}
			if st := e.s.Stats().Ops[tc.op]; st.Calls != int64(len(tc.least)) || st.Items != tc.items || st.TotalMS < ms64(sum) || st.QueueMS < ms64(tc.queued) || st.Errors != 0 {
				t.Fatalf("%s counted %+v, want %d calls, %d items, at least %v in all, no error", tc.op, st, len(tc.least), tc.items, sum)
			}
		})
	}
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (e *env) mkNetwork(t *testing.T) func() error {
	return func() error {
		_, err := e.net.CreateNetwork(t.Context(), openstack.NetworkSpec{Name: "n"})
		return err
	}
}

func (e *env) mkPorts(t *testing.T, network string, n int) func() error {
	return func() error {
		specs := make([]openstack.PortSpec, n)
		for i := range specs {
			specs[i].NetworkID = network
		}
		_, err := e.net.CreatePorts(t.Context(), specs)
		return err
	}
}

func (e *env) lsPorts(t *testing.T, network string) func() error {
	return func() error {
		_, err := e.net.ListPorts(t.Context(), openstack.Filter{NetworkID: network})
		return err
	}
}

func (e *env) lsLBs(t *testing.T) func() error {
	return func() error {
		_, err := e.lb.ListLoadBalancers(t.Context(), nil)
		return err
	}
}

func TestLatencyOff(t *testing.T) {
	e := start(t, sim.Model{Workers: sim.Workers{Neutron: 1}, Default: sim.Default{ReadMS: 10_000, WriteMS: 10_000}})
	e.s.SetLatency(false)
	took := timed(t, e.mkNetwork(t), e.mkNetwork(t))
	if took[1] > 5*time.Second {
		t.Fatalf("with the latency off the calls took %v", took)
	}
	if st := e.s.Stats(); st.Latency || st.Ops["neutron network create"].Calls != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLoadModel(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, json string
		ok         bool
	}{
		{"the brief's example", `{"source": "bench-calibrate", "workers": {"neutron": 4, "octavia": 2}, "default": {"read_ms": 10, "write_ms": 100},
			"ops": {"neutron port create": {"base_ms": 290, "per_item_ms": 240}, "neutron port list": {"base_ms": 15, "per_item_ms": 0.05}}}`, true},
		{"empty", `{}`, true},
		{"negative", `{"ops": {"neutron port get": {"base_ms": -1}}}`, false},
		{"not JSON", `workers: 4`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "model.json")
			if err := os.WriteFile(path, []byte(tc.json), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := sim.LoadModel(path)
			if (err == nil) != tc.ok {
				t.Fatalf("LoadModel: %v, want ok %v", err, tc.ok)
			}
			if tc.ok && tc.name != "empty" && (m.Workers.Neutron != 4 || m.Ops["neutron port list"].PerItemMS != 0.05 || m.Default.WriteMS != 100) {
				t.Fatalf("read %+v", m)
			}
		})
	}
}
