package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the CNI server's: requests by command and outcome, and their duration.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the server's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raven_node_cni_requests_total", Help: "CNI requests by command and result (ok, error).",
		}, []string{"command", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "raven_node_cni_request_duration_seconds",
			Help:    "Time to answer a CNI request; for ADD it includes waiting for the port annotation and ovn-installed.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120},
		}, []string{"command"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *Metrics) observe(command string, err error, d time.Duration) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.requests.WithLabelValues(command, result).Inc()
	m.duration.WithLabelValues(command).Observe(d.Seconds())
}
