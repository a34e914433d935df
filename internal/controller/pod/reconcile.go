package pod

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/metrics"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// Groups tells the security groups a pod's port must carry; waiting names those it must wait for (still
// being made, or their rules not in place yet).
type Groups interface {
	GroupsFor(ctx context.Context, c ctrl.Reader, pod *corev1.Pod, ip string, unisolated []string) (groups, refused, waiting []string, err error)
}

// errGroupsPending: a group the pod's policies need is still being made; the pod waits for it.
var errGroupsPending = errors.New("waiting for the security groups of the pod's NetworkPolicies")

// policyPatience is how long a pod waits quietly for the groups of its policies: the policy reconcile its
// creation brings makes them within seconds.
const policyPatience = 30 * time.Second

// Reconciler gives pods their ports.
type Reconciler struct {
	Client  ctrl.Client
	Neutron *neutron.Manager
	Gate    *controller.Gate
	// Parked, when set, holds the pods that wait for the start-up port listing until the resync sends them
	// back, once, when it is in (nil: they come back every second until then).
	Parked   *controller.Parked
	Recorder events.EventRecorder
	Metrics  *metrics.Metrics
	// Scope says which namespaces are served (nil: all).
	Scope *controller.Scope
	// Policies, when set, gives each port the security groups of the NetworkPolicies that concern its pod
	// before the pod is annotated (nil: the cluster's pod groups).
	Policies Groups
	// seen holds when this process first saw each pod still waiting for its port (for the latency metric).
	seen firstSeen
	// checks bounds the port checks raven-node asks for (annotations.PodPortCheck).
	checks portChecks
	// Grace protects a port this process did not make from deletion until it is this old: another writer
	// (an earlier leader) may have made it for a pod this cache does not show yet.
	Grace time.Duration
	// Backends, when set, keeps the port of a pod that must have none while its address is still a load
	// balancer member, for at most BackendHold.
	Backends Backends
	// Nested, when set, says which nodes are Nova VMs whose pods' ports go on their trunks (nil: none).
	Nested *NestedNodes
	held   heldPorts
}

// Reconcile makes Neutron and the pod's annotations match the pod as it is now.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := r.Gate.Wait(ctx); err != nil {
		return reconcile.Result{}, err
	}
	log := klog.FromContext(ctx)
	var pod corev1.Pod
	if err := r.Client.Get(ctx, req.NamespacedName, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return r.gone(ctx, req.Namespace)
		}
		return reconcile.Result{}, err
	}
	if !NeedsPort(&pod) {
		return r.releaseFinished(ctx, &pod)
	}

	var ns corev1.Namespace
	if err := r.Client.Get(ctx, types.NamespacedName{Name: pod.Namespace}, &ns); err != nil {
		return reconcile.Result{}, err
	}
	if why := r.Scope.Excluded(&ns); why != "" {
		return r.skipExcluded(ctx, &pod, why)
	}
	nn := r.Neutron.X.Network(string(ns.UID))
	if nn == nil || nn.Subnet == nil || !nn.Attached {
		// The namespace controller is still building the network; its annotation brings the pod back.
		log.V(3).Info("Waiting for the namespace network")
		return r.waitForNetwork(&pod, &ns), nil
	}
	if _, annotated := pod.Annotations[annotations.PodPort]; !annotated {
		r.seen.mark(string(pod.UID))
		if r.waitsForNode(&pod) {
			log.V(3).Info("Waiting for the pod to be scheduled")
			return reconcile.Result{}, nil
		}
	}
	before := announcedPort(&pod)
	port, nested, err := r.ensurePort(ctx, &pod, before, nn)
	if res, wait, err := r.portWait(log, &pod, err); wait {
		return res, err
	}
	hadPort := pod.Annotations[annotations.PodPort] != ""
	if err := r.patch(ctx, &pod, &port, nn, nested); err != nil {
		return reconcile.Result{}, err
	}
	r.reportPortChange(ctx, &pod, before, &port, nn, nested)
	if !hadPort {
		r.observeLatency(&pod)
	}
	return reconcile.Result{}, nil
}

// waitsForNode says a new pod gets no port before it is scheduled: with pools per node its port comes from
// its node's pool, and the binding (an update of spec.nodeName) brings the pod back.
func (r *Reconciler) waitsForNode(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && (r.Neutron.PoolsPerNode() || r.Nested != nil)
}

// portWait turns what keeps ensurePort from a port into the reconcile's result; wait is false when there is
// a port to go on with.
func (r *Reconciler) portWait(log klog.Logger, pod *corev1.Pod, err error) (res reconcile.Result, wait bool, _ error) {
	switch {
	case errors.Is(err, neutron.ErrNotLoaded):
		return r.untilLoaded(pod), true, nil // a pod in sync waits for the start-up listing
	case errors.Is(err, errGroupsPending):
		return r.waitForGroups(log, pod, err), true, nil
	case errors.Is(err, errCheckLater):
		log.V(3).Info("Waiting for the budget of port checks")
		return reconcile.Result{RequeueAfter: time.Second / checkRate}, true, nil
	case err != nil:
		return reconcile.Result{}, true, err
	}
	return reconcile.Result{}, false, nil
}

// ensurePort finds or creates the pod's port (preferring announced, the one its annotation names) and, when it
// created one, releases the ports of earlier pods of the same name. On a nested node the port goes on the node
// VM's trunk, and nested says where.
func (r *Reconciler) ensurePort(ctx context.Context, pod *corev1.Pod, announced annotations.Port, nn *neutron.NamespaceNet) (_ neutron.Port, nested *annotations.Nested, _ error) {
	port, vm, err := r.ensureOwnPort(ctx, pod, announced, nn)
	if err != nil || vm == nil {
		return port, nil, err
	}
	// A port made again for a running pod keeps the VLAN of its former one: the pod's interface on the node
	// carries that VLAN, and raven-node on a nested node does not re-plug a running pod.
	keep := 0
	if announced.Nested != nil && announced.Nested.Node == vm.Name {
		keep = announced.Nested.VLAN
	}
	sub, err := r.Neutron.AttachAt(ctx, *vm, port.ID, keep)
	if err != nil {
		r.warn(pod, "SubportAttach", "adding the pod's port to its node VM's trunk", err)
		return port, nil, err
	}
	return port, &annotations.Nested{Node: vm.Name, VLAN: sub.VLAN, TrunkID: sub.TrunkID, ParentPortID: sub.ParentPortID}, nil
}

// ensureOwnPort is ensurePort up to the trunk: the port itself, and the pod's node when it is a nested one.
func (r *Reconciler) ensureOwnPort(ctx context.Context, pod *corev1.Pod, announced annotations.Port, nn *neutron.NamespaceNet) (neutron.Port, *neutron.VMNode, error) {
	log := klog.FromContext(ctx)
	if err := r.checkRequested(ctx, pod, announced, nn); err != nil {
		return neutron.Port{}, nil, err
	}
	vm, err := r.Nested.vm(ctx, r.Client, pod.Spec.NodeName)
	if err != nil {
		return neutron.Port{}, nil, err
	}
	ref := neutron.PodRef{UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName,
		Keep: keepAddress(announced), VM: vm}
	if _, annotated := pod.Annotations[annotations.PodPort]; r.Policies != nil && (!annotated || r.portGone(pod, announced.ID, nn)) {
		// A new pod's port gets its policies' groups before the annotation lets the CNI plug it, and so does
		// the port made for a running pod whose port is gone; later changes of an annotated pod's groups are
		// the policy controller's.
		groups, refused, waiting, err := r.Policies.GroupsFor(ctx, r.Client, pod, "", r.Neutron.C.PodSecurityGroups)
		if err != nil {
			return neutron.Port{}, nil, err
		}
		if len(waiting) > 0 {
			return neutron.Port{}, nil, fmt.Errorf("%w: %s", errGroupsPending, strings.Join(waiting, ", "))
		}
		ref.SecurityGroups = groups
		if len(refused) > 0 {
			// Fail closed: the pod runs with the groups that exist, admitting less than its policies say.
			err := fmt.Errorf("security groups %s could not be made; the pod admits only what its other groups admit until they are", strings.Join(refused, ", "))
			log.Info("Warning", "reason", "PolicyGroupsMissing", "missing", refused)
			controller.Warn(r.Recorder, pod, "PolicyGroupsMissing", "Reconcile", "isolating the pod", err)
		}
	}
	port, created, err := r.Neutron.EnsurePort(ctx, ref, nn, announced.ID)
	if errors.Is(err, neutron.ErrNotLoaded) {
		return port, vm, err // not a failure: the caller sends the pod back until the listing is in
	}
	if err != nil {
		r.warn(pod, "PortCreate", "creating the Neutron port", err)
		return port, vm, err
	}
	if created {
		// New to this pod: created for it, or taken from a pool.
		log.V(2).Info("Gave the pod a port", "port", port.ID, "ip", firstIP(port.FixedIPs), "node", pod.Spec.NodeName)
		// A pod deleted and created again under the same name: the old one's port goes now, not at the sweep.
		if err := r.releaseNamesake(ctx, pod, nn); err != nil {
			log.Error(err, "Releasing the port of an earlier pod of the same name; the resync will retry")
		}
	}
	return port, vm, nil
}

// releaseFinished deletes the port of a pod that needs none (finished, or on the host network) and
// removes its annotations once the port they name is released.
func (r *Reconciler) releaseFinished(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	if res, wait, err := r.release(ctx, pod, "deleting the port of a finished pod"); wait {
		return res, err
	}
	return reconcile.Result{}, r.patch(ctx, pod, nil, nil, nil)
}

// skipExcluded releases the port of a pod whose namespace is excluded, says why on the pod and removes
// its annotations once the port they name is released.
func (r *Reconciler) skipExcluded(ctx context.Context, pod *corev1.Pod, why string) (reconcile.Result, error) {
	if res, wait, err := r.release(ctx, pod, "deleting the port of a pod of an excluded namespace"); wait {
		return res, err
	}
	controller.Warn(r.Recorder, pod, "NamespaceExcluded", "Skip", "giving the pod a Neutron port", errors.New(why+"; the pod gets no port"))
	return reconcile.Result{}, r.patch(ctx, pod, nil, nil, nil)
}

// untilLoaded is the result for a pod that waits for the start-up port listing: parked, it comes back once,
// when the listing is in. At 50,000 pods that listing takes minutes, and every pod coming back each second
// kept the leader's CPU busy through a cold start.
func (r *Reconciler) untilLoaded(pod *corev1.Pod) reconcile.Result {
	if r.Parked != nil && r.Parked.Park(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}) {
		return reconcile.Result{}
	}
	return reconcile.Result{RequeueAfter: time.Second}
}

// release gives back every port of a pod that must have none. wait is true until the port the pod's annotation
// names is no longer the pod's in Neutron (deleted, back in a pool, or gone already): the annotation is the
// pod's last record of its port, and goes only after it, so that no restart loses track of the port.
func (r *Reconciler) release(ctx context.Context, pod *corev1.Pod, what string) (res reconcile.Result, wait bool, _ error) {
	log := klog.FromContext(ctx)
	if !r.Neutron.X.PortsLoaded() {
		// The index does not hold the pod's ports before the start-up listing: releasing by it would miss them.
		log.V(3).Info("Waiting for the port listing before releasing the pod's port")
		return r.untilLoaded(pod), true, nil
	}
	uid := string(pod.UID)
	announced := announcedPort(pod)
	if err := r.loadAnnounced(ctx, announced.ID); err != nil {
		r.warn(pod, "PortDelete", what, err)
		return reconcile.Result{}, true, err
	}
	if r.holding(ctx, uid) {
		return reconcile.Result{RequeueAfter: holdPoll}, true, nil
	}
	n, err := r.Neutron.ReleasePorts(ctx, uid)
	if err != nil {
		r.warn(pod, "PortDelete", what, err)
		return reconcile.Result{}, true, err
	}
	if n > 0 {
		log.V(2).Info("Released the pod's port", "ports", n)
	}
	if announced.ID != "" && r.Neutron.X.OwnedBy(announced.ID, uid) {
		log.V(3).Info("Waiting for another worker to release the pod's port", "port", announced.ID)
		return reconcile.Result{RequeueAfter: time.Second}, true, nil
	}
	return reconcile.Result{}, false, nil
}

// loadAnnounced puts the port a pod's annotation names into the index when the index does not know it (a port
// another leader made or claimed after this process listed Neutron), so that its release does not miss it.
func (r *Reconciler) loadAnnounced(ctx context.Context, id string) error {
	if id == "" || r.Neutron.X.Known(id) {
		return nil
	}
	p, err := r.Neutron.N.GetPort(ctx, id)
	switch {
	case openstack.IsNotFound(err):
		return nil // gone already
	case err != nil:
		return fmt.Errorf("reading port %s: %w", id, err)
	}
	if ownership.Owns(r.Neutron.C.ID, p.Tags) {
		r.Neutron.X.PutPort(r.Neutron.C.ID, *p)
	}
	return nil
}

// waitForNetwork brings the pod back while its namespace network is being built, and warns on the pod once
// that takes longer than a network takes to build.
func (r *Reconciler) waitForNetwork(pod *corev1.Pod, ns *corev1.Namespace) reconcile.Result {
	waiting := ns.CreationTimestamp.Time // the pod waits since the later of its and its namespace's creation
	if pod.CreationTimestamp.After(waiting) {
		waiting = pod.CreationTimestamp.Time
	}
	if time.Since(waiting) < networkPatience {
		return reconcile.Result{RequeueAfter: 2 * time.Second}
	}
	// Longer than a network takes to build: say so on the pod, where its owner looks first.
	r.warn(pod, "NamespaceNetworkMissing", "waiting for the namespace network",
		fmt.Errorf("namespace %s has no Neutron network yet; its Warning events say why", ns.Name))
	return reconcile.Result{RequeueAfter: 10 * time.Second}
}

// waitForGroups brings back a pod that waits for the groups of its policies (err names them): quietly at first,
// then, once it has waited longer than the policy reconcile takes to make them, with a Warning on the pod
// that says which groups hold it, less often.
func (r *Reconciler) waitForGroups(log klog.Logger, pod *corev1.Pod, err error) reconcile.Result {
	if time.Since(pod.CreationTimestamp.Time) < policyPatience {
		log.V(3).Info("Waiting for the pod's policy groups", "err", err.Error())
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}
	}
	log.Info("Warning", "reason", "PolicyGroupsPending", "err", err.Error())
	controller.Warn(r.Recorder, pod, "PolicyGroupsPending", "Reconcile", "giving the pod its port",
		fmt.Errorf("%w; the NetworkPolicy controller makes them and puts their rules in place, and its Warning events on the policies say what holds them", err))
	return reconcile.Result{RequeueAfter: 2 * time.Second}
}

// observeLatency records how long the pod waited for its first port annotation.
func (r *Reconciler) observeLatency(pod *corev1.Pod) {
	if r.Metrics == nil {
		return
	}
	if since, ok := r.seen.done(string(pod.UID)); ok {
		r.Metrics.PodPortLatency.Observe(time.Since(since).Seconds())
	}
}

// patch writes the port and subnet annotations (or removes them when port is nil), only if they differ, and
// removes raven-node's check request.
func (r *Reconciler) patch(ctx context.Context, pod *corev1.Pod, port *neutron.Port, nn *neutron.NamespaceNet, nested *annotations.Nested) error {
	var want map[string]*string
	var err error
	switch {
	case port == nil:
		want, err = Annotations(nil, nil, nil)
	case port.ID == "":
		return fmt.Errorf("refusing to announce a port without an ID for pod %s/%s", pod.Namespace, pod.Name)
	default:
		want, err = Annotations(port, nn, nested)
	}
	if err != nil {
		return err
	}
	if _, asked := pod.Annotations[annotations.PodPortCheck]; asked {
		want[annotations.PodPortCheck] = nil // answered: the port the annotation names is in Neutron now
	}
	changes := annotations.Changes(pod.Annotations, want)
	if len(changes) == 0 {
		return nil
	}
	body, err := annotations.MergePatch(changes)
	if err != nil {
		return err
	}
	err = r.Client.Patch(ctx, pod, ctrl.RawPatch(types.MergePatchType, body), ctrl.FieldOwner(annotations.FieldManager))
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile: its delete event releases the port
	}
	if err != nil {
		return fmt.Errorf("annotating pod: %w", err)
	}
	if port != nil {
		klog.FromContext(ctx).V(2).Info("Annotated pod", "port", port.ID, "ip", firstIP(port.FixedIPs))
	}
	return nil
}

// gone releases the ports of the namespace's pods that no longer exist, and comes back while one is held.
func (r *Reconciler) gone(ctx context.Context, namespace string) (reconcile.Result, error) {
	held, err := r.releaseGone(ctx, namespace)
	if held && err == nil {
		return reconcile.Result{RequeueAfter: holdPoll}, nil
	}
	return reconcile.Result{}, err
}

// releaseGone deletes the ports of the namespace's pods that no longer exist. The cache is the truth
// here: Raven only ever creates a port for a pod it has seen in the cache. held is true when a port waits
// for its address to leave a load balancer (see holding).
func (r *Reconciler) releaseGone(ctx context.Context, namespace string) (held bool, _ error) {
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err != nil {
		// Without the namespace there is no network to look at; its teardown removes everything.
		return false, ctrl.IgnoreNotFound(err)
	}
	nn := r.Neutron.X.Network(string(ns.UID))
	if nn == nil {
		return false, nil
	}
	var errs []error
	for _, p := range r.Neutron.X.PortsOn(nn.Network.ID) {
		o, _ := ownership.Parse(p.Tags)
		if o.Kind != ownership.KindPod || !r.Neutron.X.Written(p.ID) && time.Since(later(p.CreatedAt, p.UpdatedAt)) < r.Grace {
			continue // not this process's, and young: the sweep decides after the grace period
		}
		live, err := r.podExists(ctx, o)
		if err != nil || live {
			errs = append(errs, err)
			continue
		}
		if r.holding(ctx, o.UID) {
			held = true
			continue
		}
		n, err := r.Neutron.ReleasePorts(ctx, o.UID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n > 0 { // 0: another worker had it in hand
			klog.FromContext(ctx).V(2).Info("Released port of deleted pod", "port", p.ID, "podUID", o.UID)
		}
	}
	return held, errors.Join(errs...)
}

// releaseNamesake releases the ports of earlier pods that had this pod's name: pod names are unique, so
// such a pod is gone even if its delete event has not been handled yet.
func (r *Reconciler) releaseNamesake(ctx context.Context, pod *corev1.Pod, nn *neutron.NamespaceNet) error {
	name := pod.Namespace + "/" + pod.Name
	var errs []error
	for _, p := range r.Neutron.X.PortsOn(nn.Network.ID) {
		o, _ := ownership.Parse(p.Tags)
		if o.Kind != ownership.KindPod || o.Name != name || o.UID == string(pod.UID) {
			continue
		}
		if live, err := r.podExists(ctx, o); err != nil || live {
			errs = append(errs, err)
			continue
		}
		if _, err := r.Neutron.ReleasePorts(ctx, o.UID); err != nil {
			errs = append(errs, err)
			continue
		}
		klog.FromContext(ctx).V(2).Info("Released the port of an earlier pod of the same name", "port", p.ID, "podUID", o.UID)
	}
	return errors.Join(errs...)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// podExists says the cache holds the pod of a port's owner. The owner's name finds it without an index by UID (an
// index entry per pod cost about 1 KiB each); the UID decides. When the name finds no pod of that UID (a name the
// tag cut short, or a tag that lies), the owner's namespace is read whole before the pod is called gone.
func (r *Reconciler) podExists(ctx context.Context, o ownership.Owner) (bool, error) {
	namespace, name, ok := strings.Cut(o.Name, "/")
	if ok && name != "" {
		var pod corev1.Pod
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &pod)
		switch {
		case err == nil && string(pod.UID) == o.UID:
			return true, nil
		case err != nil && !apierrors.IsNotFound(err):
			return false, err
		}
	}
	var pods corev1.PodList
	opts := []ctrl.ListOption{ctrl.UnsafeDisableDeepCopy} // read only
	if ok {
		opts = append(opts, ctrl.InNamespace(namespace))
	}
	if err := r.Client.List(ctx, &pods, opts...); err != nil {
		return false, err
	}
	return slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return string(p.UID) == o.UID }), nil
}

// networkPatience is how long a pod waits quietly for its namespace's network.
const networkPatience = 30 * time.Second

func (r *Reconciler) warn(pod *corev1.Pod, action, what string, err error) {
	controller.Warn(r.Recorder, pod, controller.Reason(action, err), action, what, err)
}

func firstIP(ips []neutron.FixedIP) string {
	if len(ips) == 0 {
		return ""
	}
	return ips[0].IPAddress
}

// firstSeen records when pods were first seen without a port. Entries leave when the pod is annotated;
// those of pods deleted before that are dropped after an hour.
type firstSeen struct {
	mu    sync.Mutex
	at    map[string]time.Time
	marks int
}

func (f *firstSeen) mark(uid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = map[string]time.Time{}
	}
	if _, ok := f.at[uid]; ok {
		return
	}
	now := time.Now()
	f.at[uid] = now
	if f.marks++; f.marks%1024 == 0 {
		for k, t := range f.at {
			if now.Sub(t) > time.Hour {
				delete(f.at, k)
			}
		}
	}
}

// done forgets the pod and says when it was first seen; ok is false for a pod this process never saw waiting.
func (f *firstSeen) done(uid string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.at[uid]
	delete(f.at, uid)
	return t, ok
}
