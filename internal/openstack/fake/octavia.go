package fake

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

// Octavia is an in-memory openstack.LoadBalancing. Like Octavia, it locks a load balancer while it applies
// a change: after every write the load balancer is PENDING_* for PendingReads reads of it, and writes to it
// or its children meanwhile fail with 409 "immutable". Deleting a load balancer cascades.
type Octavia struct {
	mu  sync.Mutex
	seq int
	lbs map[string]*lbState
	// lists records every listing (Unscoped reads it).
	lists listings
	// Calls counts calls by method name (read it with Called while Raven runs); writes counts the ones that
	// change something (Wrote reads it).
	Calls  map[string]int
	writes int
	// Faults makes the named method fail with the error, Times times (forever when Times < 0).
	Faults map[string]*Fault
	// PendingReads is how many reads (GetLoadBalancer, or ListLoadBalancers listing it) show a changed load
	// balancer PENDING_* before it is ACTIVE again (or gone, after a delete); 0 applies changes at once,
	// a negative value never finishes them (a stuck Octavia).
	PendingReads int
	// Now is the clock for created_at and updated_at.
	Now func() time.Time
	// MonitorsFail makes the provider fail every health monitor it accepts: the monitor is created, and
	// goes to ERROR (the OVN provider without a network:distributed port on a member's network).
	MonitorsFail bool
	// UUIDs makes new IDs UUID-shaped, as Octavia's are (see Neutron.UUIDs).
	UUIDs bool
	// ix is nil until Index.
	ix *octIndex
}

// lbState is a load balancer with its children and its pending change.
type lbState struct {
	lb        openstack.LoadBalancer
	listeners []*openstack.Listener
	pools     []*openstack.Pool
	members   map[string][]openstack.Member      // by pool ID
	monitors  map[string]openstack.MonitorStatus // by pool ID
	// reads left before the pending change completes.
	reads int
}

// LoadBalancerState is a copy of one load balancer and everything under it, for tests to assert on.
type LoadBalancerState struct {
	openstack.LoadBalancer
	Listeners []openstack.Listener
	Pools     []openstack.Pool
	Members   map[string][]openstack.Member      // by pool ID
	Monitors  map[string]openstack.MonitorStatus // by pool ID
}

// NewOctavia returns an Octavia without load balancers whose changes complete at once.
func NewOctavia() *Octavia {
	return &Octavia{lbs: map[string]*lbState{}, Calls: map[string]int{}, Faults: map[string]*Fault{}, Now: time.Now}
}

// Fail makes method fail times times (forever when times < 0) with err.
func (o *Octavia) Fail(method string, times int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Faults[method] = &Fault{Err: err, Times: times}
}

// FailStatus makes method fail times times as Octavia answers with an HTTP status and a faultstring: the
// error is classified as the real client classifies that answer (501 is Unsupported, 403 with "Quota" is
// QuotaExceeded, 409 with "immutable" is Immutable, and so on).
func (o *Octavia) FailStatus(method string, times, status int, message string) {
	o.Fail(method, times, StatusError(opOf[method], status, message))
}

// StatusError is the error the real client returns when Octavia answers op (e.g. "octavia listener create")
// with status and this faultstring.
func StatusError(op string, status int, message string) error {
	return openstack.NewError(op, statusKind(status, message), status, message)
}

// statusKind mirrors the classification of internal/openstack for Octavia's answers; the package's tests
// check it against the real client.
func statusKind(status int, msg string) openstack.Kind {
	switch {
	case status == http.StatusNotFound:
		return openstack.KindNotFound
	case status == http.StatusConflict:
		return conflictKind(msg)
	case status == http.StatusForbidden && strings.Contains(msg, "Quota"):
		return openstack.KindQuota
	case strings.Contains(msg, "Insufficient prefix space"):
		return openstack.KindExhausted
	case status == http.StatusBadRequest && strings.Contains(msg, "SubnetAllocationError"):
		return openstack.KindExhausted
	case status == http.StatusBadRequest:
		return openstack.KindBadRequest
	case status == http.StatusUnauthorized:
		return openstack.KindUnauthorized
	case status == http.StatusForbidden:
		return openstack.KindForbidden
	case status == http.StatusNotImplemented:
		return openstack.KindUnsupported
	case status >= 500:
		return openstack.KindServer
	}
	return openstack.KindUnknown
}

// conflictKind mirrors the classification of a 409 by its message.
func conflictKind(msg string) openstack.Kind {
	switch {
	case strings.Contains(msg, "OverQuota"):
		return openstack.KindQuota
	case strings.Contains(msg, "IpAddressGenerationFailure") || strings.Contains(msg, "SubnetAllocationError") ||
		strings.Contains(msg, "No more IP") || strings.Contains(msg, "Insufficient prefix space"):
		return openstack.KindExhausted
	case strings.Contains(msg, "mmutable"):
		return openstack.KindImmutable
	}
	return openstack.KindConflict
}

// opOf names each method's request as the real client does in its errors.
var opOf = map[string]string{
	"ListLoadBalancers":  "octavia loadbalancer list",
	"GetLoadBalancer":    "octavia loadbalancer get",
	"CreateLoadBalancer": "octavia loadbalancer create",
	"DeleteLoadBalancer": "octavia loadbalancer delete",
	"ListListeners":      "octavia listener list",
	"CreateListener":     "octavia listener create",
	"DeleteListener":     "octavia listener delete",
	"ListPools":          "octavia pool list",
	"CreatePool":         "octavia pool create",
	"DeletePool":         "octavia pool delete",
	"ListMembers":        "octavia member list",
	"ReplaceMembers":     "octavia member batch_update",
	"CreateMember":       "octavia member create",
	"DeleteMember":       "octavia member delete",
	"CreateMonitor":      "octavia healthmonitor create",
	"DeleteMonitor":      "octavia healthmonitor delete",
}

// Called is how many calls of the methods o has had, read under o's lock.
func (o *Octavia) Called(methods ...string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return called(o.Calls, methods)
}

// Wrote is the number of calls so far that changed something, read under the lock.
func (o *Octavia) Wrote() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.writes
}

func (o *Octavia) enter(method string, write bool) error {
	o.Calls[method]++
	if write {
		o.writes++
	}
	if f := o.Faults[method]; f != nil && f.Times != 0 {
		if f.Times > 0 {
			f.Times--
		}
		return f.Err
	}
	return nil
}

func (o *Octavia) id(prefix string) string {
	o.seq++
	return newID(o.UUIDs, prefix, o.seq)
}

func octaviaNotFound(method, what, id string) error {
	return StatusError(opOf[method], http.StatusNotFound, fmt.Sprintf("%s %s not found.", what, id))
}

// read shows a load balancer to a reader: one read of a pending change is used up, and the change completes
// when none are left. It returns false when the read completed a delete.
func (o *Octavia) read(s *lbState) bool {
	if !strings.HasPrefix(s.lb.ProvisioningStatus, "PENDING_") || o.PendingReads < 0 {
		return true
	}
	if s.reads > 0 {
		s.reads--
		return true
	}
	return o.settle(s)
}

// settle completes the pending change of a load balancer; false when it was a delete.
func (o *Octavia) settle(s *lbState) bool {
	if s.lb.ProvisioningStatus == "PENDING_DELETE" {
		delete(o.lbs, s.lb.ID)
		o.ix.removeLB(s)
		return false
	}
	s.lb.ProvisioningStatus, s.lb.OperatingStatus = "ACTIVE", "ONLINE"
	for _, l := range s.listeners {
		l.ProvisioningStatus = "ACTIVE"
	}
	for _, p := range s.pools {
		p.ProvisioningStatus = "ACTIVE"
		s.members[p.ID] = slices.DeleteFunc(s.members[p.ID], func(m openstack.Member) bool { return m.ProvisioningStatus == "PENDING_DELETE" })
		for i := range s.members[p.ID] {
			s.members[p.ID][i].ProvisioningStatus = "ACTIVE"
		}
	}
	o.ix.recount(s)
	return true
}

// change starts a change of a load balancer: it is PENDING_<status> until PendingReads reads have seen it.
func (o *Octavia) change(s *lbState, status string) {
	s.lb.ProvisioningStatus = "PENDING_" + status
	if status != "CREATE" {
		s.lb.UpdatedAt = openstack.Time{Time: o.Now()}
	}
	s.reads = o.PendingReads
	o.ix.recount(s)
	if o.PendingReads == 0 {
		o.settle(s)
	}
}

// writable finds the load balancer a write goes to and refuses the write while the load balancer is
// PENDING_*, as Octavia does.
func (o *Octavia) writable(method, lbID string) (*lbState, error) {
	s, ok := o.lbs[lbID]
	if !ok {
		return nil, octaviaNotFound(method, "Load Balancer", lbID)
	}
	if strings.HasPrefix(s.lb.ProvisioningStatus, "PENDING_") {
		return nil, StatusError(opOf[method], http.StatusConflict, fmt.Sprintf("Load Balancer %s is immutable and cannot be updated.", lbID))
	}
	return s, nil
}

// HasTags says whether have holds every tag of want, as the tags filter of Neutron's and Octavia's lists does.
func HasTags(have, want []string) bool {
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

// ListLoadBalancers implements openstack.LoadBalancing: load balancers carrying all the tags.
func (o *Octavia) ListLoadBalancers(_ context.Context, tags []string) ([]openstack.LoadBalancer, error) {
	o.listed("ListLoadBalancers", tags)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("ListLoadBalancers", false); err != nil {
		return nil, err
	}
	var out []openstack.LoadBalancer
	for _, s := range o.sorted() {
		if HasTags(s.lb.Tags, tags) && o.read(s) {
			out = append(out, copyLB(s.lb))
		}
	}
	return out, nil
}

// GetLoadBalancer implements openstack.LoadBalancing.
func (o *Octavia) GetLoadBalancer(_ context.Context, id string) (*openstack.LoadBalancer, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("GetLoadBalancer", false); err != nil {
		return nil, err
	}
	s, ok := o.lbs[id]
	if !ok || !o.read(s) {
		return nil, octaviaNotFound("GetLoadBalancer", "Load Balancer", id)
	}
	lb := copyLB(s.lb)
	return &lb, nil
}

// CreateLoadBalancer implements openstack.LoadBalancing.
func (o *Octavia) CreateLoadBalancer(_ context.Context, spec openstack.LoadBalancerSpec) (*openstack.LoadBalancer, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("CreateLoadBalancer", true); err != nil {
		return nil, err
	}
	if spec.VipPortID == "" && spec.VipSubnetID == "" {
		return nil, StatusError(opOf["CreateLoadBalancer"], http.StatusBadRequest, "Validation failure: VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id.")
	}
	now := o.Now()
	s := &lbState{lb: openstack.LoadBalancer{
		ID: o.id("lb"), Name: spec.Name, Description: spec.Description, VipAddress: spec.VipAddress,
		VipPortID: spec.VipPortID, VipSubnetID: spec.VipSubnetID, OperatingStatus: "OFFLINE", Provider: "amphora",
		Tags: slices.Clone(spec.Tags), CreatedAt: openstack.Time{Time: now},
	}, members: map[string][]openstack.Member{}, monitors: map[string]openstack.MonitorStatus{}}
	if spec.Provider != "" {
		s.lb.Provider = spec.Provider
	}
	if spec.VipPortID == "" {
		// The provider makes the VIP port (a real Octavia asks Neutron; the fake only names one).
		s.lb.VipPortID = o.id("vip-port")
	}
	for _, g := range spec.Listeners {
		if err := o.addGraph(s, g); err != nil {
			return nil, err
		}
	}
	o.lbs[s.lb.ID] = s
	o.ix.addLB(s)
	o.change(s, "CREATE")
	lb := copyLB(s.lb)
	return &lb, nil
}

// addGraph adds one listener of a fully populated create, with its pool and members, checked as the single
// creates check them.
func (o *Octavia) addGraph(s *lbState, g openstack.ListenerGraph) error {
	const method = "CreateLoadBalancer"
	if err := checkPort(method, g.Listener.ProtocolPort); err != nil {
		return err
	}
	if err := checkAlgorithm(method, s.lb.Provider, g.Pool.LBAlgorithm); err != nil {
		return err
	}
	for _, p := range s.pools {
		if p.Name == g.Pool.Name {
			return StatusError(opOf[method], http.StatusBadRequest, "Validation failure: Pool names must be unique when creating a fully populated loadbalancer.")
		}
	}
	l := &openstack.Listener{ID: o.id("listener"), Name: g.Listener.Name, Protocol: g.Listener.Protocol,
		ProtocolPort: g.Listener.ProtocolPort, ProvisioningStatus: "PENDING_CREATE", Tags: slices.Clone(g.Listener.Tags)}
	p := o.newPool(g.Pool, l)
	for _, m := range g.Members {
		s.members[p.ID] = append(s.members[p.ID], openstack.Member{ID: o.id("member"), Name: m.Name, Address: m.Address,
			ProtocolPort: m.ProtocolPort, SubnetID: m.SubnetID, ProvisioningStatus: "PENDING_CREATE"})
	}
	s.listeners = append(s.listeners, l)
	s.pools = append(s.pools, p)
	return nil
}

// newPool is the default pool of listener l, as spec asks.
func (o *Octavia) newPool(spec openstack.PoolSpec, l *openstack.Listener) *openstack.Pool {
	p := &openstack.Pool{ID: o.id("pool"), Name: spec.Name, Protocol: spec.Protocol, LBAlgorithm: spec.LBAlgorithm,
		ListenerID: l.ID, ProvisioningStatus: "PENDING_CREATE", Tags: slices.Clone(spec.Tags)}
	p.Listeners = append(p.Listeners, struct {
		ID string `json:"id"`
	}{l.ID})
	if spec.SourceIP {
		p.SessionPersistence = &openstack.SessionPersistence{Type: "SOURCE_IP"}
	}
	l.DefaultPoolID = p.ID
	return p
}

// checkPort answers as Octavia does to a listener port out of range.
func checkPort(method string, port int) error {
	if port < 1 || port > 65535 {
		return StatusError(opOf[method], http.StatusBadRequest, fmt.Sprintf("Invalid input for field/attribute protocol_port. Value: '%d'.", port))
	}
	return nil
}

// checkAlgorithm answers as Octavia does to an algorithm it does not know, and as the OVN provider does to
// one it lacks.
func checkAlgorithm(method, provider, algorithm string) error {
	if !slices.Contains([]string{"ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT"}, algorithm) {
		return StatusError(opOf[method], http.StatusBadRequest, fmt.Sprintf("Invalid input for field/attribute lb_algorithm. Value: '%s'.", algorithm))
	}
	if provider == "ovn" && algorithm != "SOURCE_IP_PORT" {
		return StatusError(opOf[method], http.StatusBadRequest, fmt.Sprintf(
			"Provider 'ovn' does not support a requested option: OVN provider does not support %s algorithm", algorithm))
	}
	return nil
}

// DeleteLoadBalancer implements openstack.LoadBalancing: the delete cascades to listeners, pools and members.
func (o *Octavia) DeleteLoadBalancer(_ context.Context, id string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("DeleteLoadBalancer", true); err != nil {
		return err
	}
	s, err := o.writable("DeleteLoadBalancer", id)
	if err != nil {
		return err
	}
	for _, l := range s.listeners {
		l.ProvisioningStatus = "PENDING_DELETE"
	}
	for _, p := range s.pools {
		p.ProvisioningStatus = "PENDING_DELETE"
	}
	o.change(s, "DELETE")
	return nil
}

// ListListeners implements openstack.LoadBalancing.
func (o *Octavia) ListListeners(_ context.Context, lbID string) ([]openstack.Listener, error) {
	o.listed("ListListeners", nil, lbID)
	return o.listListeners(lbID, nil)
}

// ListTaggedListeners implements openstack.LoadBalancing: the listeners of every load balancer carrying all
// the tags (counted as ListListeners).
func (o *Octavia) ListTaggedListeners(_ context.Context, tags []string) ([]openstack.Listener, error) {
	o.listed("ListTaggedListeners", tags)
	return o.listListeners("", tags)
}

// listListeners lists the listeners carrying all the tags of the load balancer lbID ("": of every one), each
// naming its load balancer, as Octavia's listener list does.
func (o *Octavia) listListeners(lbID string, tags []string) ([]openstack.Listener, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("ListListeners", false); err != nil {
		return nil, err
	}
	var out []openstack.Listener
	for _, s := range o.states(lbID) {
		for _, l := range s.listeners {
			if HasTags(l.Tags, tags) {
				c := copyListener(*l)
				c.LoadBalancers = []openstack.IDRef{{ID: s.lb.ID}}
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// CreateListener implements openstack.LoadBalancing: one listener per protocol and port on a load balancer.
func (o *Octavia) CreateListener(_ context.Context, spec openstack.ListenerSpec) (*openstack.Listener, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("CreateListener", true); err != nil {
		return nil, err
	}
	if err := checkPort("CreateListener", spec.ProtocolPort); err != nil {
		return nil, err
	}
	s, err := o.writable("CreateListener", spec.LoadBalancerID)
	if err != nil {
		return nil, err
	}
	for _, l := range s.listeners {
		if l.ProtocolPort == spec.ProtocolPort && (l.Protocol == spec.Protocol || l.Protocol != "UDP" && spec.Protocol != "UDP") {
			return nil, StatusError(opOf["CreateListener"], http.StatusConflict,
				fmt.Sprintf("Another Listener on this Load Balancer is already using protocol %s and protocol_port %d", l.Protocol, l.ProtocolPort))
		}
	}
	l := &openstack.Listener{ID: o.id("listener"), Name: spec.Name, Protocol: spec.Protocol, ProtocolPort: spec.ProtocolPort,
		ProvisioningStatus: "PENDING_CREATE", Tags: slices.Clone(spec.Tags)}
	s.listeners = append(s.listeners, l)
	o.ix.own(l.ID, s.lb.ID)
	o.change(s, "UPDATE")
	c := copyListener(*l)
	return &c, nil
}

// DeleteListener implements openstack.LoadBalancing. The listener's default pool stays on the load balancer,
// without a listener, as in Octavia.
func (o *Octavia) DeleteListener(_ context.Context, id string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("DeleteListener", true); err != nil {
		return err
	}
	s, i := o.findListener(id)
	if s == nil {
		return octaviaNotFound("DeleteListener", "Listener", id)
	}
	if _, err := o.writable("DeleteListener", s.lb.ID); err != nil {
		return err
	}
	s.listeners = slices.Delete(s.listeners, i, i+1)
	o.ix.disown(id)
	for _, p := range s.pools {
		if p.ListenerID == id {
			p.ListenerID, p.Listeners = "", nil
		}
	}
	o.change(s, "UPDATE")
	return nil
}

// ListPools implements openstack.LoadBalancing.
func (o *Octavia) ListPools(_ context.Context, lbID string) ([]openstack.Pool, error) {
	o.listed("ListPools", nil, lbID)
	return o.listPools(lbID, nil)
}

// ListTaggedPools implements openstack.LoadBalancing: the pools of every load balancer carrying all the tags
// (counted as ListPools).
func (o *Octavia) ListTaggedPools(_ context.Context, tags []string) ([]openstack.Pool, error) {
	o.listed("ListTaggedPools", tags)
	return o.listPools("", tags)
}

// listPools lists the pools carrying all the tags of the load balancer lbID ("": of every one), each naming
// its load balancer, as Octavia's pool list does.
func (o *Octavia) listPools(lbID string, tags []string) ([]openstack.Pool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("ListPools", false); err != nil {
		return nil, err
	}
	var out []openstack.Pool
	for _, s := range o.states(lbID) {
		for _, p := range s.pools {
			if HasTags(p.Tags, tags) {
				c := copyPool(*p)
				c.LoadBalancers = []openstack.IDRef{{ID: s.lb.ID}}
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// states are the load balancer lbID's state, when it exists, or every load balancer's when lbID is "" (as a list
// without a loadbalancer_id filter); called under the lock.
func (o *Octavia) states(lbID string) []*lbState {
	if lbID == "" {
		return o.sorted()
	}
	if s, ok := o.lbs[lbID]; ok {
		return []*lbState{s}
	}
	return nil
}

// CreatePool implements openstack.LoadBalancing: the pool becomes the listener's default pool; a listener
// has at most one.
func (o *Octavia) CreatePool(_ context.Context, spec openstack.PoolSpec) (*openstack.Pool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("CreatePool", true); err != nil {
		return nil, err
	}
	s, i := o.findListener(spec.ListenerID)
	if s == nil {
		return nil, octaviaNotFound("CreatePool", "Listener", spec.ListenerID)
	}
	if _, err := o.writable("CreatePool", s.lb.ID); err != nil {
		return nil, err
	}
	l := s.listeners[i]
	if l.DefaultPoolID != "" {
		return nil, StatusError(opOf["CreatePool"], http.StatusConflict, fmt.Sprintf("Listener %s already has a default pool", l.ID))
	}
	if err := checkAlgorithm("CreatePool", s.lb.Provider, spec.LBAlgorithm); err != nil {
		return nil, err
	}
	p := o.newPool(spec, l)
	s.pools = append(s.pools, p)
	o.ix.own(p.ID, s.lb.ID)
	o.change(s, "UPDATE")
	c := copyPool(*p)
	return &c, nil
}

// DeletePool implements openstack.LoadBalancing; the pool's members go with it.
func (o *Octavia) DeletePool(_ context.Context, id string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, i, err := o.enterPool("DeletePool", id, true)
	if err != nil {
		return err
	}
	if _, err := o.writable("DeletePool", s.lb.ID); err != nil {
		return err
	}
	o.ix.disown(id, s.pools[i].MonitorID)
	s.pools = slices.Delete(s.pools, i, i+1)
	delete(s.members, id)
	delete(s.monitors, id)
	for _, l := range s.listeners {
		if l.DefaultPoolID == id {
			l.DefaultPoolID = ""
		}
	}
	o.change(s, "UPDATE")
	return nil
}

// ListMembers implements openstack.LoadBalancing.
func (o *Octavia) ListMembers(_ context.Context, poolID string) ([]openstack.Member, error) {
	o.listed("ListMembers", nil, poolID)
	o.mu.Lock()
	defer o.mu.Unlock()
	s, _, err := o.enterPool("ListMembers", poolID, false)
	if err != nil {
		return nil, err
	}
	return slices.Clone(s.members[poolID]), nil
}

// LoadBalancerStatus implements openstack.LoadBalancing as Octavia's status tree does: the members of the
// pools that are on a listener, without their subnets, and the pools' health monitors.
func (o *Octavia) LoadBalancerStatus(_ context.Context, lbID string) (openstack.StatusTree, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter("LoadBalancerStatus", false); err != nil {
		return openstack.StatusTree{}, err
	}
	s, ok := o.lbs[lbID]
	if !ok {
		return openstack.StatusTree{}, octaviaNotFound("LoadBalancerStatus", "Load Balancer", lbID)
	}
	out := openstack.StatusTree{Members: map[string][]openstack.Member{}, Monitors: map[string]openstack.MonitorStatus{}}
	for _, l := range s.listeners {
		out.Listeners = append(out.Listeners, l.ID)
	}
	for _, p := range s.pools {
		if p.ListenerID == "" {
			continue
		}
		ms := make([]openstack.Member, 0, len(s.members[p.ID]))
		for _, m := range s.members[p.ID] {
			m.SubnetID = ""
			ms = append(ms, m)
		}
		out.Members[p.ID] = ms
		if hm, ok := s.monitors[p.ID]; ok {
			out.Monitors[p.ID] = hm
		}
	}
	return out, nil
}

// UDPConnectMinDelay is the shortest delay Octavia accepts for a UDP-CONNECT monitor by default (its
// [api_settings] udp_connect_min_interval_health_monitor).
const UDPConnectMinDelay = 3

// CreateMonitor implements openstack.LoadBalancing: a pool has at most one health monitor, and the OVN
// provider refuses the types it lacks.
func (o *Octavia) CreateMonitor(_ context.Context, spec openstack.MonitorSpec) error {
	const method = "CreateMonitor"
	o.mu.Lock()
	defer o.mu.Unlock()
	s, i, err := o.enterPool(method, spec.PoolID, true)
	if err != nil {
		return err
	}
	if _, err := o.writable(method, s.lb.ID); err != nil {
		return err
	}
	p := s.pools[i]
	if p.MonitorID != "" {
		return StatusError(opOf[method], http.StatusConflict, fmt.Sprintf("Pool %s already has a health monitor", p.ID))
	}
	if msg := monitorRefusal(s.lb.Provider, spec); msg != "" {
		return StatusError(opOf[method], http.StatusBadRequest, msg)
	}
	p.MonitorID = o.id("healthmonitor")
	o.ix.own(p.MonitorID, s.lb.ID)
	status := "ACTIVE"
	if o.MonitorsFail {
		status = "ERROR"
	}
	s.monitors[p.ID] = openstack.MonitorStatus{ID: p.MonitorID, Type: spec.Type, ProvisioningStatus: status, OperatingStatus: "ONLINE"}
	o.change(s, "UPDATE")
	return nil
}

// DeleteMonitor implements openstack.LoadBalancing.
func (o *Octavia) DeleteMonitor(_ context.Context, id string) error {
	const method = "DeleteMonitor"
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enter(method, true); err != nil {
		return err
	}
	s, p := o.findMonitor(id)
	if s == nil {
		return octaviaNotFound(method, "Health Monitor", id)
	}
	if _, err := o.writable(method, s.lb.ID); err != nil {
		return err
	}
	p.MonitorID = ""
	delete(s.monitors, p.ID)
	o.ix.disown(id)
	o.change(s, "UPDATE")
	return nil
}

// invalidMember refuses, as Octavia does, a member without an address or with a port out of range.
func invalidMember(method string, m openstack.MemberSpec) error {
	if m.Address == "" || m.ProtocolPort < 1 || m.ProtocolPort > 65535 {
		return StatusError(opOf[method], http.StatusBadRequest, fmt.Sprintf("Invalid input for member %q port %d.", m.Address, m.ProtocolPort))
	}
	return nil
}

// CreateMember implements openstack.LoadBalancing: the member is PENDING_CREATE until the change completes.
func (o *Octavia) CreateMember(_ context.Context, poolID string, m openstack.MemberSpec) error {
	const method = "CreateMember"
	o.mu.Lock()
	defer o.mu.Unlock()
	s, _, err := o.enterPool(method, poolID, true)
	if err != nil {
		return err
	}
	if _, err := o.writable(method, s.lb.ID); err != nil {
		return err
	}
	if err := invalidMember(method, m); err != nil {
		return err
	}
	if slices.ContainsFunc(s.members[poolID], func(have openstack.Member) bool {
		return have.Address == m.Address && have.ProtocolPort == m.ProtocolPort
	}) {
		return StatusError(opOf[method], http.StatusConflict, "Another member on this pool is already using ip "+m.Address)
	}
	s.members[poolID] = append(s.members[poolID], openstack.Member{ID: o.id("member"), Name: m.Name, Address: m.Address,
		ProtocolPort: m.ProtocolPort, SubnetID: m.SubnetID, ProvisioningStatus: "PENDING_CREATE"})
	o.change(s, "UPDATE")
	return nil
}

// DeleteMember implements openstack.LoadBalancing: the member is PENDING_DELETE until the change completes.
func (o *Octavia) DeleteMember(_ context.Context, poolID, memberID string) error {
	const method = "DeleteMember"
	o.mu.Lock()
	defer o.mu.Unlock()
	s, _, err := o.enterPool(method, poolID, true)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(s.members[poolID], func(m openstack.Member) bool { return m.ID == memberID })
	if i < 0 {
		return octaviaNotFound(method, "Member", memberID)
	}
	if _, err := o.writable(method, s.lb.ID); err != nil {
		return err
	}
	s.members[poolID][i].ProvisioningStatus = "PENDING_DELETE"
	o.change(s, "UPDATE")
	return nil
}

// ReplaceMembers implements openstack.LoadBalancing: the batch update. A member already in the pool (same
// address and port) keeps its ID.
func (o *Octavia) ReplaceMembers(_ context.Context, poolID string, members []openstack.MemberSpec) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, _, err := o.enterPool("ReplaceMembers", poolID, true)
	if err != nil {
		return err
	}
	if _, err := o.writable("ReplaceMembers", s.lb.ID); err != nil {
		return err
	}
	old := map[string]openstack.Member{}
	for _, m := range s.members[poolID] {
		old[fmt.Sprintf("%s:%d", m.Address, m.ProtocolPort)] = m
	}
	out := make([]openstack.Member, 0, len(members))
	seen := map[string]bool{}
	for _, m := range members {
		key := fmt.Sprintf("%s:%d", m.Address, m.ProtocolPort)
		if err := invalidMember("ReplaceMembers", m); err != nil {
			return err
		}
		switch {
		case seen[key]:
			return StatusError(opOf["ReplaceMembers"], http.StatusConflict, "Another member on this pool is already using ip "+m.Address)
		case m.SubnetID == "" && s.lb.Provider == "ovn":
			// The OVN provider looks for the subnet of the load balancer's VIP, which holds no pod.
			return StatusError(opOf["ReplaceMembers"], http.StatusNotImplemented, "Provider 'ovn' does not support a requested option: "+
				"Subnet is required, or Loadbalancer associated with Pool must have a subnet, for Member batch update with OVN Provider Driver if it is not the same as LB VIP subnet")
		}
		seen[key] = true
		nm := openstack.Member{Name: m.Name, Address: m.Address, ProtocolPort: m.ProtocolPort, SubnetID: m.SubnetID, ProvisioningStatus: "PENDING_CREATE"}
		if prev, ok := old[key]; ok {
			nm.ID, nm.ProvisioningStatus = prev.ID, "PENDING_UPDATE"
		} else {
			nm.ID = o.id("member")
		}
		out = append(out, nm)
	}
	s.members[poolID] = out
	o.change(s, "UPDATE")
	return nil
}

func (o *Octavia) findListener(id string) (*lbState, int) {
	for _, s := range o.holdersOf(id) {
		for i, l := range s.listeners {
			if l.ID == id {
				return s, i
			}
		}
	}
	return nil, -1
}

// enterPool counts a call of method (a write when write is set), fails it as o.Faults say, and finds the pool id
// with its load balancer, or fails it as Octavia does when there is none.
func (o *Octavia) enterPool(method, id string, write bool) (*lbState, int, error) {
	if err := o.enter(method, write); err != nil {
		return nil, -1, err
	}
	s, i := o.findPool(id)
	if s == nil {
		return nil, -1, octaviaNotFound(method, "Pool", id)
	}
	return s, i, nil
}

func (o *Octavia) findPool(id string) (*lbState, int) {
	for _, s := range o.holdersOf(id) {
		for i, p := range s.pools {
			if p.ID == id {
				return s, i
			}
		}
	}
	return nil, -1
}

func (o *Octavia) sorted() []*lbState {
	out := make([]*lbState, 0, len(o.lbs))
	if o.ix != nil {
		for _, id := range o.ix.lbs.after("") {
			if s, ok := o.lbs[id]; ok {
				out = append(out, s)
			}
		}
		return out
	}
	for _, s := range o.lbs {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *lbState) int { return strings.Compare(a.lb.ID, b.lb.ID) })
	return out
}

// LoadBalancers returns every load balancer with its children, without counting as calls or reads.
func (o *Octavia) LoadBalancers() []LoadBalancerState {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []LoadBalancerState
	for _, s := range o.sorted() {
		out = append(out, s.state())
	}
	return out
}

// state is a copy of the load balancer and everything under it.
func (s *lbState) state() LoadBalancerState {
	st := LoadBalancerState{LoadBalancer: copyLB(s.lb), Members: map[string][]openstack.Member{}, Monitors: map[string]openstack.MonitorStatus{}}
	for _, l := range s.listeners {
		st.Listeners = append(st.Listeners, copyListener(*l))
	}
	for _, p := range s.pools {
		st.Pools = append(st.Pools, copyPool(*p))
		st.Members[p.ID] = slices.Clone(s.members[p.ID])
		if hm, ok := s.monitors[p.ID]; ok {
			st.Monitors[p.ID] = hm
		}
	}
	return st
}

// Settle completes every pending change at once, as if Octavia had finished its work.
func (o *Octavia) Settle() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.sorted() {
		if strings.HasPrefix(s.lb.ProvisioningStatus, "PENDING_") {
			o.settle(s)
		}
	}
}

// SetMemberStatus gives every member with this address the provisioning status, until the next change of its
// load balancer settles: a provider that has not finished (or lost) a member change while the load balancer is
// ACTIVE again.
func (o *Octavia) SetMemberStatus(addr, status string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.lbs {
		for poolID, ms := range s.members {
			for i := range ms {
				if ms[i].Address == addr {
					s.members[poolID][i].ProvisioningStatus = status
				}
			}
		}
	}
}

// ResetCalls zeroes the call counters.
func (o *Octavia) ResetCalls() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Calls, o.writes = map[string]int{}, 0
}

func copyLB(lb openstack.LoadBalancer) openstack.LoadBalancer {
	lb.Tags = slices.Clone(lb.Tags)
	return lb
}

func copyListener(l openstack.Listener) openstack.Listener {
	l.Tags = slices.Clone(l.Tags)
	l.LoadBalancers = slices.Clone(l.LoadBalancers)
	return l
}

func copyPool(p openstack.Pool) openstack.Pool {
	p.Tags = slices.Clone(p.Tags)
	p.Listeners = slices.Clone(p.Listeners)
	p.LoadBalancers = slices.Clone(p.LoadBalancers)
	if p.SessionPersistence != nil {
		sp := *p.SessionPersistence
		p.SessionPersistence = &sp
	}
	return p
}

var _ openstack.LoadBalancing = (*Octavia)(nil)

// monitorRefusal is why Octavia answers 400 to a monitor create on provider, or "".
func monitorRefusal(provider string, spec openstack.MonitorSpec) string {
	switch {
	case provider == "ovn" && spec.Type != "TCP" && spec.Type != "UDP-CONNECT":
		return fmt.Sprintf("Provider 'ovn' does not support a requested option: OVN provider does not support %s health monitor type. Supported types: UDP-CONNECT, TCP", spec.Type)
	case spec.Type == "UDP-CONNECT" && spec.Delay < UDPConnectMinDelay:
		return fmt.Sprintf("Validation failure: The request delay value %d should be larger than %d for UDP-CONNECT health monitor type.", spec.Delay, UDPConnectMinDelay)
	case spec.Delay < 1 || spec.Timeout < 1 || spec.Timeout > spec.Delay || spec.MaxRetries < 1 || spec.MaxRetries > 10:
		return fmt.Sprintf("Invalid input: delay %d, timeout %d, max_retries %d", spec.Delay, spec.Timeout, spec.MaxRetries)
	}
	return ""
}
