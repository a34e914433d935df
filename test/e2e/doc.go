// Package e2e holds Raven's end-to-end tests. They run (with -tags e2e) against the real local stack of
// hack/stack.sh: kube-apiserver, etcd, kube-controller-manager, Neutron and Octavia on 127.0.0.1, and nodes
// of kubelet and containerd with raven-node as their DaemonSet. The harness attaches to a running stack or starts one (and stops it afterwards), runs the
// Raven binary as a child process, gives each test its own namespace and, when a test fails, dumps the
// Neutron, Octavia and Kubernetes state and the service logs.
package e2e
