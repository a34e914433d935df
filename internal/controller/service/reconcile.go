package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// pending is how long Raven waits before looking at a load balancer Octavia is still changing.
const pending = 500 * time.Millisecond

// pollAfter says when to look again at a load balancer Octavia has been changing since since: every half
// second at first, then less often as the change drags on (an amphora booting), at most every 5 s.
func pollAfter(since, now time.Time) time.Duration {
	if since.IsZero() {
		return pending
	}
	return backOff(now.Sub(since), 5*time.Second)
}

// backOff is a tenth of how long a wait has lasted, at least pending and at most most.
func backOff(waited, most time.Duration) time.Duration {
	return min(max(waited/10, pending), most)
}

// settleAfter says when to look again at a Service whose pools the provider has been changing since began:
// every half second at first, then less often, at most every 2 s. Each look reads the whole load balancer; a
// look every half second was 465 reads (1875 calls) while ovn-octavia-provider 8.0.0 built one pool of 100
// members (bench/results/services-2025.1). At most 2 s: a change that waits for the pool is sent that late.
func settleAfter(began, now time.Time) time.Duration {
	return backOff(now.Sub(began), 2*time.Second)
}

// Reconciler gives services their load balancers.
type Reconciler struct {
	Client  client.Client
	Neutron *neutron.Manager
	LB      openstack.LoadBalancing
	// Provider is the Octavia provider every load balancer is asked for, with what it accepts.
	Provider octavia.Provider
	// Class is the spec.loadBalancerClass Raven implements (config.Octavia.LoadBalancerClass); a Service of
	// another class gets no floating IP for its type and no status from Raven (see ImplementsLoadBalancer).
	Class string
	// settlingSince holds, by Service UID and pool, when the wait for the provider to finish a member change began.
	settleMu      sync.Mutex
	settlingSince map[string]map[string]octavia.Settle
	// sent holds, by Service UID and pool, the member changes sent that Octavia does not show yet (octavia.Sent).
	sent map[string]map[string]octavia.Sent
	// waitBegan holds, by Service UID, when Raven began waiting for the provider to finish its last member change.
	waitBegan map[string]time.Time
	// Backends, when set, is told the members of each load balancer as read, so that a pod's port outlives its
	// membership, and the floating IPs Raven made for it, which the NetworkPolicy controller admits egress to (see
	// octavia.Backends).
	Backends *octavia.Backends
	// Deletes, when set, keeps a load balancer or health monitor delete from being sent again while the provider
	// has it queued.
	Deletes  *octavia.Deletes
	Gate     *controller.Gate
	Recorder events.EventRecorder

	// refusals remembers the changes Octavia refused, by Service UID and step, so that they are asked again
	// only after refusalRetry and not before every other change of the plan. In memory only: after a
	// restart each is asked once more.
	refusals sync.Map // string → refusal

	// first is the leader's one listing of load balancers and floating IPs that each Service's first reconcile
	// reads (see firstLook).
	first firstLook
}

// Reconcile makes Octavia and Neutron match the Service as it is now. It never waits for Octavia: while
// a load balancer is PENDING_* it returns and looks again shortly.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := r.Gate.Wait(ctx); err != nil {
		return reconcile.Result{}, err
	}
	var svc corev1.Service
	if err := r.Client.Get(ctx, req.NamespacedName, &svc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !svc.DeletionTimestamp.IsZero() || !Served(&svc) {
		if !controllerutil.ContainsFinalizer(&svc, annotations.ServiceFinalizer) {
			return reconcile.Result{}, nil
		}
		done, err := Teardown(ctx, r.Neutron, r.LB, r.Provider, r.Deletes, string(svc.UID))
		if err != nil {
			r.warn(&svc, "LoadBalancerDelete", "deleting the load balancer", err)
			return reconcile.Result{}, err
		}
		if !done {
			return reconcile.Result{RequeueAfter: pending}, nil
		}
		klog.FromContext(ctx).V(1).Info("Removed load balancer")
		r.forgetRefusals(string(svc.UID))
		r.Backends.Forget(string(svc.UID))
		r.forgetSent(string(svc.UID))
		if Served(&svc) || svc.DeletionTimestamp != nil {
			return reconcile.Result{}, controller.SetFinalizer(ctx, r.Client, &svc, annotations.ServiceFinalizer, false)
		}
		// Became headless or ExternalName: drop the annotations as well.
		if err := r.patchAnnotations(ctx, &svc, map[string]*string{annotations.ServiceVIP: nil, annotations.ServicePools: nil}); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, controller.SetFinalizer(ctx, r.Client, &svc, annotations.ServiceFinalizer, false)
	}
	if err := controller.SetFinalizer(ctx, r.Client, &svc, annotations.ServiceFinalizer, true); err != nil {
		return reconcile.Result{}, err
	}
	res, err := r.ensure(ctx, &svc)
	if openstack.KindOf(err) == openstack.KindImmutable {
		// Octavia is applying an earlier change; look again when it is done.
		return reconcile.Result{RequeueAfter: pending}, nil
	}
	return res, err
}

func (r *Reconciler) ensure(ctx context.Context, svc *corev1.Service) (reconcile.Result, error) {
	if err := r.checkClusterIP(svc); err != nil {
		return reconcile.Result{}, err
	}
	vip, err := r.ownVIPPort(ctx, svc)
	if err != nil {
		return reconcile.Result{}, err
	}
	want, waitSlices, err := r.desired(ctx, svc)
	if err != nil {
		return reconcile.Result{}, err
	}
	look := r.first.take(ctx, r, string(svc.UID), time.Now())
	lb, err := r.ensureLoadBalancer(ctx, svc, vip, want, waitSlices, look)
	if errors.Is(err, errOldDeleting) || errors.Is(err, errSlicesPending) {
		return reconcile.Result{RequeueAfter: pending}, nil
	}
	if err != nil {
		r.warn(svc, "LoadBalancerCreate", "creating the load balancer", r.explainCreate(svc, err))
		return reconcile.Result{}, err
	}
	if r.Provider.MakesVIPPort {
		vip = openstack.Port{ID: lb.VipPortID, FixedIPs: []openstack.FixedIP{{IPAddress: lb.VipAddress, SubnetID: lb.VipSubnetID}}}
	}
	if lb.ProvisioningStatus != "ACTIVE" {
		return r.waitForActive(ctx, svc, lb)
	}
	return r.build(ctx, svc, vip, lb, want, look)
}

// ownVIPPort is the VIP port Raven makes for a provider that takes one (none for a provider that makes its own).
func (r *Reconciler) ownVIPPort(ctx context.Context, svc *corev1.Service) (openstack.Port, error) {
	if r.Provider.MakesVIPPort {
		return openstack.Port{}, nil
	}
	vip, err := r.Neutron.EnsureVIPPort(ctx, neutron.VIP{Owner: r.owner(svc), Name: svc.Name, Address: svc.Spec.ClusterIP,
		Description: "VIP of service " + svc.Namespace + "/" + svc.Name})
	if err != nil {
		r.warn(svc, "VIPPortCreate", "creating the VIP port", err)
	}
	return vip, err
}

// desired is the listeners the Service needs now, and whether a new load balancer should wait for the
// Service's EndpointSlices; what cannot be served as asked gets a Warning.
func (r *Reconciler) desired(ctx context.Context, svc *corev1.Service) ([]octavia.Listener, bool, error) {
	var eps discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &eps, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		return nil, false, err
	}
	want, problems := octavia.Desired(svc, eps.Items, r.subnetFor, r.Provider)
	for _, p := range problems {
		r.warn(svc, "UnsupportedPort", "building the listeners", errors.New(p))
	}
	return want, slicesPending(svc, eps.Items, time.Now()), nil
}

// build takes an ACTIVE load balancer one step closer to want; once there, it sets up the floating IP and
// writes the Service's annotations and status. look is what the first look held of the Service.
func (r *Reconciler) build(ctx context.Context, svc *corev1.Service, vip openstack.Port, lb *openstack.LoadBalancer, want []octavia.Listener, look seen) (reconcile.Result, error) {
	cur, err := r.read(ctx, lb.ID, look)
	if err != nil {
		return reconcile.Result{}, err
	}
	r.Backends.Observe(string(svc.UID), cur)
	// A pool whose wait ran out gets its change again, and is still looked at until the provider is done: what
	// the provider ends with may differ from what was sent (ovn-octavia-provider 8.0.0 queues each batch update
	// behind the last and works out deletions from its own, older view).
	settling := octavia.Settling(cur)
	read := cur
	cur = r.expireSettling(ctx, string(svc.UID), cur, want, settling)
	cur, held, watched := r.holdSent(string(svc.UID), cur, want)
	applied, retry, err := r.applyNext(ctx, svc, lb, read, octavia.Plan(want, cur))
	if err != nil {
		return reconcile.Result{}, err
	}
	if applied {
		r.waitForProvider(string(svc.UID), false, time.Now()) // a new change: its wait starts over
		if _, announced := svc.Annotations[annotations.ServiceVIP]; !announced {
			// Seed 004: the VIP is announced as soon as the load balancer exists; the pools follow once built.
			// A Service with many ports takes long to build, and says so meanwhile.
			if err := r.announce(ctx, svc, vip, lb, nil, want, cur); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{RequeueAfter: pending}, nil
	}

	if failed := octavia.FailedMonitors(cur); len(failed) > 0 {
		r.warn(svc, "HealthMonitorFailed", "probing the members", fmt.Errorf("the %s provider could not set up %s; those ports balance without probing "+
			"(on the ovn provider each member network needs a network:distributed port: Neutron's [ovn] ovn_metadata_enabled = true with DHCP on the subnet); "+
			"delete the health monitor and Raven makes a new one", r.Provider.Name, strings.Join(failed, ", ")))
	}
	fip, err := r.ensureFloatingIP(ctx, svc, vip, look)
	r.Backends.ObserveFloatingIPs(string(svc.UID), addressOf(fip))
	if err != nil {
		r.warn(svc, "FloatingIP", "setting up the floating IP", err)
		return reconcile.Result{}, err
	}
	if err := r.patchStatus(ctx, svc, fip); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.announce(ctx, svc, vip, lb, fip, want, cur); err != nil {
		return reconcile.Result{}, err
	}
	// What Octavia refused is asked again later (a quota may be raised): retry is 0 when nothing was refused.
	// Pools whose members the provider is still changing are looked at again shortly.
	if after, waiting := r.waitForProvider(string(svc.UID), len(settling) > 0 || len(held) > 0 || len(watched) > 0, time.Now()); waiting {
		klog.FromContext(ctx).V(2).Info("Waiting for the provider to finish a member change", "pools", settling, "sent", held, "watched", watched, "lookAgain", after)
		retry = shortest(retry, after)
	}
	return reconcile.Result{RequeueAfter: retry}, nil
}

// read returns what Octavia holds for the load balancer: with the listeners and pools the first look listed,
// when it holds them, else with its own.
func (r *Reconciler) read(ctx context.Context, lbID string, look seen) (octavia.Current, error) {
	if l, ok := look.layouts[lbID]; ok {
		return octavia.ReadWith(ctx, r.LB, lbID, l)
	}
	return octavia.Read(ctx, r.LB, lbID)
}

// explainCreate adds to a create error what an operator can do about it. A provider that makes its own VIP
// port leaves it behind when Octavia refuses the rest of the create (Octavia 11 with ovn-octavia-provider
// 3.0.0: seen with a graph Octavia found invalid; Octavia checks the listener, pool and member quotas of a
// graph at the same point, after the port exists); the port, which Raven does not own, then holds the clusterIP.
func (r *Reconciler) explainCreate(svc *corev1.Service, err error) error {
	if !r.Provider.MakesVIPPort || !strings.Contains(err.Error(), "already allocated") {
		return err
	}
	return fmt.Errorf("%w; another port on the service subnet holds the clusterIP %s. A port named ovn-lb-vip-<ID> whose load balancer does not exist was left by a create Octavia refused: delete it, and Raven builds the load balancer",
		err, svc.Spec.ClusterIP)
}

// checkClusterIP refuses, for good, a Service whose clusterIP is outside the service subnet (or a cluster
// without one): no load balancer can have it as its VIP.
func (r *Reconciler) checkClusterIP(svc *corev1.Service) error {
	c := r.Neutron.C
	if c.ServiceSubnet == nil {
		return reconcile.TerminalError(errors.New("no service subnet configured"))
	}
	subnet := netip.MustParsePrefix(c.ServiceSubnet.CIDR)
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !subnet.Contains(ip) {
		err := fmt.Errorf("clusterIP %s is outside the service subnet %s; set neutron.serviceSubnetCIDR to cover the service-cluster-ip-range", svc.Spec.ClusterIP, subnet)
		r.warn(svc, "ClusterIPOutsideServiceSubnet", "building the load balancer", err)
		return reconcile.TerminalError(err)
	}
	return nil
}

// waitForActive shows the load balancer's PENDING_* status on the Service, warns once it looks stuck, and
// comes back later.
func (r *Reconciler) waitForActive(ctx context.Context, svc *corev1.Service, lb *openstack.LoadBalancer) (reconcile.Result, error) {
	klog.FromContext(ctx).V(3).Info("Load balancer not active yet", "loadBalancer", lb.ID, "status", lb.ProvisioningStatus)
	if err := r.announceStatus(ctx, svc, lb.ProvisioningStatus); err != nil {
		return reconcile.Result{}, err
	}
	since, stuck := Stuck(lb, time.Now())
	if stuck {
		r.warn(svc, "LoadBalancerStuck", "waiting for Octavia", fmt.Errorf("load balancer %s has been %s since %s; Octavia must finish or reset it before Raven can change it",
			lb.ID, lb.ProvisioningStatus, since.Format(time.RFC3339)))
	}
	return reconcile.Result{RequeueAfter: pollAfter(since, time.Now())}, nil
}

// applyNext applies the first step of the plan that Octavia accepts: Octavia locks the load balancer while
// it works, so one accepted step per reconcile. A step Octavia refuses outright (invalid, over quota, not
// supported by the provider) is passed over, so that the ports Octavia can serve are still built; it is
// remembered and asked again after refusalRetry, and retry says when the next such attempt is due. One
// Warning event lists what Octavia refused whenever it refuses something anew. err is any other failure,
// which stops the plan.
func (r *Reconciler) applyNext(ctx context.Context, svc *corev1.Service, lb *openstack.LoadBalancer, read octavia.Current, steps []octavia.Step) (applied bool, retry time.Duration, err error) {
	log := klog.FromContext(ctx)
	now := time.Now()
	r.pruneRefusals(now)
	var (
		refused []string
		fresh   []error
	)
	for _, s := range steps {
		what := fmt.Sprintf("%s %s %d", s.Kind, s.Listener.Protocol, s.Listener.Port)
		key := string(svc.UID) + "|" + what + "|" + specHash(s) // a changed step is a new question
		// Any refusal still stored is current: expired ones were pruned above.
		if v, ok := r.refusals.Load(key); ok {
			ref := v.(refusal)
			refused = append(refused, ref.what)
			retry = shortest(retry, ref.until.Sub(now))
			continue
		}
		err := r.apply(ctx, svc, lb, read, s)
		switch {
		case err == nil:
			r.reportRefusals(svc, lb, refused, fresh)
			return true, 0, nil
		case openstack.Rejected(err) && s.Kind != octavia.DeletePool && s.Kind != octavia.DeleteListener && s.Kind != octavia.DeleteMonitor:
			log.Info("Octavia refused a change; building the other ports", "step", what, "loadBalancer", lb.ID, "err", err.Error())
			ref := refusal{until: now.Add(refusalRetry), what: what + ": " + err.Error()}
			r.refusals.Store(key, ref)
			refused = append(refused, ref.what)
			fresh = append(fresh, err)
			retry = shortest(retry, refusalRetry)
		case openstack.KindOf(err) == openstack.KindImmutable:
			r.reportRefusals(svc, lb, refused, fresh)
			return false, 0, err // Octavia is still applying an earlier change: not worth a Warning
		default:
			r.reportRefusals(svc, lb, refused, fresh)
			r.warn(svc, "LoadBalancerUpdate", what+" on load balancer "+lb.ID, err)
			return false, 0, err
		}
	}
	r.reportRefusals(svc, lb, refused, fresh)
	return false, retry, nil
}

func (r *Reconciler) owner(svc *corev1.Service) ownership.Owner {
	return ownership.Owner{Cluster: r.Neutron.C.ID, Kind: ownership.KindService, UID: string(svc.UID), Name: svc.Namespace + "/" + svc.Name}
}

// errSlicesPending: the load balancer waits for the Service's EndpointSlices, so that its one create carries
// the members.
var errSlicesPending = errors.New("waiting for the Service's EndpointSlices")

// slicesWait is how long after a Service's creation its load balancer waits for its first EndpointSlice.
const slicesWait = 10 * time.Second

// slicesPending says whether a fresh Service with a selector has no EndpointSlice yet: Kubernetes' EndpointSlice
// controller writes one for it within moments (its arrival reconciles the Service again). After slicesWait
// the load balancer is built regardless (a cluster without that controller).
func slicesPending(svc *corev1.Service, slices []discoveryv1.EndpointSlice, now time.Time) bool {
	return len(svc.Spec.Selector) > 0 && len(slices) == 0 && now.Sub(svc.CreationTimestamp.Time) < slicesWait
}

// errOldDeleting: the Service's old load balancer is still being deleted, and holds the clusterIP that the
// new one needs.
var errOldDeleting = errors.New("the old load balancer is still being deleted")

// ensureLoadBalancer finds the Service's load balancer or creates it. A load balancer built for another VIP
// (the clusterIP changed), on another provider (the configuration changed) or in ERROR is replaced; of
// duplicates (a crash between create and the next look) the oldest is kept.
// waitSlices holds a create on a provider that builds the whole graph at once until the members are known.
// The load balancers the first look holds for the Service (look) stand for its own listing.
func (r *Reconciler) ensureLoadBalancer(ctx context.Context, svc *corev1.Service, vip openstack.Port, want []octavia.Listener, waitSlices bool, look seen) (*openstack.LoadBalancer, error) {
	lbs := look.lbs
	if !look.ok {
		var err error
		if lbs, err = octavia.Owned(ctx, r.LB, r.owner(svc).Tags()[:3]); err != nil {
			return nil, err
		}
	}
	keep, deleting, err := r.pick(ctx, svc, vip, lbs)
	switch {
	case err != nil:
		return nil, err
	case keep != nil:
		return keep, nil
	case deleting && r.Provider.MakesVIPPort:
		// The provider's new VIP port would ask for the address the old one still holds.
		return nil, errOldDeleting
	case waitSlices && r.Provider.FullyPopulated:
		return nil, errSlicesPending
	}
	return r.create(ctx, svc, vip, want)
}

// pick chooses the load balancer to keep among lbs (oldest first) and deletes the others: in ERROR, stale
// (another VIP or provider), duplicates. deleting says whether one of them is still being deleted.
func (r *Reconciler) pick(ctx context.Context, svc *corev1.Service, vip openstack.Port, lbs []openstack.LoadBalancer) (keep *openstack.LoadBalancer, deleting bool, err error) {
	for i := range lbs {
		lb := &lbs[i]
		switch {
		case lb.ProvisioningStatus == "PENDING_DELETE":
			deleting = true
			continue
		case lb.ProvisioningStatus == "ERROR":
			r.warn(svc, "LoadBalancerError", "load balancer "+lb.ID+" is in ERROR; rebuilding it", errors.New("ERROR"))
			deleting = true
		case r.stale(svc, lb, vip):
			deleting = true
		case keep == nil:
			keep = lb
			continue
		}
		if err := octavia.Delete(ctx, r.LB, r.Provider, *lb, r.Deletes); err != nil {
			return nil, deleting, err
		}
	}
	return keep, deleting, nil
}

// create creates the Service's load balancer, with its whole graph where the provider allows.
func (r *Reconciler) create(ctx context.Context, svc *corev1.Service, vip openstack.Port, want []octavia.Listener) (*openstack.LoadBalancer, error) {
	owner := r.owner(svc)
	if r.Provider.MakesVIPPort {
		// Raven's own VIP port (made while the provider was amphora) holds the address the provider's needs.
		if err := r.Neutron.DropVIPPorts(ctx, owner); err != nil {
			return nil, err
		}
	}
	spec := openstack.LoadBalancerSpec{
		Name: svc.Namespace + "/" + svc.Name, Description: "Kubernetes service " + svc.Namespace + "/" + svc.Name,
		VipSubnetID: r.Neutron.C.ServiceSubnet.ID, VipAddress: svc.Spec.ClusterIP, Tags: owner.Tags(),
	}
	if !r.Provider.MakesVIPPort {
		spec.VipPortID = vip.ID
	}
	lb, refused, err := octavia.Create(ctx, r.LB, r.Provider, spec, want)
	log := klog.FromContext(ctx)
	if refused != nil {
		log.Info("Octavia refused the load balancer with its listeners; building it step by step", "err", refused.Error())
	}
	if err != nil {
		return nil, err
	}
	built := 0
	if refused == nil && r.Provider.FullyPopulated {
		built = len(want)
	}
	log.V(1).Info("Created load balancer", "loadBalancer", lb.ID, "vip", svc.Spec.ClusterIP, "listeners", built)
	r.event(svc, "LoadBalancerCreated", "Create", "load balancer %s with VIP %s and %d listener(s)", lb.ID, svc.Spec.ClusterIP, built)
	return lb, nil
}

// stale says whether lb was built for another VIP or another provider than the Service needs now.
func (r *Reconciler) stale(svc *corev1.Service, lb *openstack.LoadBalancer, vip openstack.Port) bool {
	if lb.Provider != "" && lb.Provider != r.Provider.Name {
		return true
	}
	if r.Provider.MakesVIPPort {
		return lb.VipAddress != svc.Spec.ClusterIP
	}
	return lb.VipPortID != vip.ID
}

// subnetFor finds the namespace subnet that holds a pod address.
func (r *Reconciler) subnetFor(ip string) string { return r.Neutron.X.SubnetHolding(ip) }

func (r *Reconciler) warn(svc *corev1.Service, reason, what string, err error) {
	klog.Background().WithValues("service", klog.KObj(svc)).Info("Warning", "reason", reason, "what", what, "err", err.Error())
	controller.Warn(r.Recorder, svc, reasonFor(reason, err), "Reconcile", what, err)
}

func reasonFor(reason string, err error) string {
	var e *openstack.Error
	if errors.As(err, &e) {
		return controller.Reason(reason, err)
	}
	return reason
}

func (r *Reconciler) event(svc *corev1.Service, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, reason, action, format, args...)
	}
}

func (r *Reconciler) apply(ctx context.Context, svc *corev1.Service, lb *openstack.LoadBalancer, read octavia.Current, s octavia.Step) error {
	if err := octavia.Apply(ctx, r.LB, lb.ID, s, r.owner(svc).Tags()); err != nil {
		return err
	}
	if sent, ok := octavia.SentBy(s, read, time.Now()); ok {
		r.recordSent(string(svc.UID), s.ID, sent)
	}
	switch s.Kind {
	case octavia.ReplaceMembers:
		r.event(svc, "MembersUpdated", "Update", "pool %s (%s %d): %d members", s.ID, s.Listener.Protocol, s.Listener.Port, len(s.Listener.Members))
	case octavia.DeleteMember:
		r.event(svc, "MemberRemoved", "Update", "pool %s (%s %d): removed %s:%d", s.ID, s.Listener.Protocol, s.Listener.Port, s.Member.Address, s.Member.ProtocolPort)
	case octavia.AddMembers:
		r.event(svc, "MembersAdded", "Update", "pool %s (%s %d): %d members added, none removed", s.ID, s.Listener.Protocol, s.Listener.Port, len(s.Add))
	}
	klog.FromContext(ctx).V(2).Info("Applied load balancer change", "step", s.Kind, "id", s.ID, "port", s.Listener.Port, "members", len(s.Listener.Members))
	return nil
}

// ensureFloatingIP makes the Service's floating IP match FloatingIP(): created with the wanted address,
// associated with the VIP port, moved or released when that changes. A Service that wants none, and had none
// at the first look, has nothing to do.
func (r *Reconciler) ensureFloatingIP(ctx context.Context, svc *corev1.Service, vip openstack.Port, look seen) (*openstack.FloatingIP, error) {
	addr, want, ignored := FloatingIP(svc, r.Neutron.C.ExternalSubnet, r.Class)
	for _, why := range ignored {
		r.warn(svc, "ExternalIPIgnored", "choosing the floating IP", errors.New(why))
	}
	if !want && look.ok && !look.fip {
		return nil, nil
	}
	fip, change, err := r.Neutron.EnsureFloatingIP(ctx, r.owner(svc), want, addr, vip.ID)
	for _, a := range change.Released {
		r.event(svc, "FloatingIPReleased", "Delete", "floating IP %s released", a)
	}
	if errors.Is(err, neutron.ErrNoExternalNetwork) {
		return nil, reconcile.TerminalError(err)
	}
	if err != nil {
		return nil, err
	}
	if change.Created {
		r.event(svc, "FloatingIPCreated", "Create", "floating IP %s on VIP %s", fip.FloatingIP, svc.Spec.ClusterIP)
	}
	return fip, nil
}

// addressOf is the address of fip, none for no floating IP (or one not known after a failure: the NetworkPolicy
// controller then admits none until it is).
func addressOf(fip *openstack.FloatingIP) []string {
	if fip == nil {
		return nil
	}
	return []string{fip.FloatingIP}
}

// holdSent shows the pools whose sent member change Octavia does not show yet as still being changed (see
// octavia.HoldSent), and lists them, and the pools to look at again until Octavia shows an earlier change.
func (r *Reconciler) holdSent(uid string, cur octavia.Current, want []octavia.Listener) (out octavia.Current, held, watched []string) {
	r.settleMu.Lock()
	defer r.settleMu.Unlock()
	sent := r.sent[uid]
	if len(sent) == 0 {
		return cur, nil, nil
	}
	out, held, watched = octavia.HoldSent(cur, want, sent, time.Now(), octavia.SettleLimit)
	if len(sent) == 0 {
		delete(r.sent, uid)
	}
	return out, held, watched
}

func (r *Reconciler) recordSent(uid, pool string, s octavia.Sent) {
	r.settleMu.Lock()
	defer r.settleMu.Unlock()
	if r.sent == nil {
		r.sent = map[string]map[string]octavia.Sent{}
	}
	if r.sent[uid] == nil {
		r.sent[uid] = map[string]octavia.Sent{}
	}
	r.sent[uid][pool] = s
}

func (r *Reconciler) forgetSent(uid string) {
	r.settleMu.Lock()
	defer r.settleMu.Unlock()
	delete(r.sent, uid)
	delete(r.waitBegan, uid)
	delete(r.settlingSince, uid)
}

// waitForProvider notes whether the Service uid waits for the provider to finish a member change, and if so when
// to look again (settleAfter, from when the wait began).
func (r *Reconciler) waitForProvider(uid string, waiting bool, now time.Time) (time.Duration, bool) {
	r.settleMu.Lock()
	defer r.settleMu.Unlock()
	if !waiting {
		delete(r.waitBegan, uid)
		return 0, false
	}
	if r.waitBegan == nil {
		r.waitBegan = map[string]time.Time{}
	}
	began, ok := r.waitBegan[uid]
	if !ok {
		began, r.waitBegan[uid] = now, now
	}
	return settleAfter(began, now), true
}

// expireSettling lets a pool of the Service uid that has waited octavia.SettleLimit for the provider to finish a
// member change have its change sent again (the provider lost it), with a log line. Each Service keeps its own
// waits: ExpireSettling drops the waits of pools its load balancer does not have settling, and one map for every
// Service had each reconcile restart the waits of every other Service's pools, so that none ran out while other
// Services were reconciled (as when the e2e suite's tests run together).
// settling is octavia.Settling(cur), which the caller has.
func (r *Reconciler) expireSettling(ctx context.Context, uid string, cur octavia.Current, want []octavia.Listener, settling []string) octavia.Current {
	r.settleMu.Lock()
	defer r.settleMu.Unlock()
	since := r.settlingSince[uid]
	if since == nil {
		if len(settling) == 0 {
			return cur
		}
		since = map[string]octavia.Settle{}
		if r.settlingSince == nil {
			r.settlingSince = map[string]map[string]octavia.Settle{}
		}
		r.settlingSince[uid] = since
	}
	out := octavia.ExpireSettling(cur, want, since, time.Now(), octavia.SettleLimit)
	if len(since) == 0 {
		delete(r.settlingSince, uid)
	}
	if after := octavia.Settling(out); len(after) < len(settling) {
		klog.FromContext(ctx).Info("The provider did not finish a member change in time; sending it again", "pools", settling, "after", octavia.SettleLimit)
	}
	return out
}
