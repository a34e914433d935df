// Package metrics defines Raven's own Prometheus metrics, registered with controller-runtime's registry
// so that they are served on /metrics next to the reconcile and workqueue metrics controller-runtime keeps.
package metrics
