package server

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/wire"
	"github.com/raven-net/raven/pkg/annotations"
)

// DefaultMTU is the pod MTU when the annotation has none: a 1500 underlay less Geneve's overhead.
const DefaultMTU = 1442

// target is a pod whose port is ready to plug on this node.
type target struct {
	pod    *corev1.Pod
	uid    string
	port   annotations.Port
	subnet annotations.Subnet
}

// boundElsewhereError is the one reason ADD stops waiting before its deadline.
type boundElsewhereError struct {
	port, host, node string
}

func (e *boundElsewhereError) Error() string {
	return fmt.Sprintf("port %s is bound to node %s, not %s", e.port, e.host, e.node)
}

// elsewhereError says the pod of an ADD runs on another node: the runtime of that node should have asked.
type elsewhereError struct {
	pod, host, node string
}

func (e *elsewhereError) Error() string {
	return fmt.Sprintf("pod %s is scheduled to node %s, not %s", e.pod, e.host, e.node)
}

// noPodUIDError says the port annotation names no pod: Raven's controller writes the pod's UID in every port
// annotation it makes (the device_id of the pod's port, or, on a subport or a pool port claimed in memory, the
// UID its claim records), so an annotation without one is none of its own, and its port may be another pod's.
type noPodUIDError struct {
	port string
}

func (e *noPodUIDError) Error() string {
	return fmt.Sprintf("its %s annotation names port %s without a pod_uid, which Raven's controller always writes: raven-node "+
		"plugs a port only for the pod the annotation names. Raven's controller writes the pod's own port over an annotation "+
		"it did not write, and the runtime's next ADD plugs that; if the annotation stays, look at Raven's events on the pod",
		annotations.PodPort, e.port)
}

// evaluate says whether the cached pod carries a port this node can plug for the pod of the request.
// It returns the target, or what is still awaited, or an error when waiting cannot help.
func evaluate(pod *corev1.Pod, want wire.Pod, node string) (t target, waitingFor string, err error) {
	if pod == nil {
		return target{}, fmt.Sprintf("pod %s to appear in the node's pod cache", want), nil
	}
	if want.UID != "" && string(pod.UID) != want.UID {
		return target{}, fmt.Sprintf("pod %s with UID %s (the cache has UID %s)", want, want.UID, pod.UID), nil
	}
	uid := want.UID
	if uid == "" {
		uid = string(pod.UID)
	}
	var port annotations.Port
	ok, err := annotations.Decode(pod.Annotations, annotations.PodPort, &port)
	if !ok {
		return target{}, fmt.Sprintf("the %s annotation", annotations.PodPort), nil
	}
	if err != nil {
		return target{}, fmt.Sprintf("a valid %s annotation (%v)", annotations.PodPort, err), nil
	}
	switch port.PodUID {
	case "":
		return target{}, "", &noPodUIDError{port: port.ID}
	case uid:
	default:
		// An annotation left from an earlier pod of the same name: the controller writes this pod's soon.
		return target{}, fmt.Sprintf("a port for pod UID %s (port %s is for UID %s)", uid, port.ID, port.PodUID), nil
	}
	if waitingFor, err := checkBinding(port, node); err != nil || waitingFor != "" {
		return target{}, waitingFor, err
	}
	if len(port.FixedIPs) == 0 {
		return target{}, fmt.Sprintf("an IP address on port %s", port.ID), nil
	}
	subnet, waitingFor := portSubnet(pod, port)
	if waitingFor != "" {
		return target{}, waitingFor, nil
	}
	return target{pod: pod, uid: uid, port: port, subnet: subnet}, "", nil
}

// checkBinding says whether the port is this node's to plug: bound to it, or a subport of its VM's trunk (a
// nested node's pod). A port of another node is an error; an unbound one is waited for.
func checkBinding(port annotations.Port, node string) (waitingFor string, err error) {
	switch {
	case port.Nested != nil && port.Nested.Node != node:
		return "", &boundElsewhereError{port: port.ID, host: port.Nested.Node, node: node}
	case port.Nested != nil:
		return "", nil
	case port.HostID != "" && port.HostID != node:
		return "", &boundElsewhereError{port: port.ID, host: port.HostID, node: node}
	case port.HostID == "":
		return fmt.Sprintf("port %s to be bound to node %s (its binding:host_id is empty)", port.ID, node), nil
	}
	return "", nil
}

// portSubnet reads the pod's subnet annotation, or says what is still awaited: a valid annotation naming
// the subnet of the port's first address.
func portSubnet(pod *corev1.Pod, port annotations.Port) (annotations.Subnet, string) {
	var subnet annotations.Subnet
	ok, err := annotations.Decode(pod.Annotations, annotations.PodSubnet, &subnet)
	if !ok || err != nil {
		return subnet, fmt.Sprintf("a valid %s annotation", annotations.PodSubnet)
	}
	if subnet.ID != port.FixedIPs[0].SubnetID {
		return subnet, fmt.Sprintf("the %s annotation of subnet %s (it names %s)", annotations.PodSubnet, port.FixedIPs[0].SubnetID, subnet.ID)
	}
	return subnet, ""
}

// HostIfName is the host end of a port's veth: tap and the port ID's first 11 characters, as Neutron's
// own agents name it.
func HostIfName(portID string) string {
	return "tap" + portID[:min(11, len(portID))]
}

// buildSpec turns a ready target into what the pod's namespace should hold.
func buildSpec(t target, netns, ifName string) (plug.Spec, error) {
	return BuildSpec(t.port, t.subnet, netns, ifName)
}

// BuildSpec is what the pod's namespace should hold for a port and its subnet, as Raven annotates them.
func BuildSpec(port annotations.Port, subnet annotations.Subnet, netns, ifName string) (plug.Spec, error) {
	mac, err := net.ParseMAC(port.MACAddress)
	if err != nil {
		return plug.Spec{}, fmt.Errorf("port %s: mac_address %q: %w", port.ID, port.MACAddress, err)
	}
	ip := net.ParseIP(port.FixedIPs[0].IPAddress)
	if ip == nil {
		return plug.Spec{}, fmt.Errorf("port %s: ip_address %q is not an IP", port.ID, port.FixedIPs[0].IPAddress)
	}
	_, cidr, err := net.ParseCIDR(subnet.CIDR)
	if err != nil {
		return plug.Spec{}, fmt.Errorf("subnet %s: cidr %q: %w", subnet.ID, subnet.CIDR, err)
	}
	if !cidr.Contains(ip) {
		return plug.Spec{}, fmt.Errorf("port %s: address %s is not in subnet %s (%s)", port.ID, ip, subnet.ID, cidr)
	}
	mtu := port.MTU
	if mtu == 0 {
		mtu = DefaultMTU
	}
	spec := plug.Spec{
		Netns: netns, IfName: ifName, HostIfName: HostIfName(port.ID),
		MAC: mac, MTU: mtu, Address: &net.IPNet{IP: ip, Mask: cidr.Mask},
	}
	if subnet.GatewayIP != "" {
		gw := net.ParseIP(subnet.GatewayIP)
		if gw == nil {
			return plug.Spec{}, fmt.Errorf("subnet %s: gateway_ip %q is not an IP", subnet.ID, subnet.GatewayIP)
		}
		spec.Routes = append(spec.Routes, plug.Route{Dst: plug.DefaultRoute(gw), GW: gw})
	}
	for _, hr := range subnet.HostRoutes {
		_, dst, err := net.ParseCIDR(hr.Destination)
		if err != nil {
			return plug.Spec{}, fmt.Errorf("subnet %s: host route %q: %w", subnet.ID, hr.Destination, err)
		}
		nh := net.ParseIP(hr.NextHop)
		if nh == nil {
			return plug.Spec{}, fmt.Errorf("subnet %s: host route nexthop %q is not an IP", subnet.ID, hr.NextHop)
		}
		if dst.IP.To4() != nil != (ip.To4() != nil) {
			continue // another family
		}
		spec.Routes = append(spec.Routes, plug.Route{Dst: dst, GW: nh})
	}
	return spec, nil
}
