package plug

import (
	"net"
)

// Route is one route in the pod: to Dst via GW.
type Route struct {
	Dst *net.IPNet
	GW  net.IP
}

// Spec is what a pod's network namespace should hold.
type Spec struct {
	// Netns is the path of the pod's network namespace.
	Netns string
	// IfName is the pod end of the veth (CNI_IFNAME).
	IfName string
	// HostIfName is the host end, the name OVS knows it by; on the kernel-VLAN path, the name the VLAN link has
	// in the host's namespace, before it moves into the pod's.
	HostIfName string
	// HostNetns is the path of the namespace that holds the node's datapath (where the host end goes); empty
	// means the caller's own.
	HostNetns string
	// MAC of the pod end: the Neutron port's.
	MAC net.HardwareAddr
	// MTU of both ends.
	MTU int
	// Address is the pod's IP with the subnet's prefix length.
	Address *net.IPNet
	// Routes, the default route via the gateway first.
	Routes []Route
	// VLAN is the 802.1Q VLAN ID of a nested pod's subport, which SetupVLAN gives the pod's interface; 0 on a
	// chassis. Setup does not read it.
	VLAN int
}

// Result is the pair as created. A VLAN link has no host end: Host is zero.
type Result struct {
	Host net.Interface
	Pod  net.Interface
}

// Observed is what Inspect found on the pod end.
type Observed struct {
	MAC        net.HardwareAddr
	MTU        int
	Up         bool
	Addrs      []*net.IPNet
	TxChecksum bool
	// VLAN is the 802.1Q VLAN ID of the interface when it is a VLAN link (the kernel-VLAN path), 0 otherwise.
	VLAN int
}
