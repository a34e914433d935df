package server

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/pkg/annotations"
)

const (
	// ReasonPortUnbound is the event reason when a running pod's interface lost its OVN binding, and raven-node
	// asked Raven to check the pod's port.
	ReasonPortUnbound = "NetworkPortUnbound"
	// DefaultUnboundGrace is how long a running pod's interface may be without ovn-installed before raven-node
	// asks for a check: ovn-controller sets it again within tens of milliseconds when it merely re-installs.
	DefaultUnboundGrace = 3 * time.Second
	// askFirst and askMax space the requests about one port: after one, the next comes askFirst later at the
	// earliest, doubling up to askMax (the controller's resync lists every port every 5 minutes by default).
	askFirst = 30 * time.Second
	askMax   = 5 * time.Minute
)

// checkAsk is a request to make: the pod, its interface without binding, and the port it carries.
type checkAsk struct {
	pod         *corev1.Pod
	iface, port string
	since       time.Time
}

// asked is when a port may be asked about again, and the wait after that.
type asked struct {
	next time.Time
	wait time.Duration
}

// bindingWatch decides, from the interfaces as the monitor shows them, which running pods' ports to ask the
// controller to check.
type bindingWatch struct {
	grace time.Duration
	// lost holds since when each interface (by name) has been without ovn-installed, and for which port.
	lost map[string]lostSince
	// asked holds, by port ID, when the port may be asked about again.
	asked map[string]asked
}

type lostSince struct {
	port  string
	since time.Time
}

func newBindingWatch(grace time.Duration) *bindingWatch {
	return &bindingWatch{grace: grace, lost: map[string]lostSince{}, asked: map[string]asked{}}
}

// step looks at the interfaces at now, and returns the requests to make and when to look again without a change
// of OVS (0: at the next change only). get reads a pod from the node's cache (nil when it has none).
func (b *bindingWatch) step(ifaces []ovs.Interface, get func(namespace, name string) *corev1.Pod, now time.Time) (asks []checkAsk, next time.Duration) {
	soonest := func(d time.Duration) {
		if next == 0 || d < next {
			next = d
		}
	}
	present := make(map[string]bool, len(ifaces))
	ports := make(map[string]bool, len(ifaces))
	for _, iface := range ifaces {
		ids := iface.ExternalIDs
		if ids[ovs.KeySandbox] == "" || ids[ovs.KeyIfaceID] == "" {
			continue // not plugged by an ADD
		}
		port := ids[ovs.KeyIfaceID]
		present[iface.Name], ports[port] = true, true
		l, ok := b.lost[iface.Name]
		switch {
		case iface.Installed():
			delete(b.lost, iface.Name)
			continue
		case !ok || l.port != port:
			l = lostSince{port: port, since: now}
			b.lost[iface.Name] = l
		}
		if wait := l.since.Add(b.grace).Sub(now); wait > 0 {
			soonest(wait)
			continue
		}
		pod, wait := b.eligible(iface, get, now)
		if pod == nil {
			soonest(wait)
			continue
		}
		asks = append(asks, checkAsk{pod: pod, iface: iface.Name, port: port, since: l.since})
		b.backoff(port, now)
	}
	b.forget(present, ports)
	return asks, next
}

// eligible returns the pod to ask a check for, or nil and when to look again: a running pod whose annotation
// names the interface's port, with no request pending, and whose port was not asked about lately.
func (b *bindingWatch) eligible(iface ovs.Interface, get func(namespace, name string) *corev1.Pod, now time.Time) (*corev1.Pod, time.Duration) {
	port := iface.ExternalIDs[ovs.KeyIfaceID]
	if wait := b.asked[port].next.Sub(now); wait > 0 {
		return nil, wait
	}
	namespace, name, _ := strings.Cut(iface.ExternalIDs[ovs.KeyPod], "/")
	pod := get(namespace, name)
	if pod == nil || !pluggedFor(iface, pod) || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning ||
		annotatedID(pod) != port || pod.Annotations[annotations.PodPortCheck] == port {
		// Not (or not yet) a running pod on this port, or a request pending: look again later, as the pod
		// may change without OVS changing.
		return nil, b.grace
	}
	return pod, 0
}

// backoff records a request about port at now.
func (b *bindingWatch) backoff(port string, now time.Time) {
	wait := b.asked[port].wait
	if wait == 0 {
		wait = askFirst
	}
	b.asked[port] = asked{next: now.Add(wait), wait: min(2*wait, askMax)}
}

// forget drops what it knows of interfaces and ports no longer on the bridge.
func (b *bindingWatch) forget(present, ports map[string]bool) {
	for name := range b.lost {
		if !present[name] {
			delete(b.lost, name)
		}
	}
	for port := range b.asked {
		if !ports[port] {
			delete(b.asked, port)
		}
	}
}
