package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/raven-net/raven/internal/openstack"
)

// Metrics are Raven's collectors.
type Metrics struct {
	// PodPortLatency: pod first seen by this process → port annotation written.
	PodPortLatency prometheus.Histogram
	// OpenStackCalls: every OpenStack request by operation; OpenStackErrors by operation and kind.
	OpenStackCalls  *prometheus.HistogramVec
	OpenStackErrors *prometheus.CounterVec
	// Swept counts objects the orphan sweep removed, by kind.
	Swept *prometheus.CounterVec
	// Writing is 1 once this replica has loaded its view of OpenStack and reconciles (it leads).
	Writing prometheus.Gauge
	// Resyncs counts finished resyncs (list, repair, sweep), failed or not: a test or an operator can wait
	// for a window that contains a whole one.
	Resyncs *prometheus.CounterVec
	// PortListings counts the listings of every port of the cluster applied to Raven's view: at start, at the
	// first resync after it, and then at one resync every portAuditPeriod.
	PortListings prometheus.Counter
}

// New builds the collectors and registers them with reg (controller-runtime's registry when nil).
func New(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = crmetrics.Registry
	}
	m := &Metrics{
		PodPortLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "raven_pod_port_latency_seconds",
			Help:    "Time from Raven first seeing a pod without a port to writing its kuryr.org/neutron-port annotation.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60},
		}),
		OpenStackCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "raven_openstack_request_duration_seconds",
			Help:    "Latency of OpenStack API requests by operation (e.g. \"neutron port create\").",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"operation"}),
		OpenStackErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raven_openstack_request_errors_total",
			Help: "OpenStack API requests that failed, by operation and kind of failure.",
		}, []string{"operation", "kind"}),
		Swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raven_orphans_deleted_total",
			Help: "OpenStack objects the sweep deleted because their Kubernetes owner was gone, by kind.",
		}, []string{"kind"}),
		Writing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "raven_reconciling",
			Help: "1 when this replica has loaded its view of OpenStack and reconciles (it holds the lease).",
		}),
		Resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raven_resyncs_total",
			Help: "Resyncs (OpenStack listed, drift repaired, orphans swept) that ran to their end, by result (ok, error).",
		}, []string{"result"}),
		PortListings: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raven_port_listings_total",
			Help: "Listings of every port of the cluster applied to Raven's view: at start, at the first resync after it, and then at one resync every portAuditPeriod.",
		}),
	}
	reg.MustRegister(m.PodPortLatency, m.OpenStackCalls, m.OpenStackErrors, m.Swept, m.Writing, m.Resyncs, m.PortListings)
	return m
}

// ObserveCall implements openstack.Observer.
func (m *Metrics) ObserveCall(op string, d time.Duration, kind openstack.Kind) {
	m.OpenStackCalls.WithLabelValues(op).Observe(d.Seconds())
	if kind != "" {
		m.OpenStackErrors.WithLabelValues(op, string(kind)).Inc()
	}
}
