package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
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

// VIPDeviceOwner marks the VIP ports Raven makes for load balancers.
const VIPDeviceOwner = "raven:vip"

// pending is how long Raven waits before looking at a load balancer Octavia is still changing.
const pending = 500 * time.Millisecond

// pollAfter says when to look again at a load balancer Octavia has been changing since since: every half
// second at first, then less often as the change drags on (an amphora booting), at most every 5 s.
func pollAfter(since, now time.Time) time.Duration {
	if since.IsZero() {
		return pending
	}
	return min(max(now.Sub(since)/10, pending), 5*time.Second)
}

// Reconciler gives services their load balancers.
type Reconciler struct {
	Client  client.Client
	Neutron *neutron.Manager
	LB      openstack.LoadBalancing
	// Provider is the Octavia provider every load balancer is asked for, with what it accepts.
	Provider octavia.Provider
	Gate     *controller.Gate
	Recorder events.EventRecorder

	// refusals remembers the changes Octavia refused, by Service UID and step, so that they are asked again
	// only after refusalRetry and not before every other change of the plan. In memory only: after a
	// restart each is asked once more.
	refusals sync.Map // string → refusal
}

type refusal struct {
	until time.Time
	what  string // the step and Octavia's answer
}

// refusalRetry is how long Raven waits before asking Octavia again for a change it refused.
const refusalRetry = 30 * time.Second

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
		done, err := Teardown(ctx, r.Neutron, r.LB, string(svc.UID))
		if err != nil {
			r.warn(&svc, "LoadBalancerDelete", "deleting the load balancer", err)
			return reconcile.Result{}, err
		}
		if !done {
			return reconcile.Result{RequeueAfter: pending}, nil
		}
		klog.FromContext(ctx).V(1).Info("Removed load balancer")
		r.forgetRefusals(string(svc.UID))
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
	var vip openstack.Port
	if !r.Provider.MakesVIPPort {
		var err error
		if vip, err = r.ensureVIP(ctx, svc); err != nil {
			r.warn(svc, "VIPPortCreate", "creating the VIP port", err)
			return reconcile.Result{}, err
		}
	}
	var eps discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &eps, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		return reconcile.Result{}, err
	}
	want, problems := octavia.Desired(svc, eps.Items, r.subnetFor, r.Provider)
	for _, p := range problems {
		r.warn(svc, "UnsupportedPort", "building the listeners", errors.New(p))
	}
	lb, err := r.ensureLoadBalancer(ctx, svc, vip, want, slicesPending(svc, eps.Items, time.Now()))
	if errors.Is(err, errOldDeleting) || errors.Is(err, errSlicesPending) {
		return reconcile.Result{RequeueAfter: pending}, nil
	}
	if err != nil {
		r.warn(svc, "LoadBalancerCreate", "creating the load balancer", err)
		return reconcile.Result{}, err
	}
	if r.Provider.MakesVIPPort {
		vip = openstack.Port{ID: lb.VipPortID, FixedIPs: []openstack.FixedIP{{IPAddress: lb.VipAddress, SubnetID: lb.VipSubnetID}}}
	}
	if lb.ProvisioningStatus != "ACTIVE" {
		return r.waitForActive(ctx, svc, lb)
	}
	cur, err := r.current(ctx, lb.ID)
	if err != nil {
		return reconcile.Result{}, err
	}
	applied, retry, err := r.applyNext(ctx, svc, lb, octavia.Plan(want, cur))
	if err != nil {
		return reconcile.Result{}, err
	}
	if applied {
		if _, announced := svc.Annotations[annotations.ServiceVIP]; !announced {
			// Seed 004: the VIP is announced as soon as the load balancer exists; the pools follow once built.
			// A Service with many ports takes long to build, and says so meanwhile.
			if err := r.announce(ctx, svc, vip, lb, nil, want, cur); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{RequeueAfter: pending}, nil
	}

	fip, err := r.ensureFloatingIP(ctx, svc, vip)
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
	return reconcile.Result{RequeueAfter: retry}, nil
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

// announce writes the Service's VIP and pool annotations as Octavia serves them now.
func (r *Reconciler) announce(ctx context.Context, svc *corev1.Service, vip openstack.Port, lb *openstack.LoadBalancer,
	fip *openstack.FloatingIP, want []octavia.Listener, cur octavia.Current) error {
	a, err := Annotations(svc, vip, lb, fip, want, cur)
	if err != nil {
		return err
	}
	return r.patchAnnotations(ctx, svc, a)
}

// applyNext applies the first step of the plan that Octavia accepts: Octavia locks the load balancer while
// it works, so one accepted step per reconcile. A step Octavia refuses outright (invalid, over quota, not
// supported by the provider) is passed over, so that the ports Octavia can serve are still built; it is
// remembered and asked again after refusalRetry, and retry says when the next such attempt is due. One
// Warning event lists what Octavia refused whenever it refuses something anew. err is any other failure,
// which stops the plan.
func (r *Reconciler) applyNext(ctx context.Context, svc *corev1.Service, lb *openstack.LoadBalancer, steps []octavia.Step) (applied bool, retry time.Duration, err error) {
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
		err := r.apply(ctx, svc, lb, s)
		switch {
		case err == nil:
			r.reportRefusals(svc, lb, refused, fresh)
			return true, 0, nil
		case openstack.Rejected(err) && s.Kind != octavia.DeletePool && s.Kind != octavia.DeleteListener:
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

// reportRefusals raises one Warning event when Octavia refused something anew: the first new refusal names
// the reason (LoadBalancerRefused<Kind>), the message lists every change refused now.
func (r *Reconciler) reportRefusals(svc *corev1.Service, lb *openstack.LoadBalancer, refused []string, fresh []error) {
	if len(fresh) == 0 {
		return
	}
	r.warn(svc, "LoadBalancerRefused", fmt.Sprintf("Octavia refused %d change(s) of load balancer %s; the other ports are served", len(refused), lb.ID),
		refusedError{first: fresh[0], all: refused})
}

// refusedError carries the first new refusal (for its kind) and the text of all current ones.
type refusedError struct {
	first error
	all   []string
}

// Error lists the refusals, within what an Event's message may hold (1024 bytes).
func (e refusedError) Error() string {
	const limit = 900
	var b strings.Builder
	for i, what := range e.all {
		if r := []rune(what); len(r) > 200 {
			what = string(r[:200]) + "…"
		}
		if b.Len()+len(what) > limit {
			fmt.Fprintf(&b, "; and %d more", len(e.all)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(what)
	}
	return b.String()
}
func (e refusedError) Unwrap() error { return e.first }

func shortest(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// specHash tells two versions of a step apart (other members, another algorithm).
func specHash(s octavia.Step) string {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s|%s|%v", s.ID, s.Listener.Algorithm, s.Listener.Members)
	return strconv.FormatUint(h.Sum64(), 36)
}

// pruneRefusals forgets refusals whose time is up, so that ports removed or changed since do not pile up.
func (r *Reconciler) pruneRefusals(now time.Time) {
	r.dropRefusals(func(_ string, ref refusal) bool { return !now.Before(ref.until) })
}

// forgetRefusals drops what Octavia refused for a Service that no longer needs a load balancer.
func (r *Reconciler) forgetRefusals(uid string) {
	r.dropRefusals(func(key string, _ refusal) bool { return strings.HasPrefix(key, uid+"|") })
}

func (r *Reconciler) dropRefusals(drop func(key string, ref refusal) bool) {
	r.refusals.Range(func(k, v any) bool {
		if drop(k.(string), v.(refusal)) {
			r.refusals.Delete(k)
		}
		return true
	})
}

func (r *Reconciler) owner(svc *corev1.Service) ownership.Owner {
	return ownership.Owner{Cluster: r.Neutron.C.ID, Kind: ownership.KindService, UID: string(svc.UID), Name: svc.Namespace + "/" + svc.Name}
}

// ensureVIP finds or creates the VIP port whose fixed IP is the clusterIP.
func (r *Reconciler) ensureVIP(ctx context.Context, svc *corev1.Service) (openstack.Port, error) {
	c := r.Neutron.C
	for _, p := range r.Neutron.X.PortsOf(string(svc.UID)) {
		if len(p.FixedIPs) > 0 && p.FixedIPs[0].IPAddress == svc.Spec.ClusterIP {
			return p, nil
		}
	}
	// Not in the index: maybe made by an earlier run whose index is gone; ask Neutron by tag.
	owner := r.owner(svc)
	found, err := r.Neutron.N.ListPorts(ctx, openstack.Filter{NetworkID: c.ServiceNetworkID, Tags: owner.Tags()[:3]})
	if err != nil {
		return openstack.Port{}, err
	}
	for _, p := range found {
		if len(p.FixedIPs) > 0 && p.FixedIPs[0].IPAddress == svc.Spec.ClusterIP {
			r.Neutron.X.PutPort(c.ID, p)
			return p, nil
		}
		// A VIP port with another address: the clusterIP changed (the Service was recreated).
		if err := openstack.IgnoreNotFound(r.Neutron.N.DeletePort(ctx, p.ID)); err != nil {
			return openstack.Port{}, err
		}
		r.Neutron.X.DropPort(p.ID)
	}
	spec := openstack.PortSpec{
		Name: svc.Name, NetworkID: c.ServiceNetworkID, SubnetID: c.ServiceSubnet.ID, IPAddress: svc.Spec.ClusterIP,
		DeviceOwner: VIPDeviceOwner, DeviceID: string(svc.UID), Description: "VIP of service " + svc.Namespace + "/" + svc.Name,
		Tags: owner.Tags(),
	}
	p, err := r.Neutron.N.CreatePort(ctx, spec)
	if err != nil {
		return openstack.Port{}, err
	}
	if c.Caps.TagsOnPortCreate {
		if err := neutron.KeepTags(ctx, r.Neutron.N, p, spec.Tags); err != nil {
			return openstack.Port{}, err
		}
	} else {
		if err := r.Neutron.N.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, owner.Tags()); err != nil {
			return openstack.Port{}, err
		}
		p.Tags = owner.Tags()
	}
	r.Neutron.X.PutPort(c.ID, *p)
	return *p, nil
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
func (r *Reconciler) ensureLoadBalancer(ctx context.Context, svc *corev1.Service, vip openstack.Port, want []octavia.Listener, waitSlices bool) (*openstack.LoadBalancer, error) {
	owner := r.owner(svc)
	lbs, err := r.LB.ListLoadBalancers(ctx, owner.Tags()[:3])
	if err != nil {
		return nil, err
	}
	slices.SortFunc(lbs, func(a, b openstack.LoadBalancer) int { return a.CreatedAt.Compare(b.CreatedAt.Time) })
	var keep *openstack.LoadBalancer
	deleting := false
	for i := range lbs {
		lb := &lbs[i]
		switch {
		case lb.ProvisioningStatus == "PENDING_DELETE":
			deleting = true
		case lb.ProvisioningStatus == "ERROR":
			r.warn(svc, "LoadBalancerError", "load balancer "+lb.ID+" is in ERROR; rebuilding it", errors.New("ERROR"))
			if err := r.deleteLoadBalancer(ctx, lb.ID); err != nil {
				return nil, err
			}
			deleting = true
		case r.stale(svc, lb, vip):
			if err := r.deleteLoadBalancer(ctx, lb.ID); err != nil {
				return nil, err
			}
			deleting = true
		case keep == nil:
			keep = lb
		default:
			if err := r.deleteLoadBalancer(ctx, lb.ID); err != nil {
				return nil, err
			}
		}
	}
	if keep != nil {
		return keep, nil
	}
	if deleting && r.Provider.MakesVIPPort {
		// The provider's new VIP port would ask for the address the old one still holds.
		return nil, errOldDeleting
	}
	if waitSlices && r.Provider.FullyPopulated {
		return nil, errSlicesPending
	}
	if r.Provider.MakesVIPPort {
		if err := r.dropOwnVIPPorts(ctx, svc); err != nil {
			return nil, err
		}
	}
	return r.createLoadBalancer(ctx, svc, vip, want)
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

// dropOwnVIPPorts deletes the VIP ports Raven made for the Service under a provider that takes its port
// (the provider was amphora before): they hold the clusterIP the provider's own port needs.
func (r *Reconciler) dropOwnVIPPorts(ctx context.Context, svc *corev1.Service) error {
	ports, err := r.Neutron.N.ListPorts(ctx, openstack.Filter{NetworkID: r.Neutron.C.ServiceNetworkID, Tags: r.owner(svc).Tags()[:3]})
	if err != nil {
		return err
	}
	for _, p := range ports {
		if err := openstack.IgnoreNotFound(r.Neutron.N.DeletePort(ctx, p.ID)); err != nil {
			return err
		}
		r.Neutron.X.DropPort(p.ID)
	}
	return nil
}

// createLoadBalancer creates the Service's load balancer: with its whole graph in one request when the
// provider builds one, else bare (Plan adds listeners, pools and members one step at a time). When Octavia
// refuses the graph (one port it cannot serve, a quota), the load balancer is created bare, so that the plan
// builds what Octavia accepts and reports the rest.
func (r *Reconciler) createLoadBalancer(ctx context.Context, svc *corev1.Service, vip openstack.Port, want []octavia.Listener) (*openstack.LoadBalancer, error) {
	owner := r.owner(svc)
	spec := openstack.LoadBalancerSpec{
		Name: svc.Namespace + "/" + svc.Name, Description: "Kubernetes service " + svc.Namespace + "/" + svc.Name,
		VipSubnetID: r.Neutron.C.ServiceSubnet.ID, VipAddress: svc.Spec.ClusterIP, Provider: r.Provider.Name, Tags: owner.Tags(),
	}
	if !r.Provider.MakesVIPPort {
		spec.VipPortID = vip.ID
	}
	log := klog.FromContext(ctx)
	if r.Provider.FullyPopulated && len(want) > 0 {
		full := spec
		full.Listeners = octavia.Graph(want, owner.Tags())
		lb, err := r.LB.CreateLoadBalancer(ctx, full)
		if err == nil {
			log.V(1).Info("Created load balancer with its listeners", "loadBalancer", lb.ID, "vip", svc.Spec.ClusterIP, "listeners", len(want))
			r.event(svc, "LoadBalancerCreated", "Create", "load balancer %s with VIP %s and %d listener(s)", lb.ID, svc.Spec.ClusterIP, len(want))
			return lb, nil
		}
		if !openstack.Rejected(err) {
			return nil, err
		}
		log.Info("Octavia refused the load balancer with its listeners; building it step by step", "err", err.Error())
	}
	lb, err := r.LB.CreateLoadBalancer(ctx, spec)
	if err != nil {
		return nil, err
	}
	log.V(1).Info("Created load balancer", "loadBalancer", lb.ID, "vip", svc.Spec.ClusterIP)
	r.event(svc, "LoadBalancerCreated", "Create", "load balancer %s with VIP %s", lb.ID, svc.Spec.ClusterIP)
	return lb, nil
}

// deleteLoadBalancer deletes a load balancer Raven does not keep. Gone already is fine, and so is busy:
// the next reconcile asks again.
func (r *Reconciler) deleteLoadBalancer(ctx context.Context, id string) error {
	if err := openstack.IgnoreNotFound(r.LB.DeleteLoadBalancer(ctx, id)); err != nil && openstack.KindOf(err) != openstack.KindImmutable {
		return err
	}
	return nil
}

func (r *Reconciler) current(ctx context.Context, lbID string) (octavia.Current, error) {
	var cur octavia.Current
	var err error
	if cur.Listeners, err = r.LB.ListListeners(ctx, lbID); err != nil {
		return cur, err
	}
	if cur.Pools, err = r.LB.ListPools(ctx, lbID); err != nil {
		return cur, err
	}
	cur.Members, err = r.LB.LoadBalancerMembers(ctx, lbID)
	return cur, err
}

func (r *Reconciler) apply(ctx context.Context, svc *corev1.Service, lb *openstack.LoadBalancer, s octavia.Step) error {
	log := klog.FromContext(ctx)
	tags := r.owner(svc).Tags()
	var err error
	switch s.Kind {
	case octavia.DeletePool:
		err = openstack.IgnoreNotFound(r.LB.DeletePool(ctx, s.ID))
	case octavia.DeleteListener:
		err = openstack.IgnoreNotFound(r.LB.DeleteListener(ctx, s.ID))
	case octavia.CreateListener:
		_, err = r.LB.CreateListener(ctx, openstack.ListenerSpec{LoadBalancerID: lb.ID, Name: s.Listener.Name,
			Protocol: s.Listener.Protocol, ProtocolPort: s.Listener.Port, Tags: tags})
	case octavia.CreatePool:
		_, err = r.LB.CreatePool(ctx, openstack.PoolSpec{ListenerID: s.ID, Name: s.Listener.PoolName(), Protocol: s.Listener.Protocol,
			LBAlgorithm: s.Listener.Algorithm, Tags: tags})
	case octavia.ReplaceMembers:
		err = r.LB.ReplaceMembers(ctx, s.ID, s.Listener.Members)
		if err == nil {
			r.event(svc, "MembersUpdated", "Update", "pool %s (%s %d): %d members", s.ID, s.Listener.Protocol, s.Listener.Port, len(s.Listener.Members))
		}
	}
	if err == nil {
		log.V(2).Info("Applied load balancer change", "step", s.Kind, "id", s.ID, "port", s.Listener.Port, "members", len(s.Listener.Members))
	}
	return err
}

// ensureFloatingIP makes the Service's floating IP match FloatingIP(): created with the wanted address,
// associated with the VIP port, moved or released when that changes.
func (r *Reconciler) ensureFloatingIP(ctx context.Context, svc *corev1.Service, vip openstack.Port) (*openstack.FloatingIP, error) {
	c := r.Neutron.C
	addr, want, ignored := FloatingIP(svc, c.ExternalSubnet)
	for _, why := range ignored {
		r.warn(svc, "ExternalIPIgnored", "choosing the floating IP", errors.New(why))
	}
	owner := r.owner(svc)
	fips, err := r.Neutron.N.ListFloatingIPs(ctx, openstack.Filter{Tags: owner.Tags()[:3]})
	if err != nil {
		return nil, err
	}
	var keep *openstack.FloatingIP
	for i := range fips {
		f := &fips[i]
		if want && keep == nil && (addr == "" || f.FloatingIP == addr) {
			keep = f
			continue
		}
		if err := openstack.IgnoreNotFound(r.Neutron.N.DeleteFloatingIP(ctx, f.ID)); err != nil {
			return nil, err
		}
		r.event(svc, "FloatingIPReleased", "Delete", "floating IP %s released", f.FloatingIP)
	}
	if !want {
		return nil, nil
	}
	if keep == nil {
		if c.ExternalNetworkID == "" {
			return nil, reconcile.TerminalError(errors.New("no external network configured"))
		}
		f, err := r.Neutron.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: c.ExternalNetworkID, FloatingIP: addr,
			PortID: vip.ID}, owner.Tags())
		if err != nil {
			return nil, err
		}
		r.event(svc, "FloatingIPCreated", "Create", "floating IP %s on VIP %s", f.FloatingIP, svc.Spec.ClusterIP)
		return f, nil
	}
	if keep.PortID != vip.ID {
		return r.Neutron.N.UpdateFloatingIPPort(ctx, keep.ID, vip.ID)
	}
	return keep, nil
}

func (r *Reconciler) patchStatus(ctx context.Context, svc *corev1.Service, fip *openstack.FloatingIP) error {
	var ingress []corev1.LoadBalancerIngress
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && fip != nil {
		ingress = []corev1.LoadBalancerIngress{{IP: fip.FloatingIP}}
	}
	cur := svc.Status.LoadBalancer.Ingress
	if len(cur) == len(ingress) && (len(cur) == 0 || cur[0].IP == ingress[0].IP) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": ingress}}})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, svc, client.RawPatch(types.MergePatchType, body), client.FieldOwner(annotations.FieldManager)))
}

// announceStatus writes the load balancer's provisioning status into an existing VIP annotation when it
// changed, so that the annotation shows the last status Raven saw (PENDING_* while Octavia works).
func (r *Reconciler) announceStatus(ctx context.Context, svc *corev1.Service, status string) error {
	var v annotations.VIP
	if ok, err := annotations.Decode(svc.Annotations, annotations.ServiceVIP, &v); !ok || err != nil || v.ProvisioningStatus == status {
		return nil // not announced yet (or unreadable: the next full write replaces it)
	}
	v.ProvisioningStatus = status
	enc, err := annotations.Encode(v)
	if err != nil {
		return err
	}
	return r.patchAnnotations(ctx, svc, map[string]*string{annotations.ServiceVIP: &enc})
}

func (r *Reconciler) patchAnnotations(ctx context.Context, svc *corev1.Service, want map[string]*string) error {
	changes := annotations.Changes(svc.Annotations, want)
	if len(changes) == 0 {
		return nil
	}
	body, err := annotations.MergePatch(changes)
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(r.Client.Patch(ctx, svc, client.RawPatch(types.MergePatchType, body), client.FieldOwner(annotations.FieldManager)))
}

// Teardown deletes every OpenStack object of the service with this UID: the floating IP, the load balancer
// (cascade) and, once Octavia has let go of it, the VIP port. It returns false while Octavia is still
// deleting. The reconciler and the sweep both use it.
func Teardown(ctx context.Context, nm *neutron.Manager, lbc openstack.LoadBalancing, uid string) (bool, error) {
	tags := ownership.Owner{Cluster: nm.C.ID, Kind: ownership.KindService, UID: uid}.Tags()
	fips, err := nm.N.ListFloatingIPs(ctx, openstack.Filter{Tags: tags})
	if err != nil {
		return false, err
	}
	for _, f := range fips {
		if err := openstack.IgnoreNotFound(nm.N.DeleteFloatingIP(ctx, f.ID)); err != nil {
			return false, err
		}
	}
	lbs, err := lbc.ListLoadBalancers(ctx, tags)
	if err != nil {
		return false, err
	}
	for _, lb := range lbs {
		if lb.ProvisioningStatus == "PENDING_DELETE" {
			continue
		}
		if err := openstack.IgnoreNotFound(lbc.DeleteLoadBalancer(ctx, lb.ID)); err != nil && openstack.KindOf(err) != openstack.KindImmutable {
			return false, err
		}
	}
	if len(lbs) > 0 {
		return false, nil
	}
	ports, err := nm.N.ListPorts(ctx, openstack.Filter{Tags: tags})
	if err != nil {
		return false, err
	}
	for _, p := range ports {
		if err := openstack.IgnoreNotFound(nm.N.DeletePort(ctx, p.ID)); err != nil {
			return false, err
		}
		nm.X.DropPort(p.ID)
	}
	return true, nil
}

// subnetFor finds the namespace subnet that holds a pod address.
func (r *Reconciler) subnetFor(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	for _, nn := range r.Neutron.X.Networks() {
		if nn.Subnet == nil {
			continue
		}
		if p, err := netip.ParsePrefix(nn.Subnet.CIDR); err == nil && p.Contains(addr) {
			return nn.Subnet.ID
		}
	}
	return ""
}

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
