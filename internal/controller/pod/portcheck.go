package pod

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// ReasonPortChecked is the event reason when raven-node asked for a check of the pod's port, and Neutron has it.
const ReasonPortChecked = "PortChecked"

const (
	// checkRate and checkBurst bound the GETs that raven-node's check requests cost, for all pods together.
	checkRate  = 5
	checkBurst = 10
	// checkEvery: a port found in Neutron is not asked for again sooner; a request meanwhile is just cleared.
	checkEvery = 30 * time.Second
)

// errCheckLater: the check budget is spent; the pod comes back when there is some again.
var errCheckLater = errors.New("waiting for the budget of port checks")

// portChecks bounds the checks raven-node asks for. The zero value is ready.
type portChecks struct {
	mu      sync.Mutex
	limiter *rate.Limiter
	found   map[string]time.Time // when each port was last found in Neutron
}

// due says the port was not found in Neutron within checkEvery.
func (c *portChecks) due(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.found[id]) >= checkEvery
}

// take spends one check of the budget; false when it is spent.
func (c *portChecks) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limiter == nil {
		c.limiter = rate.NewLimiter(checkRate, checkBurst)
	}
	return c.limiter.Allow()
}

// foundNow records that Neutron has the port, forgetting ports found long ago.
func (c *portChecks) foundNow(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.found == nil {
		c.found = map[string]time.Time{}
	}
	for k, t := range c.found {
		if now.Sub(t) >= checkEvery {
			delete(c.found, k)
		}
	}
	c.found[id] = now
}

// checkRequested answers raven-node's request (annotations.PodPortCheck) to check the port the pod's annotation
// names, whose interface lost its OVN binding: one GET tells whether Neutron still has it. A port gone (or no
// longer the pod's) leaves the index, so that EnsurePort makes it again at once, as after a resync. Requests
// for another port, for a port the index already knows gone, or before the port listing, need no GET; patch
// removes the request once the pod's port is right.
func (r *Reconciler) checkRequested(ctx context.Context, pod *corev1.Pod, announced annotations.Port, nn *neutron.NamespaceNet) error {
	id := pod.Annotations[annotations.PodPortCheck]
	if id == "" || id != announced.ID || !r.Neutron.X.PortsLoaded() || r.portGone(pod, id, nn) {
		return nil
	}
	log := klog.FromContext(ctx).WithValues("port", id)
	if !r.checks.due(id) {
		log.V(2).Info("raven-node asks to check the pod's port again; Neutron had it moments ago")
		return nil
	}
	if !r.checks.take() {
		return errCheckLater
	}
	p, err := r.Neutron.N.GetPort(ctx, id)
	switch {
	case openstack.IsNotFound(err):
		log.Info("The pod's port is gone from Neutron (raven-node found its interface without OVN binding); making it again now")
		r.Neutron.X.DropPort(id)
		return nil
	case err != nil:
		err = fmt.Errorf("reading port %s, whose interface raven-node found without OVN binding: %w", id, err)
		r.warn(pod, "PortCheck", "checking the pod's port at raven-node's request", err)
		return err
	}
	r.checks.foundNow(id)
	if o, _ := ownership.Parse(p.Tags); o.Cluster != r.Neutron.C.ID || o.UID != string(pod.UID) {
		log.Info("The pod's port belongs to another owner now; giving the pod another", "owner", o.Name, "ownerUID", o.UID)
		r.reindex(*p)
		return nil
	}
	log.Info("raven-node found the pod's interface without OVN binding, and Neutron has its port: nothing to make again",
		"status", p.Status, "host", p.HostID)
	r.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonPortChecked, "Check",
		"raven-node on node %s found the pod's interface without OVN binding and asked Raven to check port %s: Neutron has it "+
			"(status %s, bound to %q), so nothing is made again; if the pod does not answer, look at ovn-controller on that node",
		pod.Spec.NodeName, id, p.Status, p.HostID)
	return nil
}

// reindex records a port that is no longer the pod's under its owner now, or forgets it when it is not the
// cluster's any more.
func (r *Reconciler) reindex(p openstack.Port) {
	if ownership.Owns(r.Neutron.C.ID, p.Tags) {
		r.Neutron.X.PutPort(r.Neutron.C.ID, p)
		return
	}
	r.Neutron.X.DropPort(p.ID)
}
