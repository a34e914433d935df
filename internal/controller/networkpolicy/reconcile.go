package networkpolicy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/policy"
	"github.com/raven-net/raven/pkg/annotations"
)

// Key is the one request the controller works on: every change anywhere brings the whole cluster in step.
var Key = reconcile.Request{}

// retry is how soon a reconcile that left work undone (a group still in use, a refused change) runs again.
const retry = 5 * time.Second

// portUpdateTimeout is the default PortUpdateTimeout: a port's group update takes well under a second
// on a quiet Neutron; this leaves room for a busy one.
const portUpdateTimeout = 15 * time.Second

// Reconciler keeps the cluster's policy groups and the pods' groups in step with the NetworkPolicies.
type Reconciler struct {
	Client   client.Client
	Neutron  *neutron.Manager
	State    *State
	Gate     *controller.Gate
	Recorder events.EventRecorder
	// ServiceCIDR and NodeCIDRs are what the base groups admit besides the pods (see policy.Infra).
	ServiceCIDR string
	NodeCIDRs   []string
	// Resync is how often the groups are checked against Neutron while policies exist.
	Resync time.Duration
	// SpareGroups is how many empty policy groups Raven keeps made while policies exist, so that a new policy
	// (or peer) takes one instead of waiting for a group to be made (0: none).
	SpareGroups int
	// LoadBalancers is what the Service controller last saw its load balancers serve: their members (a Service
	// port is admitted only where every backend its load balancer may send to is) and the floating IPs Raven made
	// for them (a Service's egress goes to those, besides its clusterIPs). Nil: none.
	LoadBalancers *octavia.Backends
	// PortUpdateTimeout bounds one port's group update (0: portUpdateTimeout). Neutron has been seen to
	// leave such a request unanswered; the whole cluster's enforcement waits on this reconcile, so it gives
	// up and tries again rather than wait for the general request deadline.
	PortUpdateTimeout time.Duration
	// spares refills the spare groups in the background, one refill at a time.
	spares spareRefill
	// clean: the last reconcile found no policy and no group, so the next one without policies has nothing
	// to do and asks Neutron nothing.
	clean bool
}

// Reconcile makes Neutron's policy groups and every pod port's groups match the policies as they are now.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if err := r.Gate.Wait(ctx); err != nil {
		return reconcile.Result{}, err
	}
	var nps networkingv1.NetworkPolicyList
	if err := r.Client.List(ctx, &nps); err != nil {
		return reconcile.Result{}, err
	}
	if len(nps.Items) == 0 && r.clean {
		return reconcile.Result{}, nil
	}
	start := time.Now()
	pods, res, err := r.translate(ctx, nps.Items)
	if err != nil {
		return reconcile.Result{}, err
	}
	want := res.Groups
	have, extra, err := r.readGroups(ctx, want, len(nps.Items))
	if err != nil {
		return reconcile.Result{}, err
	}
	read := time.Since(start)
	byPolicy := policiesByKey(nps.Items)
	spares, unfit := r.splitSpares(have, len(nps.Items) > 0)
	extra = append(extra, unfit...)
	ids, takes, refused := r.createGroups(ctx, want, have, byPolicy, spares)
	pending := len(refused) > 0
	grouped := time.Since(start)
	r.reportProblems(nps.Items, res)
	// Without policies and without groups there is nothing to enforce: the ports keep what they have.
	enforce := len(nps.Items) > 0 || len(have) > 0 || len(extra) > 0
	var changes []portChange
	if enforce {
		changes = r.portChanges(ctx, pods, res, ids)
	}
	rulesPending, err := r.syncRulesAndPorts(ctx, want, have, ids, refused, byPolicy, changes, takes)
	if err != nil {
		return reconcile.Result{}, err
	}
	logEnforced(ctx, len(changes), len(takes), start, read, grouped)
	pending = pending || rulesPending
	left := spares[len(takes):]
	deleted, recycled := r.cleanUp(ctx, want, have, extra, left, len(nps.Items) > 0)
	short := r.spareShort(ctx, len(nps.Items) > 0, len(left)+recycled, len(changes)+len(takes))
	r.clean = !enforce
	return r.result(pending || !deleted, short, len(nps.Items) > 0), nil
}

// logEnforced says how long a reconcile that moved ports or took spares took: to read the groups, to have them
// all, to enforce.
func logEnforced(ctx context.Context, ports, taken int, start time.Time, read, grouped time.Duration) {
	if ports == 0 && taken == 0 {
		return
	}
	klog.FromContext(ctx).V(2).Info("Enforced policies", "ports", ports, "sparesTaken", taken,
		"read", read.Round(time.Millisecond), "grouped", grouped.Round(time.Millisecond), "enforced", time.Since(start).Round(time.Millisecond))
}

// cleanUp deletes the groups nothing wants (extra, and those of have that want lacks); deleted is false when
// one is still in use. While policies exist and the spares (left) are short, a policy or peer group nothing
// wants becomes a spare instead (recycled counts them).
func (r *Reconciler) cleanUp(ctx context.Context, want map[string]policy.Group, have map[string]openstack.SecurityGroup,
	extra, left []openstack.SecurityGroup, policies bool) (deleted bool, recycled int) {
	var unwanted []openstack.SecurityGroup
	for _, key := range slices.Sorted(maps.Keys(have)) {
		if _, wanted := want[key]; !wanted {
			unwanted = append(unwanted, have[key])
		}
	}
	if policies {
		var rest []openstack.SecurityGroup
		recycled, rest = r.recycle(ctx, unwanted, slices.Concat(left, extra))
		unwanted = rest
	}
	return r.deleteGroups(ctx, append(extra, unwanted...)), recycled
}

// publish hands the pod controller the groups that stay (those about to go are no longer handed out), but
// for the ones withheld (their rules not in place), and the ones Neutron refused to make.
func (r *Reconciler) publish(ids map[string]string, want map[string]policy.Group, refused, withheld map[string]bool) {
	live := map[string]string{}
	for key, id := range ids {
		if _, wanted := want[key]; wanted && !withheld[key] {
			live[key] = id
		}
	}
	r.State.set(live, refused)
}

// result says when to look again: soon when something is left to do, after spareCalm when the spares are
// short (to refill them in a calm reconcile), after Resync while policies exist (rules someone changed in
// Neutron come back), else on the next change.
func (r *Reconciler) result(pending, short, policies bool) reconcile.Result {
	switch {
	case short:
		return reconcile.Result{RequeueAfter: spareCalm}
	case pending:
		return reconcile.Result{RequeueAfter: retry}
	case policies:
		return reconcile.Result{RequeueAfter: r.Resync}
	}
	return reconcile.Result{}
}

// translate reads the pods, namespaces, nodes and Services and translates the policies: an isolated pod
// admits its own node, and reaches a Service by its addresses where its egress rules admit the backends.
func (r *Reconciler) translate(ctx context.Context, nps []networkingv1.NetworkPolicy) ([]portPod, policy.Result, error) {
	var nss corev1.NamespaceList
	if err := r.Client.List(ctx, &nss); err != nil {
		return nil, policy.Result{}, err
	}
	var podList corev1.PodList
	if err := r.Client.List(ctx, &podList); err != nil {
		return nil, policy.Result{}, err
	}
	pods := portPods(podList.Items)
	in := make([]policy.Pod, 0, len(pods))
	for _, p := range pods {
		in = append(in, p.pod)
	}
	// The pods still waiting for their port count too: the groups they wait for (the one for their numbering
	// of a policy's named ports, the peer group of the number they give a port an egress rule names) are made
	// whether or not a pod with a port numbers it alike, whatever came first, the policy or the pods.
	all := slices.Concat(in, waitingPods(podList.Items))
	res := policy.Translate(nps, all, namespacesOf(nss.Items))
	nodes, err := nodeAddresses(ctx, r.Client, r.NodeCIDRs)
	if err != nil {
		return nil, policy.Result{}, err
	}
	policy.AdmitOwnNodes(&res, all, nodes)
	if len(nps) > 0 {
		services, err := readServices(ctx, r.Client, r.LoadBalancers, podsAt(in))
		if err != nil {
			return nil, policy.Result{}, err
		}
		policy.AdmitServices(&res, services)
	}
	return pods, res, nil
}

// addBaseGroups adds the base groups to want while there are policies.
func (r *Reconciler) addBaseGroups(ctx context.Context, want map[string]policy.Group, policies int) error {
	if policies == 0 {
		return nil
	}
	health, err := r.healthSources(ctx)
	if err != nil {
		return err
	}
	for _, g := range policy.BaseGroups(policy.Infra{ServiceCIDR: r.ServiceCIDR, PodPrefixes: r.Neutron.C.PodPrefixes, NodeCIDRs: r.NodeCIDRs, HealthSources: health}) {
		want[g.Key] = g
	}
	return nil
}

// readGroups reads the cluster's policy groups from Neutron and, at the same time, adds the base groups to
// want (which asks Neutron for the health-check sources): two requests at once, not one after the other.
func (r *Reconciler) readGroups(ctx context.Context, want map[string]policy.Group, policies int) (have map[string]openstack.SecurityGroup, extra []openstack.SecurityGroup, err error) {
	var wg sync.WaitGroup
	var baseErr error
	wg.Go(func() { baseErr = r.addBaseGroups(ctx, want, policies) })
	have, extra, err = policy.Read(ctx, r.Neutron.N, r.Neutron.C.ID)
	wg.Wait()
	if err = errors.Join(err, baseErr); err != nil {
		return nil, nil, err
	}
	return have, extra, nil
}

// createGroups finds the groups of want that Neutron lacks (into have): from the spares first, in order (their
// tags are written by syncRulesAndPorts, after the rules and ports), else made, a few requests at a time. It
// returns every group's ID by key, the spares taken, and the keys of the groups whose create was refused (to be
// asked again).
func (r *Reconciler) createGroups(ctx context.Context, want map[string]policy.Group, have map[string]openstack.SecurityGroup,
	byPolicy map[string]*networkingv1.NetworkPolicy, spares []openstack.SecurityGroup) (ids map[string]string, takes []take, refused map[string]bool) {
	log := klog.FromContext(ctx)
	ids, refused = map[string]string{}, map[string]bool{}
	for key, sg := range have {
		ids[key] = sg.ID
	}
	var mu sync.Mutex
	var missing []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if _, ok := have[key]; ok {
			continue
		}
		if len(takes) < len(spares) {
			sg := spares[len(takes)]
			takes = append(takes, take{sg: sg, group: want[key]})
			sg.Tags = nil
			have[key], ids[key] = sg, sg.ID
			log.V(2).Info("Taking a spare policy group", "group", key, "id", sg.ID)
			continue
		}
		missing = append(missing, key)
	}
	// Groups first: rules name peer groups by ID.
	parallel(missing, func(key string) {
		sg, err := policy.Create(ctx, r.Neutron.N, r.Neutron.C.ID, want[key])
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			r.warnGroup(ctx, byPolicy, key, "PolicyGroupCreate", "creating the security group "+key, err)
			refused[key] = true
			return
		}
		log.V(2).Info("Created policy group", "group", key, "id", sg.ID)
		have[key], ids[key] = sg, sg.ID
	})
	return ids, takes, refused
}

// syncRulesAndPorts brings every wanted group's rules in line and gives the ports their groups, both at once, a few requests at a time each (each waits on Neutron's OVN transaction more than on Neutron itself).
// A port update that would put a port into a group whose rules are being narrowed waits until they are, so
// that no port is ever admitted by a rule on its way out; a group whose stale rules Neutron did not delete
// is then left out of the update (the port is more closed than its policies say until the next reconcile,
// never more open). Every other port update goes alongside the rules (a port that joins a group before its
// new rules are in is refused a little longer, never admitted more).
// The pod controller gets a group (publish) only once its rules are in place: none while they are being
// changed, and after the change every group but those whose stale rules stayed (Neutron refused to delete
// them); a group some of whose new rules were refused admits less than it should, and is handed out.
// It returns whether a rule change or a take was refused (to be asked again).
func (r *Reconciler) syncRulesAndPorts(ctx context.Context, want map[string]policy.Group, have map[string]openstack.SecurityGroup,
	ids map[string]string, refused map[string]bool, byPolicy map[string]*networkingv1.NetworkPolicy, changes []portChange, takes []take) (pending bool, err error) {
	var plans []keyedPlan
	narrowed, changing := map[string]bool{}, map[string]bool{}
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if sg, ok := have[key]; ok {
			p := policy.PlanRules(sg, want[key].Rules, ids)
			plans = append(plans, keyedPlan{key: key, plan: p})
			if len(p.Stale) > 0 {
				narrowed[sg.ID] = true
			}
			if len(p.Stale)+len(p.Add) > 0 {
				changing[key] = true
			}
		}
	}
	r.publish(ids, want, refused, changing)
	var now, later []portChange
	for _, c := range changes {
		if c.joins(narrowed) {
			later = append(later, c)
		} else {
			now = append(now, c)
		}
	}
	var wg sync.WaitGroup
	var stale map[string]bool
	wg.Go(func() {
		pending, stale = r.applyPlans(ctx, plans, byPolicy)
		r.publish(ids, want, refused, stale)
	})
	nowErr := r.updatePorts(ctx, now)
	wg.Wait()
	laterErr := r.updatePorts(ctx, withoutGroups(later, idsOf(stale, ids)))
	// The spares' tags come last: they matter only to the next reconcile, and every request beside the rules
	// and ports slows them down (Neutron serves them all from one worker here). A take whose tags never come
	// leaves a spare with rules, which is deleted and never handed out again.
	if r.takeSpares(ctx, takes, byPolicy) {
		pending = true
	}
	return pending, errors.Join(nowErr, laterErr)
}

// keyedPlan is a group's rule plan and the group's key.
type keyedPlan struct {
	key  string
	plan policy.Plan
}

// applyPlans applies the rule plans, a few at a time; pending is true when one was refused, and stale holds
// the keys of the groups some of whose stale rules Neutron did not delete.
func (r *Reconciler) applyPlans(ctx context.Context, plans []keyedPlan, byPolicy map[string]*networkingv1.NetworkPolicy) (pending bool, stale map[string]bool) {
	log := klog.FromContext(ctx)
	var mu sync.Mutex
	stale = map[string]bool{}
	parallel(plans, func(p keyedPlan) {
		added, removed, err := p.plan.Apply(ctx, r.Neutron.N)
		mu.Lock()
		defer mu.Unlock()
		if removed < len(p.plan.Stale) {
			stale[p.key] = true
		}
		if err != nil {
			r.warnGroup(ctx, byPolicy, p.key, "PolicyRules", "setting the rules of security group "+p.key, err)
			pending = true
			return
		}
		if added+removed > 0 {
			log.V(2).Info("Updated policy group rules", "group", p.key, "added", added, "removed", removed)
		}
	})
	return pending, stale
}

// idsOf are the IDs of the groups of keys.
func idsOf(keys map[string]bool, ids map[string]string) map[string]bool {
	out := make(map[string]bool, len(keys))
	for key := range keys {
		out[ids[key]] = true
	}
	return out
}

// withoutGroups leaves out of each change the groups (by ID) its port does not carry yet, and drops the
// changes left with nothing to change.
func withoutGroups(changes []portChange, groups map[string]bool) []portChange {
	if len(groups) == 0 {
		return changes
	}
	var out []portChange
	for _, c := range changes {
		want := slices.DeleteFunc(slices.Clone(c.want), func(id string) bool { return groups[id] && !slices.Contains(c.port.SecurityGroups, id) })
		if slices.Equal(slices.Sorted(slices.Values(c.port.SecurityGroups)), want) {
			continue
		}
		c.want = nonNil(want)
		out = append(out, c)
	}
	return out
}

// reportProblems raises a Warning on each policy for what its translation could not express.
func (r *Reconciler) reportProblems(nps []networkingv1.NetworkPolicy, res policy.Result) {
	for name, problems := range res.Problems {
		np := byName(nps, name)
		if np == nil {
			continue
		}
		for _, p := range problems {
			klog.Background().WithValues("networkPolicy", klog.KObj(np)).Info("Warning", "reason", "PolicyNotExpressible", "problem", p)
			controller.Warn(r.Recorder, np, "PolicyNotExpressible", "Reconcile", "translating the policy", errors.New(p))
		}
	}
}

// deleteGroups deletes groups nothing wants; false when one is still in use (a port the next reconcile
// moves off it).
func (r *Reconciler) deleteGroups(ctx context.Context, groups []openstack.SecurityGroup) bool {
	log := klog.FromContext(ctx)
	done := true
	for _, sg := range groups {
		if err := openstack.IgnoreNotFound(r.Neutron.N.DeleteSecurityGroup(ctx, sg.ID)); err != nil {
			log.V(2).Info("Policy group not deleted yet", "id", sg.ID, "err", err.Error())
			done = false
			continue
		}
		log.V(2).Info("Deleted policy group", "id", sg.ID)
	}
	return done
}

// portPod is a pod with a port: what the translation needs, its UID to find its ports, and the object
// (for events).
type portPod struct {
	pod policy.Pod
	uid string
	obj *corev1.Pod
}

// portPods are the pods whose port annotation names an address.
func portPods(items []corev1.Pod) []portPod {
	var out []portPod
	for i := range items {
		p := &items[i]
		var port annotations.Port
		if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &port); !ok || err != nil || len(port.FixedIPs) == 0 {
			continue
		}
		out = append(out, portPod{pod: podOf(p, port.FixedIPs[0].IPAddress), uid: string(p.UID), obj: p})
	}
	return out
}

// waitingPods are the pods that need a port and have none yet (no address in their annotation), as the
// translation sees them: without an address.
func waitingPods(items []corev1.Pod) []policy.Pod {
	var out []policy.Pod
	for i := range items {
		p := &items[i]
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		var port annotations.Port
		if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &port); ok && err == nil && len(port.FixedIPs) > 0 {
			continue
		}
		out = append(out, podOf(p, ""))
	}
	return out
}

// portChange is a port whose groups differ from the ones its pod must carry.
type portChange struct {
	pod  string
	port openstack.Port
	want []string
}

// joins says whether the change puts the port into one of groups (by ID).
func (c portChange) joins(groups map[string]bool) bool {
	for _, id := range c.want {
		if groups[id] && !slices.Contains(c.port.SecurityGroups, id) {
			return true
		}
	}
	return false
}

// portChanges lists the ports whose groups differ from what their pods must carry. An isolated pod one of
// whose groups Neutron refused to make gets the ones that exist, never the cluster pod group: it is then
// more closed than its policies say, never more open, and a Warning on the pod says which groups it lacks
// (the reconcile asks Neutron again).
func (r *Reconciler) portChanges(ctx context.Context, pods []portPod, res policy.Result, ids map[string]string) []portChange {
	var changes []portChange
	for _, p := range pods {
		want, missing := policy.SecurityGroups(res.Pods[p.pod.Key()], r.Neutron.C.PodSecurityGroups, ids)
		want = nonNil(want)
		if len(missing) > 0 {
			r.warnMissing(ctx, p.obj, missing)
		}
		for _, port := range r.Neutron.X.PortsOf(p.uid) {
			if !slices.Equal(slices.Sorted(slices.Values(port.SecurityGroups)), want) {
				changes = append(changes, portChange{pod: p.pod.Key(), port: port, want: want})
			}
		}
	}
	return changes
}

// updatePorts gives each changed port its groups, one port update each, a few at a time.
func (r *Reconciler) updatePorts(ctx context.Context, changes []portChange) error {
	log := klog.FromContext(ctx)
	var mu sync.Mutex
	var errs []error
	timeout := cmp.Or(r.PortUpdateTimeout, portUpdateTimeout)
	parallel(changes, func(c portChange) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		updated, err := r.Neutron.N.UpdatePort(ctx, c.port.ID, openstack.PortUpdate{SecurityGroups: &c.want})
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("setting the security groups of port %s of pod %s: %w", c.port.ID, c.pod, err))
			mu.Unlock()
			return
		}
		r.Neutron.X.PutPort(r.Neutron.C.ID, *updated)
		log.V(3).Info("Set port groups", "pod", c.pod, "port", c.port.ID, "groups", c.want)
	})
	return errors.Join(errs...)
}

// inFlight is how many Neutron requests a reconcile has open at once.
const inFlight = 4

// parallel runs f on every item, inFlight at a time, and returns when all are done.
func parallel[T any](items []T, f func(T)) {
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(it)
		}()
	}
	wg.Wait()
}

// healthSources are the addresses of the network:distributed ports of the cluster's pod networks, where
// the OVN provider's health checks come from.
func (r *Reconciler) healthSources(ctx context.Context) ([]string, error) {
	nets := r.Neutron.X.Networks()
	if len(nets) == 0 {
		return nil, nil
	}
	ids := make([]string, len(nets))
	for i, nn := range nets {
		ids[i] = nn.Network.ID
	}
	ports, err := r.Neutron.N.ListPorts(ctx, openstack.Filter{DeviceOwner: "network:distributed", NetworkIDs: ids})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ports {
		for _, ip := range p.FixedIPs {
			if a, err := netip.ParseAddr(ip.IPAddress); err == nil && a.Is4() {
				out = append(out, ip.IPAddress)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func policiesByKey(items []networkingv1.NetworkPolicy) map[string]*networkingv1.NetworkPolicy {
	out := map[string]*networkingv1.NetworkPolicy{}
	for i := range items {
		out[policy.KeyOf(&items[i])] = &items[i]
	}
	return out
}

func byName(items []networkingv1.NetworkPolicy, name string) *networkingv1.NetworkPolicy {
	for i := range items {
		if items[i].Namespace+"/"+items[i].Name == name {
			return &items[i]
		}
	}
	return nil
}

// warnGroup reports a failure on a group: on its policy for a policy group (its own or one for the pods that
// give its named ports some numbers), in the log for the others.
func (r *Reconciler) warnGroup(ctx context.Context, byPolicy map[string]*networkingv1.NetworkPolicy, key, reason, what string, err error) {
	if np, ok := byPolicy[policy.OwnerKey(key)]; ok {
		r.warn(np, reason, what, err)
		return
	}
	klog.FromContext(ctx).Error(err, "Policy group", "group", key, "what", what)
	if strings.HasPrefix(key, "peer-") {
		// A peer group may serve several policies; which ones is not kept, so every policy hears about it.
		for _, np := range byPolicy {
			r.warn(np, reason, what, err)
		}
	}
}

// warnMissing says on a pod that it runs without some of its policies' groups, and so admits less than they
// say until Neutron makes them.
func (r *Reconciler) warnMissing(ctx context.Context, pod *corev1.Pod, missing []string) {
	err := fmt.Errorf("security groups %s could not be made; the pod admits only what its other groups admit until they are", strings.Join(missing, ", "))
	klog.FromContext(ctx).Info("Warning", "pod", klog.KObj(pod), "reason", "PolicyGroupsMissing", "missing", missing)
	controller.Warn(r.Recorder, pod, "PolicyGroupsMissing", "Reconcile", "isolating the pod", err)
}

func (r *Reconciler) warn(np *networkingv1.NetworkPolicy, reason, what string, err error) {
	klog.Background().WithValues("networkPolicy", klog.KObj(np)).Info("Warning", "reason", reason, "what", what, "err", err.Error())
	controller.Warn(r.Recorder, np, controller.Reason(reason, err), "Reconcile", what, err)
}
