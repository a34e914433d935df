package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// Sim is a simulated Neutron and Octavia: two http.Handlers over one fake.Neutron and one fake.Octavia, with
// one latency model and one set of counters.
type Sim struct {
	// Networking and LoadBalancing hold the objects: indexed, with UUID-shaped IDs.
	Networking    *fake.Neutron
	LoadBalancing *fake.Octavia
	// Log, when set, reports every request answered with an error other than 404.
	Log func(format string, args ...any)

	model            Model
	latency          atomic.Bool
	neutron, octavia *service
	count            counters
	mu               sync.Mutex
	// poolPrefix: subnet pool ID → its default prefix length.
	poolPrefix map[string]int
}

// New makes a Sim that serves by the model (the zero Model: at once, without a limit). It holds no network:
// AddExternalNetwork makes the cloud's external one.
func New(m Model) *Sim {
	n := fake.NewNeutron()
	n.Lock()
	delete(n.Nets, "public") // the fake's own external network, with an ID no client would take for one
	n.Unlock()
	n.UUIDs = true
	n.Index()
	n.PortsByTag(kindTag) // the index counts the kinds from now on, for Stats
	o := fake.NewOctavia()
	o.UUIDs = true
	o.Index()
	s := &Sim{Networking: n, LoadBalancing: o, model: m, poolPrefix: map[string]int{}}
	s.latency.Store(true)
	s.neutron = newService("neutron", m.Workers.Neutron, []string{"/v2.0/"}, s.neutronRoutes(), neutronFault)
	s.octavia = newService("octavia", m.Workers.Octavia, []string{"/v2/lbaas/", "/v2.0/lbaas/"}, s.octaviaRoutes(), octaviaFault)
	return s
}

// AddExternalNetwork makes an external network (router:external) with one subnet of cidr, for routers'
// gateways and floating IPs.
func (s *Sim) AddExternalNetwork(ctx context.Context, name, cidr string) (*openstack.Network, error) {
	net, _, err := s.Networking.AddExternalNetwork(ctx, name, cidr)
	return net, err
}

// Neutron is the Neutron API (paths /v2.0/...), with /sim/stats, /sim/reset and /sim/latency.
func (s *Sim) Neutron() http.Handler { return s.handler(s.neutron) }

// Octavia is the Octavia API (paths /v2/lbaas/... and /v2.0/lbaas/...), with /sim/stats, /sim/reset and
// /sim/latency.
func (s *Sim) Octavia() http.Handler { return s.handler(s.octavia) }

func (s *Sim) handler(svc *service) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sim/stats", s.serveStats)
	mux.HandleFunc("POST /sim/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /sim/latency", s.serveLatency)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.serve(svc, w, r) })
	return mux
}

// serve answers one API request: it waits for a worker of the service, runs the request, holds the worker
// until the model's time for the request has passed, and answers.
func (s *Sim) serve(svc *service, w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	op := openstack.Operation(r.Method, r.URL.Path, "")
	rt, c := svc.match(r)
	apply := s.latency.Load()
	if apply && svc.sem != nil {
		svc.sem <- struct{}{}
	}
	started := time.Now()
	res := svc.run(rt, c)
	if apply {
		if d := s.model.serviceTime(op, r.Method, c.items) - time.Since(started); d > 0 {
			time.Sleep(d) // the worker is busy: a timer, not the CPU
		}
		if svc.sem != nil {
			<-svc.sem
		}
	}
	// Counted before the answer leaves: a client that has its answer finds it in Stats.
	s.count.record(served{op: op, method: r.Method, items: c.items, list: c.list, first: c.query.Get("marker") == "",
		status: res.status, total: time.Since(arrived), wait: started.Sub(arrived)})
	res.write(w)
	if s.Log != nil && res.status >= 400 && res.status != http.StatusNotFound {
		s.Log("%s %s %s: %d %s", svc.name, r.Method, r.URL.RequestURI(), res.status, res.msg)
	}
}

// Reset zeroes the counters; the objects stay.
func (s *Sim) Reset() { s.count.reset() }

// SetLatency applies the model (on) or serves at full speed without a worker limit (off).
func (s *Sim) SetLatency(on bool) { s.latency.Store(on) }

// Stats counts the requests since the last reset and the objects held now.
func (s *Sim) Stats() Stats {
	ops, totals := s.count.snapshot()
	return Stats{Ops: ops, Totals: totals, Objects: s.objects(), Latency: s.latency.Load()}
}

func (s *Sim) objects() Objects {
	n, o := s.Networking.Count(), s.LoadBalancing.Count()
	kinds := s.Networking.PortsByTag(kindTag)
	if c, ok := kinds[""]; ok {
		delete(kinds, "")
		kinds["none"] = c
	}
	return Objects{Networks: n.Networks, Subnets: n.Subnets, SubnetPools: n.SubnetPools, Routers: n.Routers, Ports: n.Ports,
		PortsByKind: kinds, FreePoolPorts: s.Networking.PortsWithoutDevice(kindTag + "pool"), Trunks: n.Trunks, Subports: n.Subports,
		SecurityGroups: n.SecurityGroups, Rules: n.Rules, FloatingIPs: n.FloatingIPs, LoadBalancers: o.LoadBalancers,
		Listeners: o.Listeners, Pools: o.Pools, Members: o.Members, HealthMonitors: o.Monitors}
}

// kindTag starts the tag that says what Raven made a port for (internal/ownership).
const kindTag = "raven.kind="

func (s *Sim) serveStats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Stats())
}

func (s *Sim) serveLatency(w http.ResponseWriter, r *http.Request) {
	on, err := strconv.ParseBool(r.URL.Query().Get("on"))
	if err != nil {
		http.Error(w, "on must be true or false", http.StatusBadRequest)
		return
	}
	s.SetLatency(on)
	w.WriteHeader(http.StatusOK)
}
