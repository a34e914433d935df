// Package pod reconciles Pods into Neutron ports. Each pod that needs a network gets one port on its
// namespace's network, found by the pod's UID before anything is created, and Raven writes the
// kuryr.org/neutron-port and kuryr.org/neutron-subnet annotations in one patch when they differ.
// A deleted or finished pod's port is deleted.
package pod
