// Package controller holds what Raven's reconcilers share: the start gate that holds them until the
// OpenStack view is loaded, and the event reasons for OpenStack failures.
package controller
