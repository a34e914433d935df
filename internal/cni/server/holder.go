package server

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/pkg/annotations"
)

// ReasonPortInUse is the Warning of an ADD refused because another pod of the node holds the port.
const ReasonPortInUse = "PortInUse"

// portInUseError says an interface of the bridge carries the port for another pod of the node that still holds it.
type portInUseError struct {
	port, iface, holder, sandbox string
}

func (e *portInUseError) Error() string {
	return fmt.Sprintf("port %s is carried by interface %s for pod %s (sandbox %s), which is not finished and whose %s "+
		"annotation names that port: raven-node plugs a port for one pod only", e.port, e.iface, e.holder, e.sandbox, annotations.PodPort)
}

// inUse returns a *portInUseError when an interface of the bridge other than self carries portID (its iface-id) for
// a pod other than the one of UID uid, and that pod still holds the port. Two interfaces carrying one port would
// share its traffic, so a pod whose annotation names a port another pod of the node holds (an annotation Raven's
// controller did not write: the controller gives a port to a pod only once its former pod let it go) must not get
// it, whether by an ADD or by following its port. The caller holds the lock of the port's interface name
// (HostIfName), which every plug of the port takes, so that no other plug of the port runs meanwhile.
//
// An interface of the same pod (an earlier sandbox: a restart) is no obstacle, nor one whose pod no longer holds
// the port (see holds): ADD takes those over as it always did. On the kernel-VLAN path there is no bridge: the
// kernel makes at most one link of a VLAN on the uplink, so a second pod cannot take a subport's VLAN while the
// namespace of the pod that has it lives.
func (s *Server) inUse(ctx context.Context, portID, uid, self string) error {
	if s.kernelVLAN() {
		return nil
	}
	ifaces, err := s.cfg.OVS.Interfaces(ctx)
	if err != nil {
		return fmt.Errorf("looking for another pod's interface carrying port %s: %w", portID, err)
	}
	for _, iface := range ifaces {
		ids := iface.ExternalIDs
		if iface.Name == self || ids[ovs.KeyIfaceID] != portID || ids[ovs.KeyIfaceIDVer] == uid {
			continue
		}
		held, err := s.holds(iface)
		if err != nil {
			return err
		}
		if held {
			return &portInUseError{port: portID, iface: iface.Name, holder: ids[ovs.KeyPod], sandbox: ids[ovs.KeySandbox]}
		}
	}
	return nil
}

// holds says whether the pod an ADD plugged the interface for still holds the port the interface carries: the
// node's cache has it under the interface's UID (Raven's controller releases the port of a pod only once the pod
// is gone, a pod being deleted included, or finished), it is not finished, and its own port annotation names the
// port (when it names another, the controller gave the pod another port and may give this one to another pod). An
// interface of no ADD's (no raven-sandbox or raven-pod) holds nothing.
func (s *Server) holds(iface ovs.Interface) (bool, error) {
	ids := iface.ExternalIDs
	namespace, name, ok := strings.Cut(ids[ovs.KeyPod], "/")
	if !ok || ids[ovs.KeySandbox] == "" {
		return false, nil
	}
	pod, err := s.cfg.Pods.Get(namespace, name)
	if err != nil || pod == nil {
		return false, err
	}
	return string(pod.UID) == ids[ovs.KeyIfaceIDVer] && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed &&
		annotatedID(pod) == ids[ovs.KeyIfaceID], nil
}
