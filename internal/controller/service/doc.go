// Package service reconciles Services and their EndpointSlices into Octavia load balancers: a VIP port
// on the service network whose fixed IP is the clusterIP, a load balancer on it, one listener and pool
// per Service port, members from ready endpoints (one batch update per pool), and a floating IP for an
// externalIP inside the external subnet or for type LoadBalancer. A finalizer guards the deletion.
package service
