package sim

import (
	"net/http"
	"sync"
	"time"
)

// OpStats are the requests of one operation since the last reset.
type OpStats struct {
	Calls int64 `json:"calls"`
	// Items are the objects the requests carried or their pages returned.
	Items int64 `json:"items"`
	// TotalMS is the time from each request's arrival to its answer, waiting for a worker included; QueueMS
	// the part spent waiting.
	TotalMS float64 `json:"total_ms"`
	QueueMS float64 `json:"queue_ms"`
	// Errors are the answers with a status of 400 or more.
	Errors int64 `json:"errors"`
}

// Totals are all the requests since the last reset.
type Totals struct {
	Calls int64 `json:"calls"`
	// Writes are the requests that were not GETs.
	Writes int64 `json:"writes"`
	// ListCalls are the lists asked for (the first page of each); ListPages every page asked for.
	ListCalls int64 `json:"list_calls"`
	ListPages int64 `json:"list_pages"`
	Errors    int64 `json:"errors"`
}

// Objects are the counts of what the simulated services hold.
type Objects struct {
	Networks    int `json:"networks"`
	Subnets     int `json:"subnets"`
	SubnetPools int `json:"subnetpools"`
	Routers     int `json:"routers"`
	Ports       int `json:"ports"`
	// PortsByKind counts the ports by their raven.kind=<kind> tag; "none" those without one.
	PortsByKind map[string]int `json:"ports_by_kind"`
	// FreePoolPorts are the ports tagged raven.kind=pool without a device_id.
	FreePoolPorts  int `json:"free_pool_ports"`
	Trunks         int `json:"trunks"`
	Subports       int `json:"subports"`
	SecurityGroups int `json:"security_groups"`
	Rules          int `json:"rules"`
	FloatingIPs    int `json:"floatingips"`
	LoadBalancers  int `json:"loadbalancers"`
	Listeners      int `json:"listeners"`
	Pools          int `json:"pools"`
	Members        int `json:"members"`
	HealthMonitors int `json:"healthmonitors"`
}

// Stats is the answer of GET /sim/stats.
type Stats struct {
	Ops     map[string]OpStats `json:"ops"`
	Totals  Totals             `json:"totals"`
	Objects Objects            `json:"objects"`
	// Latency says whether the model is applied (POST /sim/latency turns it off and on).
	Latency bool `json:"latency"`
}

// counters are the request counts, shared by both services.
type counters struct {
	mu     sync.Mutex
	ops    map[string]*OpStats
	totals Totals
}

// served is what one request leaves in the counters.
type served struct {
	op, method  string
	items       int
	list, first bool
	status      int
	total, wait time.Duration
}

func (c *counters) record(s served) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops == nil {
		c.ops = map[string]*OpStats{}
	}
	o := c.ops[s.op]
	if o == nil {
		o = &OpStats{}
		c.ops[s.op] = o
	}
	o.Calls++
	o.Items += int64(s.items)
	o.TotalMS += ms(s.total)
	o.QueueMS += ms(s.wait)
	c.totals.Calls++
	if s.method != http.MethodGet && s.method != http.MethodHead {
		c.totals.Writes++
	}
	if s.list {
		c.totals.ListPages++
		if s.first {
			c.totals.ListCalls++
		}
	}
	if s.status >= 400 {
		o.Errors++
		c.totals.Errors++
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (c *counters) snapshot() (map[string]OpStats, Totals) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := make(map[string]OpStats, len(c.ops))
	for k, v := range c.ops {
		ops[k] = *v
	}
	return ops, c.totals
}

func (c *counters) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops, c.totals = nil, Totals{}
}
