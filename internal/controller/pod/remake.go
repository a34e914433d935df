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
// or the pod had none.
func (r *Reconciler) reportPortChange(ctx context.Context, pod *corev1.Pod, before annotations.Port, port *neutron.Port, nn *neutron.NamespaceNet) {
	if before.ID == "" || before.ID == port.ID || len(before.FixedIPs) == 0 {
		return
	}
	log := klog.FromContext(ctx)
	why := r.whyGone(before, nn)
	oldIP, newIP := before.FixedIPs[0].IPAddress, firstIP(port.FixedIPs)
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
	log.Info("Warning: the pod's port was made again with another address", "reason", ReasonAddressChanged,
		"formerPort", before.ID, "port", port.ID, "why", why, "formerIP", oldIP, "ip", newIP, "formerMAC", before.MACAddress, "mac", port.MACAddress)
	r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonAddressChanged, "Remake",
		"port %s %s, and its address %s (MAC %s) could not be kept: %s. New port %s has IP %s (MAC %s), and raven-node "+
			"moves the pod's interface to it; but status.podIP, which the kubelet set, still says %s, and Services and "+
			"NetworkPolicies find the pod by it: delete the pod so that it is made again with its new address",
		before.ID, why, oldIP, before.MACAddress, lost, port.ID, newIP, port.MACAddress, oldIP)
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
