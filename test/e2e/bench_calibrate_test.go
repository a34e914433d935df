//go:build e2e && bench

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

var (
	benchCalCheap = flag.Int("bench.calibrate-samples", 20, "samples of each cheap operation of the calibration")
	benchCalSlow  = flag.Int("bench.calibrate-slow-samples", 5, "samples of each slow operation of the calibration (bulk creates, load balancers)")
	benchCalPorts = flag.Int("bench.calibrate-ports", 500, "ports on the network at the calibration's largest port list")
	benchCalOut   = flag.String("bench.calibrate-out", "bench/results/scale", "where the calibration writes model.json, calibration.json and calibration.md")
)

// calLevels are the numbers of concurrent clients the concurrency part runs.
var calLevels = []int{1, 2, 4, 8}

// calGrowth is the throughput gain a doubling of the clients must bring to count as growth: below it, the
// throughput has stopped growing and the clients before the doubling are the effective workers.
const calGrowth = 1.2

// Classes of a case: the cheap reads and the single-object writes are pooled into the model's defaults.
const (
	calRead  = "read"
	calWrite = "write"
)

// TestBenchmarkCalibrate measures, without Raven, the per-call latency and the concurrency of the real ML2/OVN
// Neutron and of Octavia, through the same internal/openstack clients Raven uses, for the scale simulator:
// bench/results/scale/model.json (base and per-item milliseconds of each operation, by the name
// openstack.Operation gives it, effective workers, defaults), calibration.json (every figure) and calibration.md.
// Each request is timed by the clients' own Observer (the meter under every OpenStack call, from the request
// sent to the answer's headers), and named by it.
func TestBenchmarkCalibrate(t *testing.T) {
	ctx := context.Background()
	// Nothing else may write: no Raven of the harness, no installed one (on real nodes).
	if env.raven != nil {
		env.raven.stop()
	}
	if err := stopInstalled(); err != nil {
		t.Fatal(err)
	}
	c := newCalibration(ctx, t)
	for _, phase := range []struct {
		name string
		run  func(context.Context)
	}{
		{"ports", c.ports}, {"trunk", c.trunk}, {"security groups", c.securityGroups}, {"networks", c.networks},
		{"floating IPs", c.floatingIPs}, {"octavia", c.octavia}, {"port deletes", c.deletePorts},
	} {
		start := time.Now()
		phase.run(ctx)
		t.Logf("phase %s done in %.1f s", phase.name, time.Since(start).Seconds())
	}
	c.write()
}

// calibration holds the clients it measures through, what it made and what it measured.
type calibration struct {
	t   *testing.T
	os  *openstack.Clients // the measured clients: their Observer is rec
	rec *calRecorder

	network, subnet string
	single          []openstack.Port // made one at a time: got, updated, tagged, deleted one at a time
	bulk            []openstack.Port // made in bulk: listed, members' addresses
	extra           []openstack.Port // made, not measured, as subports

	cases  []*calCase
	byName map[string]*calCase
	async  map[string][]float64 // ms until an Octavia change is through (ACTIVE, or gone)
	conc   []calLevel
	trend  []map[string]float64 // each bulk create: its size, the ports on the network before it, its time
}

// calCase is one measured case: its samples, all requests of one operation with the same number of items.
type calCase struct {
	Label string `json:"label"`
	Op    string `json:"op"`
	// Items is the number of objects the request carries (bulk create, batch update) or the answer holds (list);
	// Counted says the operation carries items at all.
	Items   int    `json:"items"`
	Counted bool   `json:"counted"`
	Class   string `json:"class,omitempty"`
	// Aside: a diagnostic, left out of the model.
	Aside   bool      `json:"aside,omitempty"`
	Samples []float64 `json:"samples_ms"`
	N       int       `json:"n"`
	P50     float64   `json:"p50_ms"`
	P99     float64   `json:"p99_ms"`
	Max     float64   `json:"max_ms"`
	Retried int       `json:"retried,omitempty"`
}

// calLevel is one row of the concurrency table.
type calLevel struct {
	Op      string  `json:"op"`
	Clients int     `json:"clients"`
	Ops     int     `json:"ops"`
	Errors  int     `json:"errors"`
	Seconds float64 `json:"seconds"`
	OpsPerS float64 `json:"ops_per_s"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
}

// calCall is one request as the Observer saw it.
type calCall struct {
	op   string
	ms   float64
	kind openstack.Kind
}

// calRecorder is the Observer of the measured clients: it keeps every request until taken.
type calRecorder struct {
	mu    sync.Mutex
	calls []calCall
}

func (r *calRecorder) ObserveCall(op string, d time.Duration, kind openstack.Kind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, calCall{op: op, ms: float64(d.Microseconds()) / 1000, kind: kind})
}

// take returns the requests seen since the last take.
func (r *calRecorder) take() []calCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

func newCalibration(ctx context.Context, t *testing.T) *calibration {
	t.Helper()
	rec := &calRecorder{}
	clients, err := openstack.NewClients(ctx, env.vars["OS_CLIENT_CONFIG_FILE"], env.vars["OS_CLOUD"], rec)
	if err != nil {
		t.Fatal(err)
	}
	floor := newFloorNetwork(t, "bench-calibrate", "10.250.0.0/22")
	c := &calibration{t: t, os: clients, rec: rec, network: floor.network, subnet: floor.subnet,
		byName: map[string]*calCase{}, async: map[string][]float64{}}
	// A first request to each service: connections opened, nothing measured.
	if _, err := clients.Networking.ListNetworks(ctx, openstack.Filter{Name: "bench-calibrate-warmup"}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.LoadBalancing.ListLoadBalancers(ctx, []string{"bench-calibrate-warmup"}); err != nil {
		t.Fatal(err)
	}
	rec.take()
	return c
}

// do sends call once as a sample of the case label and returns when the counted attempt started. The requests
// it made (one, or a list's pages) are timed by the recorder. An attempt Octavia refuses while the object is
// PENDING (409 immutable), or that fails on the server's side, is sent again: only the attempt that succeeded counts.
func (c *calibration) do(ctx context.Context, label, class string, call func(context.Context) error) time.Time {
	return c.doItems(ctx, label, class, -1, call)
}

// doItems is do for an operation that carries items objects (items < 0: none).
func (c *calibration) doItems(ctx context.Context, label, class string, items int, call func(context.Context) error) time.Time {
	c.t.Helper()
	for try := 0; ; try++ {
		c.rec.take()
		start := time.Now()
		err := call(ctx)
		calls := c.rec.take()
		if err == nil {
			c.add(label, class, items, calls)
			return start
		}
		switch openstack.KindOf(err) {
		case openstack.KindImmutable, openstack.KindServer, openstack.KindUnavailable:
		default:
			c.t.Fatalf("%s: %v", label, err)
		}
		if try >= 50 {
			c.t.Fatalf("%s: still failing after %d attempts: %v", label, try+1, err)
		}
		c.caseOf(label, "", class, items).Retried++
		time.Sleep(200 * time.Millisecond)
	}
}

// add records the requests of one successful call as a sample of label: their op (one op only), their summed time.
func (c *calibration) add(label, class string, items int, calls []calCall) {
	c.t.Helper()
	if len(calls) == 0 {
		c.t.Fatalf("%s: the call made no request", label)
	}
	var ms float64
	for _, call := range calls {
		if call.op != calls[0].op {
			c.t.Fatalf("%s: one call made requests of two operations, %q and %q", label, calls[0].op, call.op)
		}
		ms += call.ms
	}
	cs := c.caseOf(label, calls[0].op, class, items)
	if cs.Op != calls[0].op {
		c.t.Fatalf("%s: a sample of %q, another of %q", label, cs.Op, calls[0].op)
	}
	cs.Samples = append(cs.Samples, ms)
}

// caseOf is the case label, made on first use.
func (c *calibration) caseOf(label, op, class string, items int) *calCase {
	cs, ok := c.byName[label]
	if !ok {
		cs = &calCase{Label: label, Op: op, Items: max(items, 0), Counted: items >= 0, Class: class}
		c.byName[label] = cs
		c.cases = append(c.cases, cs)
	}
	if cs.Op == "" {
		cs.Op = op
	}
	return cs
}

// portSpec is the i-th port of the calibration: a pod's port as Raven asks for it (floorSpec).
func (c *calibration) portSpec(i int) openstack.PortSpec { return floorSpec(c.network, c.subnet, i) }

// ports measures the port operations: creates (single, bulk of 10 and of 50), get, update, tag replace, lists by
// network at three sizes, and the concurrency of a port get and a single port create.
func (c *calibration) ports(ctx context.Context) {
	n := *benchCalCheap
	net := c.os.Networking
	c.listPorts(ctx)
	for i := range n {
		c.doItems(ctx, "port create (single)", calWrite, 1, func(ctx context.Context) error {
			p, err := net.CreatePort(ctx, c.portSpec(i))
			if err == nil {
				c.single = append(c.single, *p)
			}
			return err
		})
	}
	for i := range 2 * n {
		p := c.single[i%len(c.single)]
		c.do(ctx, "port get", calRead, func(ctx context.Context) error { _, err := net.GetPort(ctx, p.ID); return err })
	}
	for i, p := range c.single {
		name, device := fmt.Sprintf("calibrate-%d", i), fmt.Sprintf("00000000-0000-0000-0001-%012d", i)
		c.do(ctx, "port update", calWrite, func(ctx context.Context) error {
			_, err := net.UpdatePort(ctx, p.ID, openstack.PortUpdate{Name: &name, DeviceID: &device})
			return err
		})
		tags := slices.Clone(p.Tags)
		tags[len(tags)-1] = "calibrate-" + strconv.Itoa(i)
		c.do(ctx, "port tag replace", calWrite, func(ctx context.Context) error {
			return net.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, tags)
		})
	}
	c.portConcurrency(ctx)
	for range *benchCalSlow {
		c.bulkPorts(ctx, 10)
	}
	for range 2 {
		c.bulkPorts(ctx, 50)
	}
	c.listPorts(ctx)
	// Up to 500 ports on the network, in bulks of 50: more samples of the bulk of 50.
	for len(c.single)+len(c.bulk) < *benchCalPorts {
		c.bulkPorts(ctx, 50)
	}
	c.listPorts(ctx)
	c.portListAttributes(ctx)
	// Aside: single creates on the network that holds them all, beside the ones on a nearly empty network.
	label := fmt.Sprintf("port create (single, %d ports on the network)", len(c.single)+len(c.bulk))
	for i := range *benchCalSlow {
		c.doItems(ctx, label, "", 1, func(ctx context.Context) error {
			p, err := net.CreatePort(ctx, c.portSpec(9000+i))
			if err == nil {
				c.extra = append(c.extra, *p)
			}
			return err
		})
	}
	c.byName[label].Aside = true
}

// bulkPorts measures one bulk create of size ports.
func (c *calibration) bulkPorts(ctx context.Context, size int) {
	specs := make([]openstack.PortSpec, size)
	for i := range specs {
		specs[i] = c.portSpec(1000 + len(c.bulk) + i)
	}
	label := fmt.Sprintf("port create (bulk of %d)", size)
	before := len(c.single) + len(c.bulk)
	c.doItems(ctx, label, "", size, func(ctx context.Context) error {
		ps, err := c.os.Networking.CreatePorts(ctx, specs)
		if err == nil {
			c.bulk = append(c.bulk, ps...)
		}
		return err
	})
	cs := c.byName[label]
	c.trend = append(c.trend, map[string]float64{"size": float64(size), "ports_before": float64(before), "ms": round2(cs.Samples[len(cs.Samples)-1])})
}

// listPorts measures the list of the network's ports, by network_id, as many are as there are now.
func (c *calibration) listPorts(ctx context.Context) {
	have, err := env.os.Networking.ListPorts(ctx, openstack.Filter{NetworkID: c.network})
	if err != nil {
		c.t.Fatal(err)
	}
	label := fmt.Sprintf("port list by network (%d ports)", len(have))
	for range *benchCalCheap {
		c.doItems(ctx, label, "", len(have), func(ctx context.Context) error {
			got, err := c.os.Networking.ListPorts(ctx, openstack.Filter{NetworkID: c.network})
			if err == nil && len(got) != len(have) {
				c.t.Fatalf("%s: %d ports listed", label, len(got))
			}
			return err
		})
	}
}

// portListAttributes measures, aside, what a port listing saves by asking for openstack.PortListFields: the
// list by network sent as plain requests to the stack's Neutron (no Keystone, as neutronDo), pages of
// openstack.PortPageSize, once for every attribute and once for those fields, one after the other, each page timed
// as the meter times it (request sent → answer's headers).
func (c *calibration) portListAttributes(ctx context.Context) {
	first := fmt.Sprintf("%s/v2.0/ports?limit=%d&network_id=%s", env.vars["NEUTRON_URL"], openstack.PortPageSize, c.network)
	fields := "&" + url.Values{"fields": openstack.PortListFields}.Encode()
	want, _ := c.listPlain(ctx, first)
	for range *benchCalCheap {
		for _, v := range []struct{ label, url string }{
			{fmt.Sprintf("port list by network (%d ports, every attribute, plain requests)", want), first},
			{fmt.Sprintf("port list by network (%d ports, Raven's fields, plain requests)", want), first + fields},
		} {
			got, ms := c.listPlain(ctx, v.url)
			if got != want {
				c.t.Fatalf("%s: %d ports listed", v.label, got)
			}
			c.add(v.label, "", want, []calCall{{op: "neutron port list", ms: ms}})
			c.byName[v.label].Aside = true
		}
	}
}

// listPlain follows a port list from u by its next links, as plain requests, and returns the ports listed and
// the pages' summed time to their answers' headers.
func (c *calibration) listPlain(ctx context.Context, u string) (ports int, ms float64) {
	for u != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			c.t.Fatal(err)
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			c.t.Fatal(err)
		}
		ms += float64(time.Since(start).Microseconds()) / 1000
		var page struct {
			Ports []json.RawMessage            `json:"ports"`
			Links []struct{ Rel, Href string } `json:"ports_links"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			c.t.Fatalf("GET %s: %d: %v", u, resp.StatusCode, err)
		}
		ports += len(page.Ports)
		u = ""
		for _, l := range page.Links {
			if l.Rel == "next" && len(page.Ports) > 0 {
				u = l.Href
			}
		}
	}
	return ports, ms
}

// portConcurrency runs a port get and a single port create at each level of concurrent clients; the ports it
// makes are deleted afterwards.
func (c *calibration) portConcurrency(ctx context.Context) {
	net := c.os.Networking
	c.concurrency(ctx, func(int) int { return 160 }, func(ctx context.Context, i int) error {
		_, err := net.GetPort(ctx, c.single[i%len(c.single)].ID)
		return err
	})
	var mu sync.Mutex
	var made []openstack.Port
	var seq atomic.Int64
	c.concurrency(ctx, func(int) int { return 32 }, func(ctx context.Context, _ int) error {
		p, err := net.CreatePort(ctx, c.portSpec(5000+int(seq.Add(1))))
		if err == nil {
			mu.Lock()
			made = append(made, *p)
			mu.Unlock()
		}
		return err
	})
	deleteAll(ctx, c.t, made)
}

// concurrency sends ops(clients) calls at each level of concurrent clients and adds a row per level to the
// concurrency table: the throughput of the successful calls over the level's wall time, their p50 and p99.
func (c *calibration) concurrency(ctx context.Context, ops func(clients int) int, call func(context.Context, int) error) {
	c.t.Helper()
	for _, clients := range calLevels {
		total := ops(clients)
		jobs := make(chan int)
		var wg sync.WaitGroup
		c.rec.take()
		start := time.Now()
		for range clients {
			wg.Go(func() {
				for i := range jobs {
					_ = call(ctx, i) // a failure is counted from the recorder
				}
			})
		}
		for i := range total {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		wall := time.Since(start)
		row := calLevel{Clients: clients, Ops: total, Seconds: round2(wall.Seconds())}
		var ms []float64
		for _, call := range c.rec.take() {
			row.Op = call.op
			if call.kind != "" {
				row.Errors++
				continue
			}
			ms = append(ms, call.ms)
		}
		s := summarize(ms)
		row.OpsPerS, row.P50, row.P99 = round2(float64(len(ms))/wall.Seconds()), round2(s.p50), round2(s.p99)
		c.t.Logf("concurrency | %s | %d clients | %d ops in %.2f s | %.1f ops/s | p50 %.1f ms | p99 %.1f ms | %d errors",
			row.Op, clients, total, wall.Seconds(), row.OpsPerS, row.P50, row.P99, row.Errors)
		c.conc = append(c.conc, row)
	}
}

// deleteAll deletes ports with 8 clients, not measured; a delete that fails is sent again.
func deleteAll(ctx context.Context, t testing.TB, ports []openstack.Port) {
	t.Helper()
	jobs := make(chan string)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 8 {
		wg.Go(func() {
			for id := range jobs {
				err := env.os.Networking.DeletePort(ctx, id)
				for try := 0; err != nil && !openstack.IsNotFound(err) && try < 3; try++ {
					time.Sleep(time.Second)
					err = env.os.Networking.DeletePort(ctx, id)
				}
				if err != nil && !openstack.IsNotFound(err) {
					failed.Add(1)
				}
			}
		})
	}
	for _, p := range ports {
		jobs <- p.ID
	}
	close(jobs)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d ports not deleted", n, len(ports))
	}
}

// trunk measures a trunk's get, add_subports and remove_subports (one subport each): a trunk on a port of its own,
// its subports ports of the bulk creates. No nested node is needed.
func (c *calibration) trunk(ctx context.Context) {
	net := c.os.Networking
	parent, err := env.os.Networking.CreatePort(ctx, openstack.PortSpec{NetworkID: c.network, SubnetID: c.subnet, Name: "bench-calibrate-trunk-parent",
		DeviceOwner: "compute:nova"})
	if err != nil {
		c.t.Fatal(err)
	}
	// Subports are ports without a device: made in one bulk, not measured.
	specs := make([]openstack.PortSpec, *benchCalCheap)
	for i := range specs {
		specs[i] = openstack.PortSpec{NetworkID: c.network, SubnetID: c.subnet, Name: fmt.Sprintf("bench-calibrate-sub-%d", i)}
	}
	subs, err := env.os.Networking.CreatePorts(ctx, specs)
	if err != nil {
		c.t.Fatal(err)
	}
	c.extra = append(c.extra, subs...)
	var trunk struct{ Trunk struct{ ID string } }
	neutronDo(c.t, http.MethodPost, "trunks", map[string]any{"trunk": map[string]any{"port_id": parent.ID, "name": "bench-calibrate"}}, &trunk)
	id := trunk.Trunk.ID
	c.t.Cleanup(func() {
		ids := make([]string, 0, len(subs))
		for _, p := range subs {
			ids = append(ids, p.ID)
		}
		_ = env.os.Networking.RemoveSubports(context.Background(), id, ids)
		_ = neutronTry(http.MethodDelete, "trunks/"+id, nil, nil)
		_ = env.os.Networking.DeletePort(context.Background(), parent.ID)
	})
	for i, p := range subs {
		sub := []openstack.Subport{{PortID: p.ID, SegmentationType: openstack.SegmentationVLAN, SegmentationID: 100 + i}}
		c.do(ctx, "trunk add_subports (one)", calWrite, func(ctx context.Context) error { return net.AddSubports(ctx, id, sub) })
		c.do(ctx, "trunk get", calRead, func(ctx context.Context) error { _, err := net.GetTrunk(ctx, id); return err })
	}
	for _, p := range subs {
		c.do(ctx, "trunk remove_subports (one)", calWrite, func(ctx context.Context) error { return net.RemoveSubports(ctx, id, []string{p.ID}) })
	}
}

// securityGroups measures a security group's create and delete, and the bulk create of its rules, 5 and 20.
func (c *calibration) securityGroups(ctx context.Context) {
	net := c.os.Networking
	for i := range *benchCalCheap {
		var sg *openstack.SecurityGroup
		c.do(ctx, "security group create", calWrite, func(ctx context.Context) error {
			var err error
			sg, err = net.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "bench-calibrate-" + randSuffix()})
			return err
		})
		id := sg.ID
		c.t.Cleanup(func() { _ = env.os.Networking.DeleteSecurityGroup(context.Background(), id) })
		if i < 2**benchCalSlow { // the bulks are slow ones
			c.ruleBulk(ctx, id, []int{5, 20}[i%2])
		}
		c.do(ctx, "security group delete", calWrite, func(ctx context.Context) error { return net.DeleteSecurityGroup(ctx, id) })
	}
}

// ruleBulk measures a bulk create of size rules in the security group id, rules like a NetworkPolicy's.
func (c *calibration) ruleBulk(ctx context.Context, id string, size int) {
	rules := make([]openstack.SecurityGroupRule, size)
	for j := range rules {
		rules[j] = openstack.SecurityGroupRule{SecurityGroupID: id, Direction: "ingress", EtherType: "IPv4", Protocol: "tcp",
			PortRangeMin: 8000, PortRangeMax: 8000, RemoteIPPrefix: fmt.Sprintf("10.250.%d.%d/32", j/200, j%200+1)}
	}
	c.doItems(ctx, fmt.Sprintf("security group rule bulk create (%d rules)", size), "", size, func(ctx context.Context) error {
		_, err := c.os.Networking.CreateSecurityGroupRules(ctx, rules)
		return err
	})
}

// networks measures a network's and a subnet's create and delete, and a router interface's add and remove.
func (c *calibration) networks(ctx context.Context) {
	net := c.os.Networking
	router, err := env.os.Networking.CreateRouter(ctx, openstack.RouterSpec{Name: "bench-calibrate-" + randSuffix()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = env.os.Networking.DeleteRouter(context.Background(), router.ID) })
	for i := range *benchCalCheap {
		var n *openstack.Network
		c.do(ctx, "network create", calWrite, func(ctx context.Context) error {
			var err error
			n, err = net.CreateNetwork(ctx, openstack.NetworkSpec{Name: "bench-calibrate-" + randSuffix()})
			return err
		})
		c.t.Cleanup(func() { _ = env.os.Networking.DeleteNetwork(context.Background(), n.ID) })
		var sub *openstack.Subnet
		c.do(ctx, "subnet create", calWrite, func(ctx context.Context) error {
			var err error
			sub, err = net.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: n.ID, CIDR: fmt.Sprintf("10.251.%d.0/24", i), Name: "bench-calibrate"})
			return err
		})
		if i < 2**benchCalSlow { // slow ones
			c.do(ctx, "router add_interface", calWrite, func(ctx context.Context) error { return net.AddRouterInterface(ctx, router.ID, sub.ID) })
			c.do(ctx, "router remove_interface", calWrite, func(ctx context.Context) error { return net.RemoveRouterInterface(ctx, router.ID, sub.ID) })
		}
		c.do(ctx, "subnet delete", calWrite, func(ctx context.Context) error { return net.DeleteSubnet(ctx, sub.ID) })
		c.do(ctx, "network delete", calWrite, func(ctx context.Context) error { return net.DeleteNetwork(ctx, n.ID) })
	}
}

// floatingIPs measures the list of every floating IP (Raven lists its own by tags; there are as many as there are).
func (c *calibration) floatingIPs(ctx context.Context) {
	have, err := env.os.Networking.ListFloatingIPs(ctx, openstack.Filter{})
	if err != nil {
		c.t.Fatal(err)
	}
	label := fmt.Sprintf("floating IP list (%d)", len(have))
	for range *benchCalCheap {
		c.doItems(ctx, label, calRead, len(have), func(ctx context.Context) error {
			_, err := c.os.Networking.ListFloatingIPs(ctx, openstack.Filter{})
			return err
		})
	}
}

// octavia measures, on load balancers of the stack's provider made on the calibration's subnet: the create (the
// API call, and separately the time until ACTIVE), a listener's and a pool's create, the members' replace (5 and 20
// members), the get, the status tree, the list (before and with the load balancers), the cascade delete (the API
// call, and until gone), and the concurrency of a get.
func (c *calibration) octavia(ctx context.Context) {
	lbc := c.os.LoadBalancing
	c.listLoadBalancers(ctx)
	var ids []string
	for range *benchCalSlow {
		var lb *openstack.LoadBalancer
		start := c.do(ctx, "loadbalancer create", "", func(ctx context.Context) error {
			var err error
			lb, err = lbc.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: "bench-calibrate-" + randSuffix(), VipSubnetID: c.subnet,
				Provider: env.vars["STACK_LB_PROVIDER"]})
			return err
		})
		id := lb.ID
		ids = append(ids, id)
		c.t.Cleanup(func() { deleteLoadBalancerAndWait(c.t, id) })
		c.untilActive(ctx, "loadbalancer create → ACTIVE", id, start)
		c.fillLoadBalancer(ctx, id)
	}
	c.listLoadBalancers(ctx)
	c.concurrency(ctx, func(int) int { return 120 }, func(ctx context.Context, i int) error {
		_, err := lbc.GetLoadBalancer(ctx, ids[i%len(ids)])
		return err
	})
	for _, id := range ids {
		start := c.do(ctx, "loadbalancer delete (cascade)", "", func(ctx context.Context) error { return lbc.DeleteLoadBalancer(ctx, id) })
		eventually(c.t, svcPhaseTimeout, "load balancer "+id+" gone", func() (bool, error) {
			_, err := env.os.LoadBalancing.GetLoadBalancer(ctx, id)
			if openstack.IsNotFound(err) {
				c.async["loadbalancer delete (cascade) → gone"] = append(c.async["loadbalancer delete (cascade) → gone"], msSince(start, time.Now()))
				return true, nil
			}
			return false, err
		})
	}
}

// fillLoadBalancer gives the load balancer id a TCP listener, its pool, 5 members then 20 (each change once the
// load balancer is ACTIVE again), and measures its get and status tree.
func (c *calibration) fillLoadBalancer(ctx context.Context, id string) {
	lbc := c.os.LoadBalancing
	var l *openstack.Listener
	start := c.do(ctx, "listener create", calWrite, func(ctx context.Context) error {
		var err error
		l, err = lbc.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: id, Name: "calibrate:80", Protocol: "TCP", ProtocolPort: 80})
		return err
	})
	c.untilActive(ctx, "listener create → ACTIVE", id, start)
	var p *openstack.Pool
	start = c.do(ctx, "pool create", calWrite, func(ctx context.Context) error {
		var err error
		p, err = lbc.CreatePool(ctx, openstack.PoolSpec{ListenerID: l.ID, Name: "calibrate:80/tcp", Protocol: "TCP", LBAlgorithm: "SOURCE_IP_PORT"})
		return err
	})
	c.untilActive(ctx, "pool create → ACTIVE", id, start)
	for _, size := range []int{5, 20} {
		members := make([]openstack.MemberSpec, size)
		for i := range members {
			members[i] = openstack.MemberSpec{Address: c.bulk[i].FixedIPs[0].IPAddress, ProtocolPort: 80, SubnetID: c.subnet}
		}
		label := fmt.Sprintf("members replace (%d members)", size)
		start = c.doItems(ctx, label, "", size, func(ctx context.Context) error { return lbc.ReplaceMembers(ctx, p.ID, members) })
		c.untilActive(ctx, label+" → ACTIVE", id, start)
	}
	for range max(1, *benchCalCheap / *benchCalSlow) {
		c.do(ctx, "loadbalancer get", calRead, func(ctx context.Context) error { _, err := lbc.GetLoadBalancer(ctx, id); return err })
		c.do(ctx, "loadbalancer status tree get", calRead, func(ctx context.Context) error { _, err := lbc.LoadBalancerStatus(ctx, id); return err })
	}
}

// untilActive waits until the load balancer id is ACTIVE and records, under label, the time since start.
func (c *calibration) untilActive(ctx context.Context, label, id string, start time.Time) {
	c.t.Helper()
	eventually(c.t, svcPhaseTimeout, label+" of "+id, func() (bool, error) {
		lb, err := env.os.LoadBalancing.GetLoadBalancer(ctx, id)
		if err != nil {
			return false, err
		}
		if lb.ProvisioningStatus == "ERROR" {
			c.t.Fatalf("%s: load balancer %s in ERROR", label, id)
		}
		if lb.ProvisioningStatus != "ACTIVE" {
			return false, nil
		}
		c.async[label] = append(c.async[label], msSince(start, time.Now()))
		return true, nil
	})
}

// listLoadBalancers measures the list of every load balancer, as many as there are now.
func (c *calibration) listLoadBalancers(ctx context.Context) {
	have, err := env.os.LoadBalancing.ListLoadBalancers(ctx, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	label := fmt.Sprintf("loadbalancer list (%d)", len(have))
	for range *benchCalCheap {
		c.doItems(ctx, label, "", len(have), func(ctx context.Context) error {
			_, err := c.os.LoadBalancing.ListLoadBalancers(ctx, nil)
			return err
		})
	}
}

// deletePorts measures the delete of the ports made one at a time, and deletes the others, not measured.
func (c *calibration) deletePorts(ctx context.Context) {
	for _, p := range c.single {
		c.do(ctx, "port delete", calWrite, func(ctx context.Context) error { return c.os.Networking.DeletePort(ctx, p.ID) })
	}
	deleteAll(ctx, c.t, append(c.bulk, c.extra...))
}

// ---- the results

// calModel is model.json, what the scale simulator reads.
type calModel struct {
	Source  string `json:"source"`
	Workers struct {
		Neutron int `json:"neutron"`
		Octavia int `json:"octavia"`
	} `json:"workers"`
	Default struct {
		ReadMs  float64 `json:"read_ms"`
		WriteMs float64 `json:"write_ms"`
	} `json:"default"`
	Ops map[string]calOp `json:"ops"`
}

// calOp is an operation's latency: base_ms + per_item_ms × items.
type calOp struct {
	BaseMs    float64 `json:"base_ms"`
	PerItemMs float64 `json:"per_item_ms"`
}

// write finishes the cases and writes model.json, calibration.json and calibration.md.
func (c *calibration) write() {
	for _, cs := range c.cases {
		s := summarize(cs.Samples)
		cs.N, cs.P50, cs.P99, cs.Max = s.n, round2(s.p50), round2(s.p99), round2(s.max)
		for i := range cs.Samples {
			cs.Samples[i] = round2(cs.Samples[i])
		}
	}
	apiWorkers := neutronAPIWorkers(c.t)
	res := map[string]any{}
	putRun(res)
	m := calModel{Ops: map[string]calOp{}}
	m.Source = fmt.Sprintf("bench-calibrate on OpenStack %s, ML2/OVN, Octavia %s provider at %s, %s, Neutron api_workers=%d",
		openstackRelease(), env.vars["STACK_LB_PROVIDER"], res["when"], res["machine"], apiWorkers)
	knees := map[string]int{}
	for _, op := range []string{"neutron port get", "neutron port create", "octavia loadbalancer get"} {
		knees[op] = calKnee(c.conc, op)
	}
	m.Workers.Neutron = min(knees["neutron port get"], knees["neutron port create"])
	m.Workers.Octavia = knees["octavia loadbalancer get"]
	m.Default.ReadMs, m.Default.WriteMs = c.pooled(calRead), c.pooled(calWrite)
	fits := map[string]any{}
	for _, op := range c.ops() {
		o, fit := c.fit(op)
		m.Ops[op] = o
		fits[op] = fit
	}
	async := map[string]any{}
	for label, ms := range c.async {
		s := summarize(ms)
		async[label] = map[string]any{"n": s.n, "p50_ms": round2(s.p50), "p99_ms": round2(s.p99), "samples_ms": roundAll(ms)}
	}
	res["stack"] = fmt.Sprintf("ML2/OVN Neutron (api_workers=%d) and Octavia (%s provider) on MariaDB, STACK_CNI=%s; Raven not running",
		apiWorkers, env.vars["STACK_LB_PROVIDER"], env.vars["STACK_CNI"])
	res["neutron_api_workers"] = apiWorkers
	res["lb_provider"] = env.vars["STACK_LB_PROVIDER"]
	res["timing"] = "each request timed by the clients' Observer (internal/openstack meter): request sent → answer's headers; " +
		"a list's pages summed; a refused attempt (409 immutable, 5xx) sent again and not counted; p99 of fewer than 100 samples is the maximum"
	res["cases"], res["async"], res["concurrency"] = c.cases, async, c.conc
	res["fits"], res["knees"], res["model"] = fits, knees, m
	res["workers_by_throughput"] = calSaturation(c.conc)
	res["bulk_creates_in_order"] = c.trend
	res["workers_rule"] = fmt.Sprintf("the concurrency after which doubling the clients gains less than %.0f%% throughput; "+
		"neutron: the lower of port get's and port create's; octavia: loadbalancer get's", (calGrowth-1)*100)
	dir := outDir(*benchCalOut)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	writeJSON(c.t, filepath.Join(dir, "model.json"), m)
	writeJSON(c.t, filepath.Join(dir, "calibration.json"), res)
	md := c.markdown(m, res, async)
	if err := os.WriteFile(filepath.Join(dir, "calibration.md"), []byte(md), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("results in %s:\n%s", dir, md)
}

// ops are the operations measured, in the order first measured.
func (c *calibration) ops() []string {
	var out []string
	for _, cs := range c.cases {
		if !cs.Aside && !slices.Contains(out, cs.Op) {
			out = append(out, cs.Op)
		}
	}
	return out
}

// fit is op's model from the p50s of its cases: where it carries items, the least-squares line through
// (items, p50) over its cases (one size only: base = p50); otherwise the p50 of all its samples.
func (c *calibration) fit(op string) (calOp, map[string]any) {
	var xs, ys, all []float64
	counted := false
	for _, cs := range c.cases {
		if cs.Op != op || cs.Aside {
			continue
		}
		counted = counted || cs.Counted
		xs, ys = append(xs, float64(cs.Items)), append(ys, cs.P50)
		all = append(all, cs.Samples...)
	}
	if !counted {
		p50 := round2(summarize(all).p50)
		return calOp{BaseMs: p50}, map[string]any{"from": "p50 of all samples", "n": len(all)}
	}
	base, per := leastSquares(xs, ys)
	if per < 0 { // no growth measurable with items: the mean p50
		base, per = mean(ys), 0
	}
	if base < 0 { // growing faster than in proportion to the items: the line through 0 with the least relative error
		base, per = 0, throughOrigin(xs, ys)
	}
	points := make([]map[string]float64, len(xs))
	for i := range xs {
		points[i] = map[string]float64{"items": xs[i], "p50_ms": ys[i], "fitted_ms": round2(base + per*xs[i])}
	}
	return calOp{BaseMs: round2(base), PerItemMs: round2(per)}, map[string]any{"from": "least squares of the relative error over (items, p50)", "points": points}
}

// pooled is the p50 of every sample of the cases of class.
func (c *calibration) pooled(class string) float64 {
	var all []float64
	for _, cs := range c.cases {
		if cs.Class == class {
			all = append(all, cs.Samples...)
		}
	}
	return round2(summarize(all).p50)
}

// calSaturation is, for each operation of the concurrency table, its highest throughput times its p50 with one
// client: the workers a simulator whose every call holds a worker for that p50 needs to reach that throughput.
func calSaturation(rows []calLevel) map[string]float64 {
	one, peak := map[string]float64{}, map[string]float64{}
	for _, r := range rows {
		if r.Clients == 1 {
			one[r.Op] = r.P50
		}
		peak[r.Op] = max(peak[r.Op], r.OpsPerS)
	}
	out := map[string]float64{}
	for op, p := range peak {
		out[op] = round2(p * one[op] / 1000)
	}
	return out
}

// calKnee is the number of clients at which op's throughput stops growing: the last level before a doubling of
// the clients that gains less than calGrowth.
func calKnee(rows []calLevel, op string) int {
	var prev *calLevel
	for i := range rows {
		r := &rows[i]
		if r.Op != op {
			continue
		}
		if prev != nil && r.OpsPerS < calGrowth*prev.OpsPerS {
			return prev.Clients
		}
		prev = r
	}
	if prev == nil {
		return 1
	}
	return prev.Clients
}

func (c *calibration) markdown(m calModel, res map[string]any, async map[string]any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Neutron and Octavia calibration\n\n%s.\n\n%s\n\n", m.Source, res["timing"])
	b.WriteString("| case | operation | items | n | p50 ms | p99 ms |\n|---|---|---|---|---|---|\n")
	for _, cs := range c.cases {
		items := "-"
		if cs.Counted {
			items = strconv.Itoa(cs.Items)
		}
		label := cs.Label
		if cs.Aside {
			label += " (aside: not in the model)"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %d | %.1f | %.1f |\n", label, cs.Op, items, cs.N, cs.P50, cs.P99)
	}
	b.WriteString("\n| until done (polled every 100 ms or more) | n | p50 ms | p99 ms |\n|---|---|---|---|\n")
	labels := make([]string, 0, len(async))
	for l := range async {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	for _, l := range labels {
		a := async[l].(map[string]any)
		fmt.Fprintf(&b, "| %s | %v | %v | %v |\n", l, a["n"], a["p50_ms"], a["p99_ms"])
	}
	b.WriteString("\n| concurrency: operation | clients | ops | errors | ops/s | p50 ms | p99 ms |\n|---|---|---|---|---|---|---|\n")
	for _, r := range c.conc {
		fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %.1f | %.1f | %.1f |\n", r.Op, r.Clients, r.Ops, r.Errors, r.OpsPerS, r.P50, r.P99)
	}
	fmt.Fprintf(&b, "\nEffective workers (%s): neutron %d, octavia %d (knees %v). Highest throughput × p50 at one client, "+
		"the workers a simulator holding one per call for that p50 needs to reach it: %v.\n\n",
		res["workers_rule"], m.Workers.Neutron, m.Workers.Octavia, res["knees"], res["workers_by_throughput"])
	fmt.Fprintf(&b, "Defaults: read %.1f ms (p50 of the cheap reads), write %.1f ms (p50 of the single-object writes).\n\n", m.Default.ReadMs, m.Default.WriteMs)
	b.WriteString("Bulk creates in order (size, ports on the network before, ms):")
	for _, r := range c.trend {
		fmt.Fprintf(&b, " %.0f/%.0f/%.0f", r["size"], r["ports_before"], r["ms"])
	}
	b.WriteString(".\n\nModel: an operation that carries items (bulk create, batch update, list) is the line base + per item × items " +
		"with the least squared relative error through its cases' p50s (through 0 where that line's base would be negative; " +
		"see fits in calibration.json); any other is the p50 of its samples.\n\n")
	b.WriteString("| model: operation | base ms | per item ms |\n|---|---|---|\n")
	ops := make([]string, 0, len(m.Ops))
	for op := range m.Ops {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	for _, op := range ops {
		fmt.Fprintf(&b, "| `%s` | %.1f | %.2f |\n", op, m.Ops[op].BaseMs, m.Ops[op].PerItemMs)
	}
	return b.String()
}

// neutronAPIWorkers is the api_workers of the running Neutron, from its configuration file.
func neutronAPIWorkers(t testing.TB) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.vars["STACK_DIR"], "neutron", "neutron.conf"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^api_workers\s*=\s*(\d+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("neutron.conf names no api_workers")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// leastSquares is the line y = a + b·x through the points with the least sum of squared relative errors
// ((a + b·x − y) / y): a single create of 0.5 s and a bulk of 30 s weigh alike (b = 0 for fewer than two xs).
func leastSquares(xs, ys []float64) (a, b float64) {
	var s, sx, sy, sxx, sxy float64
	for i := range xs {
		w := 1 / (ys[i] * ys[i])
		s, sx, sy, sxx, sxy = s+w, sx+w*xs[i], sy+w*ys[i], sxx+w*xs[i]*xs[i], sxy+w*xs[i]*ys[i]
	}
	d := s*sxx - sx*sx
	if d <= 1e-12*s*sxx {
		return mean(ys), 0
	}
	b = (s*sxy - sx*sy) / d
	return (sy - b*sx) / s, b
}

// throughOrigin is the b of the line y = b·x with the least sum of squared relative errors.
func throughOrigin(xs, ys []float64) float64 {
	var num, den float64
	for i := range xs {
		num += xs[i] / ys[i]
		den += xs[i] * xs[i] / (ys[i] * ys[i])
	}
	if den == 0 {
		return 0
	}
	return num / den
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

func roundAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		out[i] = round2(v[i])
	}
	return out
}
