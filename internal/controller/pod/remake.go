package pod

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/pkg/annotations"
)

// Event reasons on a pod whose annotation Raven points at another port.
const (
	// ReasonPortRemade: the pod's port was gone; its new port has the same MAC and IP.
	ReasonPortRemade = "PortRemade"
	// ReasonAddressChanged: the pod's port was gone and its address could not be kept.
	ReasonAddressChanged = "PodAddressChanged"
	// ReasonVLANChanged: a nested pod's port was gone; its new port has the same MAC and IP but another place
	// on the trunk, which the pod's interface does not follow.
	ReasonVLANChanged = "PodVLANChanged"
)

// announcedPort is the port the pod's annotation names (zero when it has none, or one that does not decode).
func announcedPort(pod *corev1.Pod) annotations.Port {
	var p annotations.Port
	_, _ = annotations.Decode(pod.Annotations, annotations.PodPort, &p) // a bad value names no port
	return p
}

// keepAddress is what a port made for the pod asks Neutron for: the address of the port its annotation
// names, so that a running pod whose port is gone keeps its MAC and IP (nil for a pod not annotated yet).
func keepAddress(announced annotations.Port) *neutron.Address {
	if announced.ID == "" || announced.MACAddress == "" || len(announced.FixedIPs) == 0 {
		return nil
	}
	return &neutron.Address{MAC: announced.MACAddress, IP: announced.FixedIPs[0].IPAddress}
}

// reportPortChange says on the pod, and in the log, that its annotation now names port instead of the port
// before named: why that one went, and whether the pod kept its address. Nothing when the port is the same,
// or the pod had none. nested is where the new port is on its node VM's trunk (nil on a chassis).
func (r *Reconciler) reportPortChange(ctx context.Context, pod *corev1.Pod, before annotations.Port, port *neutron.Port, nn *neutron.NamespaceNet,
	nested *annotations.Nested) {
	if before.ID == "" || before.ID == port.ID || len(before.FixedIPs) == 0 {
		return
	}
	log := klog.FromContext(ctx)
	why := r.whyGone(before, nn)
	oldIP, newIP := before.FixedIPs[0].IPAddress, firstIP(port.FixedIPs)
	if oldIP == newIP && before.MACAddress == port.MACAddress && movedOnTrunk(before.Nested, nested) {
		log.Info("Warning: the pod's port was made again with its address, on another VLAN", "reason", ReasonVLANChanged,
			"formerPort", before.ID, "port", port.ID, "why", why, "ip", newIP, "formerVLAN", before.Nested.VLAN, "vlan", vlanOf(nested))
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonVLANChanged, "Remake",
			"port %s %s; made port %s with the same MAC %s and IP %s, but on VLAN %d of its node VM's trunk where the former "+
				"one was on VLAN %d (another port holds that VLAN now), and raven-node on a nested node does not move a running "+
				"pod's interface: the pod has no network until it is deleted and made again",
			before.ID, why, port.ID, port.MACAddress, newIP, vlanOf(nested), before.Nested.VLAN)
		return
	}
	if oldIP == newIP && before.MACAddress == port.MACAddress {
		log.Info("Made the pod's port again with its address", "formerPort", before.ID, "port", port.ID, "why", why,
			"ip", newIP, "mac", port.MACAddress)
		r.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonPortRemade, "Remake",
			"port %s %s; made port %s with the same MAC %s and IP %s, and raven-node points the pod's interface at it",
			before.ID, why, port.ID, port.MACAddress, newIP)
		return
	}
	lost := "Neutron refused it (another port holds it now: Raven's log has its answer)"
	if !keepAddress(before).Fits(nn) {
		lost = fmt.Sprintf("it is not in the namespace's subnet %s", nn.Subnet.CIDR)
	}
	follows := "raven-node moves the pod's interface to it"
	if before.Nested != nil {
		follows = "raven-node on a nested node does not move a running pod's interface to it"
	}
	log.Info("Warning: the pod's port was made again with another address", "reason", ReasonAddressChanged,
		"formerPort", before.ID, "port", port.ID, "why", why, "formerIP", oldIP, "ip", newIP, "formerMAC", before.MACAddress, "mac", port.MACAddress)
	r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonAddressChanged, "Remake",
		"port %s %s, and its address %s (MAC %s) could not be kept: %s. New port %s has IP %s (MAC %s), and %s; "+
			"but status.podIP, which the kubelet set, still says %s, and Services and "+
			"NetworkPolicies find the pod by it: delete the pod so that it is made again with its new address",
		before.ID, why, oldIP, before.MACAddress, lost, port.ID, newIP, port.MACAddress, follows, oldIP)
}

// movedOnTrunk says a nested pod's new port is not where its former one was on the node VM's trunk (another
// VLAN, another trunk, or none): the pod's interface, which raven-node on a nested node does not move, carries
// the former VLAN.
func movedOnTrunk(before, after *annotations.Nested) bool {
	return before != nil && (after == nil || after.VLAN != before.VLAN || after.TrunkID != before.TrunkID)
}

// vlanOf is the VLAN of a nested port, 0 when there is none.
func vlanOf(n *annotations.Nested) int {
	if n == nil {
		return 0
	}
	return n.VLAN
}

// whyGone says why the port a pod's annotation names is no longer the pod's.
func (r *Reconciler) whyGone(before annotations.Port, nn *neutron.NamespaceNet) string {
	switch {
	case before.NetworkID != "" && before.NetworkID != nn.Network.ID:
		return fmt.Sprintf("was on network %s, and the namespace's network is now %s (made again)", before.NetworkID, nn.Network.ID)
	case r.Neutron.X.Known(before.ID):
		return "now belongs to another owner"
	}
	return "was deleted from Neutron"
}

// portGone says the port the pod's annotation names is not the pod's port on nn in the index (deleted out of
// band, given to another owner, or on a network the namespace no longer has): EnsurePort gives the pod another.
func (r *Reconciler) portGone(pod *corev1.Pod, id string, nn *neutron.NamespaceNet) bool {
	if id == "" || !r.Neutron.X.PortsLoaded() {
		return false
	}
	for _, p := range r.Neutron.X.PortsOf(string(pod.UID)) {
		if p.ID == id && p.NetworkID == nn.Network.ID {
			return false
		}
	}
	return true
}
