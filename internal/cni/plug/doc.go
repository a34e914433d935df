// Package plug does the namespace half of plugging a pod: a veth pair whose host end is born in the host
// namespace, the pod end's MAC, MTU, address and routes, loopback up and TX checksum offload off; and the
// reverse. On a nested node's kernel-VLAN path the pod's interface is instead an 802.1Q link on the VM's NIC,
// moved into the pod and configured the same way (vlan.go). Everything runs inside ns.Do on a locked OS
// thread, as containernetworking/plugins does.
package plug
