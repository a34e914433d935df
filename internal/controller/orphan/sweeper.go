package orphan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/controller/pod"
	"github.com/raven-net/raven/internal/metrics"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// Sweeper is a leader-only runnable.
type Sweeper struct {
	Client  client.Reader
	Neutron *neutron.Manager
	Options config.Options
	// WithServices asks for the service network.
	WithServices bool
	// Gate opens once every port is listed; PodGate (when set) as soon as the namespace networks are: the pod
	// reconciler serves new pods while the ports are listed (a pod that announces a port, and every release,
	// waits for the listing; see neutron.ErrNotLoaded), so that a new leader writes within seconds of taking
	// the lease, whatever the number of ports.
	Gate    *controller.Gate
	PodGate *controller.Gate
	// ServiceGate (when set) opens once the Service ports are listed, before the others: the Service reconciler
	// finds a Service's VIP port in the index or asks Neutron for it, and deletes only what it found, so it
	// needs no other port; at a cold start it then reads Octavia while the pods' ports are listed.
	ServiceGate *controller.Gate
	// Parked holds the pods that wait for the port listing; they go to PodRepairs once it is in (nil: none).
	Parked  *controller.Parked
	Metrics *metrics.Metrics
	// PodRepairs and NamespaceRepairs take objects whose OpenStack side must be rebuilt.
	PodRepairs       chan<- event.GenericEvent
	NamespaceRepairs chan<- event.GenericEvent
	// Extra runs after each resync with the same clock (the service sweep hooks in here).
	Extra []func(ctx context.Context, now time.Time) error
	// CacheSynced blocks until the informer caches are filled.
	CacheSynced func(ctx context.Context) bool
	// APIReader reads pods past the cache: the sweep asks it whether a port's owner is really gone before
	// releasing the port (nil: the cache is trusted).
	APIReader client.Reader
	// Backends, when set, keeps a gone pod's port while its address is still a load balancer member: the pod
	// controller releases it once it is not, or after pod.BackendHold.
	Backends pod.Backends
	// Pods, when set, calls fn with every pod of the cache: the cache's own objects, which fn must not change,
	// without a list of copies (nil: the pods are listed from Client). At 50,000 pods, the listed copies were
	// about 120 MB of the leader's heap at each resync.
	Pods func(ctx context.Context, fn func(*corev1.Pod)) error

	// auditedAt is the resync clock's time of the last listing of every port (zero: none yet).
	auditedAt time.Time
}

// listsPorts says whether a resync at now lists every port of the cluster: the first does, and then one once
// portAuditPeriod has passed since the last (every one when it is 0). The others list the namespace networks, their
// subnets and the router's interfaces, so that their calls grow with namespaces, not pods: Raven's own writes
// keep its view of the ports, and raven-node reports a running pod's port deleted out of band within seconds.
func (s *Sweeper) listsPorts(now time.Time) bool {
	audit := s.Options.PortAuditPeriod.Duration
	return audit <= 0 || s.auditedAt.IsZero() || now.Sub(s.auditedAt) >= audit
}

// audited records a listing of every port, applied to the index at now.
func (s *Sweeper) audited(now time.Time) {
	s.auditedAt = now
	s.countPortListing()
}

// countPortListing counts a listing of every port applied to the index.
func (s *Sweeper) countPortListing() {
	if s.Metrics != nil {
		s.Metrics.PortListings.Inc()
	}
}

// eachPod calls fn with every pod of the cache, read only.
func (s *Sweeper) eachPod(ctx context.Context, fn func(*corev1.Pod)) error {
	if s.Pods != nil {
		return s.Pods(ctx, fn)
	}
	return EachListedPod(ctx, s.Client, fn)
}

// EachListedPod calls fn with every pod c lists, without the deep copy a cached List makes: fn reads only.
func EachListedPod(ctx context.Context, c client.Reader, fn func(*corev1.Pod)) error {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	for i := range pods.Items {
		fn(&pods.Items[i])
	}
	return nil
}

// annotatedPorts are the ports the annotations of pods that have not finished name, by port ID, with their pods
// as owners.
func (s *Sweeper) annotatedPorts(ctx context.Context) (map[string]neutron.Annotation, error) {
	out := map[string]neutron.Annotation{}
	err := s.eachPod(ctx, func(p *corev1.Pod) {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return // a finished pod's port may be back in the pool (pools.recycle)
		}
		var port annotations.Port
		if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &port); !ok || err != nil || port.ID == "" {
			return
		}
		owner := ownership.Owner{Cluster: s.Options.ClusterID, Kind: ownership.KindPod, UID: string(p.UID), Name: p.Namespace + "/" + p.Name}
		out[port.ID] = neutron.Annotation{Owner: owner, Name: p.Name}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sendParked sends the pods parked while the ports were listed back to their reconciler, each once. false:
// the context ended.
func (s *Sweeper) sendParked(ctx context.Context) bool {
	if s.Parked == nil {
		return true
	}
	keys := s.Parked.Release()
	if s.PodRepairs == nil {
		return true
	}
	for _, k := range keys {
		if !controller.Send(ctx, s.PodRepairs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}) {
			return false
		}
	}
	return true
}

// NeedLeaderElection returns true: only the leader writes.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Start ensures the cluster objects, loads the index, opens the gates and then resyncs periodically.
func (s *Sweeper) Start(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("resync")
	ctx = klog.NewContext(ctx, log)
	if s.CacheSynced != nil && !s.CacheSynced(ctx) {
		return ctx.Err()
	}
	if !s.load(ctx) {
		return nil // context ended
	}
	log.Info("Neutron view loaded; ready for new work", "networks", len(s.Neutron.X.Networks()), "ports", s.Neutron.X.CountOfKind(ownership.KindPod))
	s.Gate.Open()
	if s.Metrics != nil {
		s.Metrics.Writing.Set(1)
	}
	if !s.sendParked(ctx) {
		return nil // context ended
	}
	// The first sweep runs right away: a pod deleted while Raven was stopped loses its port now.
	first := true
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		err := s.Resync(ctx, time.Now(), !first)
		if err != nil {
			log.Error(err, "Resync failed; will retry at the next period")
		}
		if s.Metrics != nil {
			result := "ok"
			if err != nil {
				result = "error"
			}
			s.Metrics.Resyncs.WithLabelValues(result).Inc()
		}
		first = false
	}, s.Options.ResyncPeriod.Duration)
	return nil
}

// load ensures the cluster objects and loads the index, opening the pods' gate, then the Services', on the way;
// each step is tried until it passes. It is false when ctx ended.
func (s *Sweeper) load(ctx context.Context) bool {
	log := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}
	// First the cluster objects and the namespace networks (a few calls).
	if err := wait.ExponentialBackoffWithContext(ctx, backoff, s.loadNetworks); err != nil {
		return false
	}
	log.Info("Cluster's Neutron objects ready", "router", s.Neutron.C.RouterID, "subnetPool", s.Neutron.C.SubnetPoolID,
		"networks", len(s.Neutron.X.Networks()), "tagsOnPortCreate", s.Neutron.C.Caps.TagsOnPortCreate)
	if s.PodGate != nil {
		s.PodGate.Open()
	}
	if s.ServiceGate != nil {
		if err := wait.ExponentialBackoffWithContext(ctx, backoff, s.loadServicePorts); err != nil {
			return false
		}
		s.ServiceGate.Open()
	}
	// Then every port, before the gate opens: the namespace and NetworkPolicy reconcilers delete by the index, and
	// one that found nothing there would let a port out of sight. The pod reconciler checks for itself
	// (neutron.Index.PortsLoaded).
	if err := wait.ExponentialBackoffWithContext(ctx, backoff, s.loadPorts); err != nil {
		return false
	}
	if p := s.Neutron.P; p != nil {
		p.Start(ctx, 4)
		p.Offer(s.Neutron.X.Claims())
	}
	return true
}

// loadNetworks ensures the cluster's Neutron objects and lists the namespace networks into the index; false
// (and a log line) when Neutron failed, to be tried again.
func (s *Sweeper) loadNetworks(ctx context.Context) (bool, error) {
	log := klog.FromContext(ctx)
	c, err := neutron.EnsureCluster(ctx, s.Neutron.N, s.Options.ClusterID, s.Options.Neutron, s.WithServices)
	if err != nil {
		log.Error(err, "Ensuring the cluster's Neutron objects; will retry")
		return false, nil
	}
	*s.Neutron.C = *c
	snap, err := neutron.ListNamespaceNetworks(ctx, s.Neutron.N, s.Neutron.C)
	if err != nil {
		log.Error(err, "Loading the cluster's Neutron networks; will retry")
		return false, nil
	}
	if snap.AttachedSubnets, err = s.annotatedSubnets(ctx); err != nil {
		log.Error(err, "Reading the namespaces' network annotations; will retry")
		return false, nil
	}
	s.Neutron.X.Replace(s.Options.ClusterID, snap)
	return true, nil
}

// annotatedSubnets are the subnets that namespaces' annotations put on the cluster router: the namespace
// reconciler writes them once the router has an interface on the subnet. A new leader trusts them until the
// router's interfaces are listed with the ports (one per namespace: at 6,667 namespaces, seconds that the
// first pods would wait).
func (s *Sweeper) annotatedSubnets(ctx context.Context) (map[string]bool, error) {
	var nss corev1.NamespaceList
	if err := s.Client.List(ctx, &nss); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for i := range nss.Items {
		var net annotations.Network
		var sub annotations.Subnet
		a := nss.Items[i].Annotations
		if ok, err := annotations.Decode(a, annotations.NamespaceNetwork, &net); !ok || err != nil || net.RouterID != s.Neutron.C.RouterID {
			continue
		}
		if ok, err := annotations.Decode(a, annotations.NamespaceSubnet, &sub); ok && err == nil && sub.ID != "" {
			out[sub.ID] = true
		}
	}
	return out, nil
}

// loadServicePorts lists the cluster's Service ports into the index; false (and a log line) when Neutron failed,
// to be tried again.
func (s *Sweeper) loadServicePorts(ctx context.Context) (bool, error) {
	started, ports, err := neutron.ListKind(ctx, s.Neutron.N, s.Neutron.C, ownership.KindService)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Loading the cluster's Service ports; will retry")
		return false, nil
	}
	s.Neutron.X.AddListed(s.Options.ClusterID, started, ports)
	klog.FromContext(ctx).Info("Service ports loaded; Services are served while the other ports are listed", "ports", len(ports))
	return true, nil
}

// loadPorts lists every port of the cluster into the index; false (and a log line) when Neutron failed, to be
// tried again.
func (s *Sweeper) loadPorts(ctx context.Context) (bool, error) {
	log := klog.FromContext(ctx)
	if _, err := s.Neutron.AdoptMarked(ctx); err != nil {
		log.Error(err, "Tagging ports that lost their tags; will retry")
		return false, nil
	}
	snap, err := neutron.List(ctx, s.Neutron.N, s.Neutron.C)
	if err != nil {
		log.Error(err, "Loading the cluster's Neutron ports; will retry")
		return false, nil
	}
	// Pool ports claimed in memory only, whose tags the last run never wrote, are their pods' by the
	// pods' annotations: they must not go back to the pool.
	if snap.Annotated, err = s.annotatedPorts(ctx); err != nil {
		log.Error(err, "Reading the pods' port annotations; will retry")
		return false, nil
	}
	s.Neutron.X.Replace(s.Options.ClusterID, snap)
	// auditedAt stays zero: the first periodic resync lists every port again, and so finds a port whose create
	// the previous leader sent before it stopped and Neutron finished after this listing.
	s.countPortListing()
	return true, nil
}

// Resync refreshes the index from Neutron (unless reload is false), repairs and sweeps. The ports are listed
// only when listsPorts says so; the namespace networks every time.
func (s *Sweeper) Resync(ctx context.Context, now time.Time, reload bool) error {
	if reload {
		if err := s.reload(ctx, now); err != nil {
			return err
		}
		if p := s.Neutron.P; p != nil {
			// Claims Neutron records whose tags never followed: offered again on every resync.
			p.Offer(s.Neutron.X.Claims())
			p.Tend(ctx, s.Neutron.X.Networks(), now)
		}
	}
	errs := []error{s.sweepPods(ctx, now), s.sweepNamespaces(ctx, now)}
	for _, f := range s.Extra {
		errs = append(errs, f(ctx, now))
	}
	return errors.Join(errs...)
}

// reload lists the namespace networks, and every port when listsPorts says so, into the index.
func (s *Sweeper) reload(ctx context.Context, now time.Time) error {
	log := klog.FromContext(ctx)
	if !s.listsPorts(now) {
		snap, err := neutron.ListNetworks(ctx, s.Neutron.N, s.Neutron.C)
		if err != nil {
			return err
		}
		s.Neutron.X.Replace(s.Options.ClusterID, snap)
		return nil
	}
	if _, err := s.Neutron.AdoptMarked(ctx); err != nil {
		return err
	}
	snap, err := s.Neutron.Relist(ctx)
	if err != nil {
		return err
	}
	if snap.Yields > 0 {
		log.V(1).Info("The resync's port listing let pod port creates go first",
			"pages", snap.Yields, "waited", snap.Yielded.Round(time.Millisecond))
	}
	log.V(1).Info("Listed every port", "ports", len(snap.Ports))
	s.Neutron.X.Replace(s.Options.ClusterID, snap)
	s.audited(now)
	return nil
}

// old says an object last created or changed at since has outlived the grace period.
func (s *Sweeper) old(since, now time.Time) bool {
	return now.Sub(since) >= s.Options.OrphanGracePeriod.Duration
}

// sweepPods releases the ports of pods that are gone. A port's age counts from its creation or its last update
// (a pool port's claim, neutron.Owned.Last), as the pod reconciler's release of a deleted pod's ports does.
func (s *Sweeper) sweepPods(ctx context.Context, now time.Time) error {
	// The ports are read before the pods: a pod is in the cache before this process gives it a port, so every
	// owner of a port read here that this process served is in the pod list below if it still exists. A port
	// another leader gave (a pool port, or a recycled one, whose creation time says nothing of when it was
	// taken) is aged from its last update, and its owner's absence is confirmed past the cache.
	candidates := s.Neutron.X.OwnedOfKind(ownership.KindPod)
	live, held, err := s.repairPods(ctx, len(candidates))
	if err != nil {
		return err
	}
	kept := heldOwners(candidates, held)
	// Deletes run a few at a time: a deleted namespace can leave hundreds of ports behind.
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 4)
	)
	for _, c := range candidates {
		if live[c.Owner.UID] || !s.old(c.Last, now) {
			continue
		}
		if holder, ok := kept[c.Owner.UID]; ok {
			klog.FromContext(ctx).V(1).Info("Kept a port whose owner is gone: a live pod's annotation names it",
				"port", c.ID, "owner", c.Owner.Name, "podUID", c.Owner.UID, "holder", holder)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.releaseOrphan(ctx, c); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// portID is what the resync reads of a pod's port annotation: decoding the whole port for each pod made
// garbage of every other field.
type portID struct {
	ID string `json:"id"`
}

// repairPods sends back to their reconciler the pods whose ports are not as they should be, and returns the
// UIDs of the pods that exist and the ports the annotations of those that need one name (with the pods' names).
// The keys and names are the cached pods' own strings.
// The maps are made for about as many pods as there are pod ports (hint), so that they do not grow step by step.
func (s *Sweeper) repairPods(ctx context.Context, hint int) (live map[string]bool, held map[string]types.NamespacedName, _ error) {
	live, held = make(map[string]bool, hint), make(map[string]types.NamespacedName, hint)
	var repairs []client.Object
	err := s.eachPod(ctx, func(p *corev1.Pod) {
		live[string(p.UID)] = true
		var ann portID
		annotated, _ := annotations.Decode(p.Annotations, annotations.PodPort, &ann)
		if annotated && ann.ID != "" && pod.NeedsPort(p) {
			held[ann.ID] = types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		}
		if n, has := s.Neutron.X.Owns(string(p.UID), ann.ID); needsRepair(p, annotated, has, n) {
			// The pod's key, not the cache's object.
			repairs = append(repairs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}})
		}
	})
	if err != nil {
		return nil, nil, err
	}
	for _, key := range repairs {
		if !controller.Send(ctx, s.PodRepairs, key) {
			return nil, nil, ctx.Err()
		}
	}
	return live, held, nil
}

// needsRepair says the pod's reconciler must look at the pod again: its annotated port is gone from Neutron
// (deleted out of band), it has two ports (a create that finished after a crashed Raven's successor listed), or
// it needs no port and still has one or an annotation (a release that never happened or never finished).
// hasAnnounced says the pod has the port its annotation names; ports is how many it has.
func needsRepair(p *corev1.Pod, annotated, hasAnnounced bool, ports int) bool {
	if !pod.NeedsPort(p) {
		return annotated || ports > 0
	}
	return annotated && !hasAnnounced || ports > 1
}

// heldOwners returns the owners of the ports that a live pod's annotation names, with that pod: their ports stay
// whoever their tags say owns them.
func heldOwners(ports []neutron.Owned, held map[string]types.NamespacedName) map[string]types.NamespacedName {
	out := map[string]types.NamespacedName{}
	for _, p := range ports {
		if holder, ok := held[p.ID]; ok {
			out[p.Owner.UID] = holder
		}
	}
	return out
}

// releaseOrphan releases the ports of the port's owner, once the API server confirms that the owner is gone.
func (s *Sweeper) releaseOrphan(ctx context.Context, c neutron.Owned) error {
	log := klog.FromContext(ctx)
	o := c.Owner
	gone, err := s.ownerGone(ctx, o)
	if err != nil {
		return err
	}
	if !gone {
		log.V(1).Info("Kept the port of a pod the cache does not show yet", "port", c.ID, "owner", o.Name, "podUID", o.UID)
		return nil
	}
	if port, ok := s.Neutron.X.Port(c.ID); ok && s.member(port) {
		log.V(2).Info("Kept the port of a gone pod while its address is a load balancer member", "port", c.ID, "owner", o.Name, "podUID", o.UID)
		return nil
	}
	n, err := s.Neutron.ReleasePorts(ctx, o.UID)
	if err != nil {
		return err
	}
	if n > 0 { // 0: another worker had it in hand
		log.Info("Released orphan port", "port", c.ID, "owner", o.Name, "podUID", o.UID)
		s.swept("port")
	}
	return nil
}

// member says whether an address of the port is still a load balancer member.
func (s *Sweeper) member(port neutron.Port) bool {
	if s.Backends == nil {
		return false
	}
	for _, ip := range port.FixedIPs {
		if s.Backends.Holds(ip.IPAddress) {
			return true
		}
	}
	return false
}

// ownerGone asks the API server, past the cache, whether the pod that owns a port is gone: a pod that another
// leader gave a port may not be in this cache yet, whatever the port's timestamps say. The owner's name in the
// tags is only a hint; its UID decides.
func (s *Sweeper) ownerGone(ctx context.Context, o ownership.Owner) (bool, error) {
	ns, name, ok := strings.Cut(o.Name, "/")
	if s.APIReader == nil || !ok {
		return true, nil // no reader, or no name to read by: the cache decides
	}
	var p corev1.Pod
	err := s.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &p)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading pod %s before releasing its port: %w", o.Name, err)
	}
	return string(p.UID) != o.UID, nil
}

func (s *Sweeper) sweepNamespaces(ctx context.Context, now time.Time) error {
	log := klog.FromContext(ctx)
	var nss corev1.NamespaceList
	if err := s.Client.List(ctx, &nss); err != nil {
		return err
	}
	live := make(map[string]bool, len(nss.Items))
	for i := range nss.Items {
		ns := &nss.Items[i]
		live[string(ns.UID)] = true
		if _, annotated := ns.Annotations[annotations.NamespaceNetwork]; annotated && ns.DeletionTimestamp.IsZero() {
			if nn := s.Neutron.X.Network(string(ns.UID)); nn == nil || nn.Subnet == nil {
				if !controller.Send(ctx, s.NamespaceRepairs, ns) {
					return ctx.Err()
				}
			}
		}
	}
	var errs []error
	for _, nn := range s.Neutron.X.Networks() {
		if live[nn.NamespaceUID] || !s.old(nn.Network.CreatedAt, now) {
			continue
		}
		if err := s.Neutron.DeleteNamespace(ctx, nn.NamespaceUID); err != nil {
			if !errors.Is(err, neutron.ErrPortsRemain) {
				errs = append(errs, err)
			}
			continue
		}
		log.Info("Deleted orphan namespace network", "network", nn.Network.ID, "namespace", nn.Namespace)
		s.swept("network")
	}
	return errors.Join(errs...)
}

func (s *Sweeper) swept(kind string) {
	if s.Metrics != nil {
		s.Metrics.Swept.WithLabelValues(kind).Inc()
	}
}
