package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/wire"
	"github.com/raven-net/raven/pkg/annotations"
)

// Event reasons of a running pod whose port changed.
const (
	// ReasonPortChanged: the pod's interface now carries the port its annotation names.
	ReasonPortChanged = "NetworkPortChanged"
	// ReasonPortChangeFailed: it could not be made to.
	ReasonPortChangeFailed = "NetworkPortChangeFailed"
)

const (
	// allPlugged is the queue's key for "every pod an interface of the bridge names".
	allPlugged = ""
	// followWorkers follow that many pods at once.
	followWorkers = 2
	// followRetries bounds the retries of one pod's change that keeps failing (after 1 s, doubling up to 2
	// minutes: about 6 minutes in all); the look at every interface at start is tried until it passes.
	followRetries = 9
)

// Follow keeps the interfaces this node plugged on the ports their pods' annotations name, until ctx ends. The
// controller gives a running pod another port when its own is gone (deleted out of band, its network made
// again, taken by another owner), and annotates the pod with it; an ADD is long over, so Follow points the
// pod's interface at the new port (its iface-id) and, when the new port's MAC or IP differ, gives the pod's
// interface them inside the namespace its ADD recorded. It keeps no state of its own: at start it compares
// every interface of the bridge with its pod's annotation (OVS's external_ids and the pod cache), then it
// looks at a pod when its port annotations change.
func (s *Server) Follow(ctx context.Context) {
	if s.kernelVLAN() {
		return // no bridge whose interfaces to follow (and a nested pod does not follow a replaced port)
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("follow"))
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 2*time.Minute))
	s.cfg.Pods.OnUpdate(func(old, cur *corev1.Pod) {
		if portAnnotationsChanged(old, cur) {
			q.Add(cur.Namespace + "/" + cur.Name)
		}
	})
	q.Add(allPlugged)
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	var wg sync.WaitGroup
	for range followWorkers {
		wg.Go(func() {
			more := true
			for more {
				more = s.followNext(ctx, q)
			}
		})
	}
	wg.Wait()
}

// portAnnotationsChanged says an update changed what the interface of a pod that had a port depends on: its
// port, MAC, addresses or node, or its subnet. The first annotation of a pod comes before its ADD, which reads
// it; other changes of the annotation (the port's status, its groups) are none of the interface's business.
func portAnnotationsChanged(old, cur *corev1.Pod) bool {
	if old.Annotations[annotations.PodPort] == cur.Annotations[annotations.PodPort] &&
		old.Annotations[annotations.PodSubnet] == cur.Annotations[annotations.PodSubnet] {
		return false
	}
	o, hadPort := plugged(old)
	c, hasPort := plugged(cur)
	return hadPort && hasPort && o != c
}

// plugged is what of a pod's annotations its interface is made from; ok is false when it names no port.
func plugged(pod *corev1.Pod) (key string, ok bool) {
	var port annotations.Port
	if ok, err := annotations.Decode(pod.Annotations, annotations.PodPort, &port); !ok || err != nil || port.ID == "" {
		return "", false
	}
	ips := make([]string, 0, len(port.FixedIPs))
	for _, ip := range port.FixedIPs {
		ips = append(ips, ip.SubnetID+"="+ip.IPAddress)
	}
	return strings.Join([]string{port.ID, port.MACAddress, port.HostID, strings.Join(ips, ","), pod.Annotations[annotations.PodSubnet]}, " "), true
}

func (s *Server) followNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := s.followKey(ctx, q, key)
	switch {
	case err == nil:
		q.Forget(key)
	case key == allPlugged || q.NumRequeues(key) < followRetries:
		klog.FromContext(ctx).Info("Following the pods' ports failed; trying again", "pod", key, "err", err)
		q.AddRateLimited(key)
	default:
		klog.FromContext(ctx).Error(err, "Following the pod's port failed; giving up until its annotation changes again", "pod", key)
		q.Forget(key)
	}
	return true
}

func (s *Server) followKey(ctx context.Context, q workqueue.TypedInterface[string], key string) error {
	ifaces, err := s.cfg.OVS.Interfaces(ctx)
	if err != nil {
		return err
	}
	if key == allPlugged {
		s.enqueueStale(ctx, q, ifaces)
		return nil
	}
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil //nolint:nilerr // not a key this queue is given
	}
	pod, err := s.cfg.Pods.Get(namespace, name)
	if err != nil || pod == nil || pod.DeletionTimestamp != nil {
		return err // a pod gone or going: its DEL unplugs it
	}
	var errs []error
	found := false
	for _, iface := range ifaces {
		if pluggedFor(iface, pod) {
			found = true
			errs = append(errs, s.repoint(ctx, pod, iface))
		}
	}
	if !found && pod.Status.Phase == corev1.PodRunning {
		s.noInterface(ctx, pod)
	}
	return errors.Join(errs...)
}

// noInterface reports a running pod whose port changed and that has no interface on the bridge to follow it.
func (s *Server) noInterface(ctx context.Context, pod *corev1.Pod) {
	port := annotatedID(pod)
	klog.FromContext(ctx).Info("Warning: the pod's port changed, and the pod has no interface on the bridge", "reason", ReasonPortChangeFailed,
		"pod", klog.KObj(pod), "port", port)
	s.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, ReasonPortChangeFailed,
		"the pod's port changed to %s, but no interface of the pod is on the bridge of node %s (the ADD of another pod "+
			"given the pod's former port takes its interface over): the pod has no network; delete it to give it a new sandbox",
		port, s.cfg.Node)
}

// enqueueStale queues the pods whose interface carries another port than their annotation names.
func (s *Server) enqueueStale(ctx context.Context, q workqueue.TypedInterface[string], ifaces []ovs.Interface) {
	for _, iface := range ifaces {
		namespace, name, ok := strings.Cut(iface.ExternalIDs[ovs.KeyPod], "/")
		if !ok {
			continue
		}
		pod, err := s.cfg.Pods.Get(namespace, name)
		if err != nil || pod == nil || !pluggedFor(iface, pod) {
			continue
		}
		var port annotations.Port
		if ok, err := annotations.Decode(pod.Annotations, annotations.PodPort, &port); ok && err == nil && port.ID != iface.ExternalIDs[ovs.KeyIfaceID] {
			klog.FromContext(ctx).V(2).Info("The pod's interface carries another port than its annotation names",
				"pod", klog.KObj(pod), "interface", iface.Name, "pluggedPort", iface.ExternalIDs[ovs.KeyIfaceID], "port", port.ID)
			q.Add(namespace + "/" + name)
		}
	}
}

// pluggedFor says an ADD plugged the interface for this pod (this UID, not a former pod of its name).
func pluggedFor(iface ovs.Interface, pod *corev1.Pod) bool {
	ids := iface.ExternalIDs
	return ids[ovs.KeySandbox] != "" && ids[ovs.KeyPod] == pod.Namespace+"/"+pod.Name && ids[ovs.KeyIfaceIDVer] == string(pod.UID)
}

// change is one interface moving from the port it carries to the port the pod's annotation names.
type change struct {
	pod        *corev1.Pod
	iface      string
	from, to   string
	spec       plug.Spec
	before     plug.Observed
	plugged    map[string]string // the external_ids written, for WaitInstalled
	installing time.Time
}

// repoint points the interface at the port the pod's annotation names, if it carries another. An error is
// worth a retry; what waiting cannot mend is reported and returns nil.
func (s *Server) repoint(ctx context.Context, pod *corev1.Pod, iface ovs.Interface) error {
	ids := iface.ExternalIDs
	c := &change{pod: pod, iface: iface.Name, from: ids[ovs.KeyIfaceID]}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "interface", iface.Name, "formerPort", c.from))
	t, waitingFor, err := evaluate(pod, wire.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)}, s.cfg.Node)
	switch {
	case err != nil:
		c.to = annotatedID(pod)
		s.followFailed(ctx, c, err)
		return nil // a new annotation brings the pod back
	case waitingFor != "":
		klog.FromContext(ctx).V(2).Info("Waiting before following the pod's port", "for", waitingFor)
		return nil
	case t.port.ID == c.from:
		return nil
	}
	c.to = t.port.ID
	if c.spec, err = buildSpec(t, ids[ovs.KeyNetns], ids[ovs.KeyIfName]); err != nil {
		s.followFailed(ctx, c, err)
		return nil
	}
	c.spec.HostIfName = iface.Name
	done, err := s.repointLocked(ctx, c, ids[ovs.KeySandbox])
	if err != nil {
		s.followFailed(ctx, c, err)
		return err
	}
	if done {
		s.waitFollowed(ctx, c)
	}
	return nil
}

// repointLocked gives the pod end the new port's address and the interface its iface-id, under the
// interface's lock and the lock every plug of the new port takes; done is false when there was nothing to do
// (the interface was unplugged, taken over by another sandbox or pointed at the port meanwhile, or its namespace
// is gone). A new port another pod of the node holds is refused (a *portInUseError), and nothing is changed.
func (s *Server) repointLocked(ctx context.Context, c *change, sandbox string) (done bool, _ error) {
	unlock := s.locks.lockBoth(c.iface, HostIfName(c.to))
	defer unlock()
	cur, ok, err := s.cfg.OVS.Interface(ctx, c.iface)
	if err != nil || !ok || cur.ExternalIDs[ovs.KeySandbox] != sandbox || cur.ExternalIDs[ovs.KeyIfaceID] != c.from {
		return false, err
	}
	if err := s.inUse(ctx, c.to, string(c.pod.UID), c.iface); err != nil {
		return false, err
	}
	if c.before, err = s.cfg.Plumber.Inspect(ctx, c.spec.Netns, c.spec.IfName); err != nil {
		if plug.NamespaceGone(err) {
			klog.FromContext(ctx).V(1).Info("The sandbox's namespace is gone: its DEL or GC removes the interface", "netns", c.spec.Netns)
			return false, nil
		}
		return false, fmt.Errorf("reading %s in %s: %w", c.spec.IfName, c.spec.Netns, err)
	}
	if err := s.cfg.Plumber.Readdress(ctx, c.spec); err != nil {
		return false, fmt.Errorf("giving %s in %s MAC %s and IP %s: %w", c.spec.IfName, c.spec.Netns, c.spec.MAC, c.spec.Address, err)
	}
	// A new raven-plug, and no ovn-installed: what ovn-controller sets next is for the new port.
	c.plugged = map[string]string{ovs.KeyIfaceID: c.to, ovs.KeyPlug: rand.Text()}
	set := map[string]string{ovs.KeyAttachedMAC: c.spec.MAC.String()}
	for k, v := range c.plugged {
		set[k] = v
	}
	if err := s.cfg.OVS.SetExternalIDs(ctx, c.iface, set, ovs.KeyOVNInstalled); err != nil {
		return false, err
	}
	c.installing = time.Now()
	return true, nil
}

// waitFollowed waits for ovn-controller to install the new port on the interface, and says how it went.
func (s *Server) waitFollowed(ctx context.Context, c *change) {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	if err := s.cfg.OVS.WaitInstalled(wctx, c.iface, c.plugged); err != nil {
		s.followFailed(ctx, c, fmt.Errorf("the interface points at it, but ovn-controller did not set ovn-installed within %s: "+
			"is ovn-controller running on node %s, and is the port's logical switch port bound here? (%w)", s.cfg.ReadyTimeout, s.cfg.Node, err))
		return
	}
	was := addrs(c.before)
	same := bytes.Equal(c.before.MAC, c.spec.MAC) && was == c.spec.Address.String()
	klog.FromContext(ctx).Info("The pod's interface follows its new port", "port", c.to, "mac", c.spec.MAC, "ip", c.spec.Address,
		"formerMAC", c.before.MAC, "formerIP", was, "ovnInstalledAfter", time.Since(c.installing))
	if same {
		s.cfg.Recorder.Eventf(c.pod, corev1.EventTypeNormal, ReasonPortChanged,
			"the pod's port changed from %s to %s: interface %s points at it, with the same MAC %s and IP %s (ovn-installed after %s)",
			c.from, c.to, c.iface, c.spec.MAC, c.spec.Address, time.Since(c.installing).Round(time.Millisecond))
		return
	}
	s.cfg.Recorder.Eventf(c.pod, corev1.EventTypeNormal, ReasonPortChanged,
		"the pod's port changed from %s to %s: interface %s points at it, and %s has its MAC %s and IP %s (it had %s, %s); "+
			"status.podIP, which the kubelet set, still says the former IP until the pod is made again",
		c.from, c.to, c.iface, c.spec.IfName, c.spec.MAC, c.spec.Address, c.before.MAC, was)
}

// followFailed posts a Warning event on the pod and logs.
func (s *Server) followFailed(ctx context.Context, c *change, err error) {
	klog.FromContext(ctx).Info("Warning: the pod's interface cannot follow its new port", "reason", ReasonPortChangeFailed, "port", c.to, "err", err)
	s.cfg.Recorder.Eventf(c.pod, corev1.EventTypeWarning, ReasonPortChangeFailed,
		"the pod's port changed from %s to %s, but interface %s cannot follow: %v; the pod may answer nothing until it does",
		c.from, c.to, c.iface, err)
}

// annotatedID is the ID of the port the pod's annotation names, or "".
func annotatedID(pod *corev1.Pod) string {
	var port annotations.Port
	_, _ = annotations.Decode(pod.Annotations, annotations.PodPort, &port)
	return port.ID
}

func addrs(o plug.Observed) string {
	out := make([]string, 0, len(o.Addrs))
	for _, a := range o.Addrs {
		out = append(out, a.String())
	}
	return strings.Join(out, ",")
}
