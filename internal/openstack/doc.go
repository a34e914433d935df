// Package openstack is the only package that imports gophercloud. It offers narrow, context-first
// interfaces to Neutron and Octavia (Networking, LoadBalancing) with Raven's own plain types, builds
// authenticated clients from clouds.yaml, classifies OpenStack errors in one place (errors.go) and
// measures every call (metrics.go).
package openstack
