package octavia

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/openstack"
)

func ptr[T any](v T) *T { return &v }

func service(affinity corev1.ServiceAffinity, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"},
		Spec:       corev1.ServiceSpec{Ports: ports, SessionAffinity: affinity, ClusterIP: "10.0.0.10"},
	}
}

func slice(portName string, port int32, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr(portName), Port: ptr(port)}},
		Endpoints:   eps,
	}
}

func ep(ip string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready)}}
}

func subnet(string) string { return "sub" }

// probe is the monitor the tests' settings give a pool (delay 2 s, but 3 s for UDP-CONNECT).
func probe(typ string) *openstack.MonitorSpec {
	delay := 2
	if typ == "UDP-CONNECT" {
		delay = 3
	}
	return &openstack.MonitorSpec{Type: typ, Delay: delay, Timeout: 1, MaxRetries: 1, MaxRetriesDown: 2}
}

func TestDesired(t *testing.T) {
	cases := []struct {
		name     string
		provider string // amphora when empty
		monitor  bool   // health monitors on
		svc      *corev1.Service
		slices   []discoveryv1.EndpointSlice
		want     []Listener
		problems int
	}{
		{
			name:   "one port gives one TCP listener with the ready endpoints as members",
			svc:    service("", corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}),
			slices: []discoveryv1.EndpointSlice{slice("", 8080, ep("10.244.0.3", true), ep("10.244.0.2", true), ep("10.244.0.9", false))},
			want: []Listener{{Name: "ns/demo:80", Protocol: "TCP", Port: 80, Algorithm: "ROUND_ROBIN", Members: []openstack.MemberSpec{
				{Address: "10.244.0.2", ProtocolPort: 8080, SubnetID: "sub"}, {Address: "10.244.0.3", ProtocolPort: 8080, SubnetID: "sub"},
			}}},
		},
		{
			name: "ClientIP affinity selects SOURCE_IP and named ports match by name",
			svc: service(corev1.ServiceAffinityClientIP,
				corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
				corev1.ServicePort{Name: "web", Port: 80, Protocol: corev1.ProtocolTCP}),
			slices: []discoveryv1.EndpointSlice{slice("dns", 5353, ep("10.244.0.2", true)), slice("web", 8080, ep("10.244.0.2", true))},
			want: []Listener{
				{Name: "ns/demo:53", Protocol: "UDP", Port: 53, Algorithm: "SOURCE_IP", Members: []openstack.MemberSpec{{Address: "10.244.0.2", ProtocolPort: 5353, SubnetID: "sub"}}},
				{Name: "ns/demo:80", Protocol: "TCP", Port: 80, Algorithm: "SOURCE_IP", Members: []openstack.MemberSpec{{Address: "10.244.0.2", ProtocolPort: 8080, SubnetID: "sub"}}},
			},
		},
		{
			name:     "an unsupported protocol is reported and the other ports still served",
			svc:      service("", corev1.ServicePort{Port: 80, Protocol: "HTTP3"}, corev1.ServicePort{Name: "b", Port: 81}),
			want:     []Listener{{Name: "ns/demo:81", Protocol: "TCP", Port: 81, Algorithm: "ROUND_ROBIN"}},
			problems: 1,
		},
		{
			name:   "an endpoint listed in two slices is one member",
			svc:    service("", corev1.ServicePort{Port: 80}),
			slices: []discoveryv1.EndpointSlice{slice("", 80, ep("10.244.0.2", true)), slice("", 80, ep("10.244.0.2", true))},
			want:   []Listener{{Name: "ns/demo:80", Protocol: "TCP", Port: 80, Algorithm: "ROUND_ROBIN", Members: []openstack.MemberSpec{{Address: "10.244.0.2", ProtocolPort: 80, SubnetID: "sub"}}}},
		},
		{
			name:     "the ovn provider balances with SOURCE_IP_PORT, the one algorithm it has",
			provider: "ovn",
			svc:      service("", corev1.ServicePort{Port: 80}),
			slices:   []discoveryv1.EndpointSlice{slice("", 80, ep("10.244.0.2", true))},
			want:     []Listener{{Name: "ns/demo:80", Protocol: "TCP", Port: 80, Algorithm: "SOURCE_IP_PORT", Members: []openstack.MemberSpec{{Address: "10.244.0.2", ProtocolPort: 80, SubnetID: "sub"}}, OneByOne: true}},
		},
		{
			name:     "ClientIP affinity on the ovn provider is reported and balanced with SOURCE_IP_PORT",
			provider: "ovn",
			svc:      service(corev1.ServiceAffinityClientIP, corev1.ServicePort{Port: 80}),
			want:     []Listener{{Name: "ns/demo:80", Protocol: "TCP", Port: 80, Algorithm: "SOURCE_IP_PORT", OneByOne: true}},
			problems: 1,
		},
		{
			name:     "with monitors on, ovn probes TCP and UDP, and SCTP goes unprobed",
			provider: "ovn",
			monitor:  true,
			svc: service("", corev1.ServicePort{Name: "a", Port: 80}, corev1.ServicePort{Name: "b", Port: 53, Protocol: corev1.ProtocolUDP},
				corev1.ServicePort{Name: "c", Port: 9, Protocol: corev1.ProtocolSCTP}),
			want: []Listener{
				{Name: "ns/demo:80", Protocol: "TCP", Port: 80, Algorithm: "SOURCE_IP_PORT", Monitor: probe("TCP"), OneByOne: true},
				{Name: "ns/demo:53", Protocol: "UDP", Port: 53, Algorithm: "SOURCE_IP_PORT", Monitor: probe("UDP-CONNECT"), OneByOne: true},
				{Name: "ns/demo:9", Protocol: "SCTP", Port: 9, Algorithm: "SOURCE_IP_PORT", OneByOne: true},
			},
		},
		{
			name:    "with monitors on, amphora probes SCTP too",
			monitor: true,
			svc:     service("", corev1.ServicePort{Name: "c", Port: 9, Protocol: corev1.ProtocolSCTP}),
			want:    []Listener{{Name: "ns/demo:9", Protocol: "SCTP", Port: 9, Algorithm: "ROUND_ROBIN", Monitor: probe("SCTP")}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prov, err := ProviderNamed(cmp.Or(tc.provider, "amphora"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.monitor {
				prov.Monitor = &Monitor{Delay: 2, UDPConnectDelay: 3, Timeout: 1, MaxRetries: 1, MaxRetriesDown: 2}
			}
			got, problems := Desired(tc.svc, tc.slices, subnet, prov)
			if !reflect.DeepEqual(got, tc.want) || len(problems) != tc.problems {
				t.Fatalf("Desired = %+v, %v\nwant %+v with %d problems", got, problems, tc.want, tc.problems)
			}
		})
	}
}

// deleteLB records what Delete asks of Octavia for one status tree.
type deleteLB struct {
	openstack.LoadBalancing
	tree                            openstack.StatusTree
	replaced, deleted, monitorsGone []string
}

func (d *deleteLB) LoadBalancerStatus(context.Context, string) (openstack.StatusTree, error) {
	return d.tree, nil
}

func (d *deleteLB) ReplaceMembers(_ context.Context, poolID string, _ []openstack.MemberSpec) error {
	d.replaced = append(d.replaced, poolID)
	return nil
}

func (d *deleteLB) DeleteMonitor(_ context.Context, id string) error {
	d.monitorsGone = append(d.monitorsGone, id)
	return nil
}

func (d *deleteLB) DeleteLoadBalancer(_ context.Context, id string) error {
	d.deleted = append(d.deleted, id)
	return nil
}

func TestDeleteMembersFirst(t *testing.T) {
	monitored := map[string]openstack.MonitorStatus{"p1": {ID: "hm1"}, "p2": {ID: "hm2"}}
	member := func(status string) openstack.Member {
		return openstack.Member{Address: "10.244.0.2", ProtocolPort: 80, ProvisioningStatus: status}
	}
	cases := []struct {
		name              string
		lbStatus          string
		members           map[string][]openstack.Member
		replaced, deleted []string
	}{
		{"the first monitored pool with members loses them", "ACTIVE", map[string][]openstack.Member{"p1": {member("ACTIVE")}, "p2": {member("ACTIVE")}}, []string{"p1"}, nil},
		{"then the next", "ACTIVE", map[string][]openstack.Member{"p2": {member("ACTIVE")}}, []string{"p2"}, nil},
		{"without members it goes", "ACTIVE", map[string][]openstack.Member{}, nil, []string{"lb"}},
		{"busy, nothing is sent", "PENDING_UPDATE", map[string][]openstack.Member{"p1": {member("ACTIVE")}}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &deleteLB{tree: openstack.StatusTree{Members: tc.members, Monitors: monitored}}
			prov, _ := ProviderNamed("ovn")
			prov.MembersFirst = true // octavia.deleteMembersFirst
			if err := Delete(context.Background(), d, prov, openstack.LoadBalancer{ID: "lb", ProvisioningStatus: tc.lbStatus}, nil); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.replaced, tc.replaced) || !reflect.DeepEqual(d.deleted, tc.deleted) {
				t.Fatalf("members removed from %v, deleted %v; want %v, %v", d.replaced, d.deleted, tc.replaced, tc.deleted)
			}
		})
	}
}

func TestDeleteMonitorsFirst(t *testing.T) {
	members := map[string][]openstack.Member{"p1": {{Address: "10.244.0.2", ProtocolPort: 80, ProvisioningStatus: "ACTIVE"}}}
	cases := []struct {
		name                  string
		lbStatus              string
		monitors              map[string]openstack.MonitorStatus
		monitorsGone, deleted []string
	}{
		{"the first monitor goes", "ACTIVE", map[string]openstack.MonitorStatus{"p2": {ID: "hm2"}, "p1": {ID: "hm1"}}, []string{"hm1"}, nil},
		{"busy, nothing is sent", "PENDING_UPDATE", map[string]openstack.MonitorStatus{"p1": {ID: "hm1"}}, nil, nil},
		{"without monitors the load balancer goes, members and all", "ACTIVE", map[string]openstack.MonitorStatus{}, nil, []string{"lb"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &deleteLB{tree: openstack.StatusTree{Members: members, Monitors: tc.monitors}}
			prov, _ := ProviderNamed("ovn")
			if err := Delete(context.Background(), d, prov, openstack.LoadBalancer{ID: "lb", ProvisioningStatus: tc.lbStatus}, nil); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.monitorsGone, tc.monitorsGone) || !reflect.DeepEqual(d.deleted, tc.deleted) || d.replaced != nil {
				t.Fatalf("monitors deleted %v, load balancers %v, members removed %v; want %v, %v, none", d.monitorsGone, d.deleted, d.replaced, tc.monitorsGone, tc.deleted)
			}
		})
	}
}

func TestExpireSettling(t *testing.T) {
	t0 := time.Unix(1000, 0)
	member := func(id, status string) openstack.Member {
		return openstack.Member{ID: id, Address: "10.244.0." + id, ProtocolPort: 80, ProvisioningStatus: status}
	}
	pending := map[string][]openstack.Member{"p1": {member("2", "PENDING_CREATE"), member("3", "PENDING_DELETE")}}
	progressed := map[string][]openstack.Member{"p1": {member("2", "ACTIVE"), member("3", "PENDING_DELETE")}}
	since := map[string]Settle{"gone": {Since: t0}}
	for _, tc := range []struct {
		at       time.Duration
		members  map[string][]openstack.Member
		settling bool
	}{
		{0, pending, true},                         // first seen
		{SettleLimit - time.Second, pending, true}, // still within the limit
		{SettleLimit, pending, false},              // no progress for the limit: sent again
		{SettleLimit + time.Second, pending, true}, // still pending after the resend: a new wait, not a resend per look
		{2*SettleLimit - time.Second, pending, true},
		{2*SettleLimit - time.Second/2, progressed, true}, // the provider made progress: a new wait
		{2 * SettleLimit, progressed, true},
		{3*SettleLimit - time.Second/2, progressed, false}, // no progress since: sent again
		{3 * SettleLimit, map[string][]openstack.Member{}, false},
		{3*SettleLimit + time.Second, pending, true}, // settling again: a new wait
	} {
		cur := Current{Members: tc.members}
		got := ExpireSettling(cur, nil, since, t0.Add(tc.at), SettleLimit)
		if s := len(Settling(got)) > 0; s != tc.settling {
			t.Fatalf("at %v: settling %v, want %v (since %v)", tc.at, s, tc.settling, since)
		}
		if _, ok := since["gone"]; ok {
			t.Fatal("a pool no longer settling stayed in since")
		}
		if len(Settling(cur)) != len(Settling(Current{Members: tc.members})) || (len(tc.members["p1"]) > 0 && tc.members["p1"][1].ProvisioningStatus != "PENDING_DELETE") {
			t.Fatal("ExpireSettling changed its argument")
		}
	}
}

func TestSettling(t *testing.T) {
	cur := Current{Members: map[string][]openstack.Member{
		"p1": {{ProvisioningStatus: "ACTIVE"}, {ProvisioningStatus: "PENDING_DELETE"}},
		"p2": {{ProvisioningStatus: "ACTIVE"}},
		"p0": {{ProvisioningStatus: "PENDING_UPDATE"}},
		"p3": {{ProvisioningStatus: "ERROR"}},
	}}
	if got := Settling(cur); !reflect.DeepEqual(got, []string{"p0", "p1"}) {
		t.Fatalf("Settling = %v, want [p0 p1]", got)
	}
}

func TestPlan(t *testing.T) {
	web := Listener{Protocol: "TCP", Port: 80, Algorithm: "ROUND_ROBIN", Members: []openstack.MemberSpec{{Address: "10.244.0.2", ProtocolPort: 80, SubnetID: "s"}}}
	l80 := openstack.Listener{ID: "l80", Protocol: "TCP", ProtocolPort: 80}
	p80 := openstack.Pool{ID: "p80", ListenerID: "l80", Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN"}
	monitored := web
	monitored.Monitor = &openstack.MonitorSpec{Type: "TCP", Delay: 2, Timeout: 1, MaxRetries: 1, MaxRetriesDown: 2}
	withMonitor := p80
	withMonitor.MonitorID = "hm80"
	slowOne := monitored
	slowOne.MonitorSlowsMembers = true
	slowOne.Members = append(slices.Clone(web.Members), openstack.MemberSpec{Address: "10.244.0.3", ProtocolPort: 80})
	slowThree := slowOne
	slowThree.Members = []openstack.MemberSpec{{Address: "10.244.0.4", ProtocolPort: 80}, {Address: "10.244.0.5", ProtocolPort: 80}}
	web443 := Listener{Protocol: "TCP", Port: 443, Algorithm: "ROUND_ROBIN", Members: web.Members}
	l443 := openstack.Listener{ID: "l443", Protocol: "TCP", ProtocolPort: 443}
	p443 := openstack.Pool{ID: "p443", ListenerID: "l443", Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN"}
	cases := []struct {
		name string
		want []Listener
		cur  Current
		plan []StepKind
	}{
		{"an empty load balancer gets a listener first", []Listener{web}, Current{}, []StepKind{CreateListener}},
		{"a listener without pool gets its pool", []Listener{web}, Current{Listeners: []openstack.Listener{l80}}, []StepKind{CreatePool}},
		{"a pool without the members gets them in one batch", []Listener{web}, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{p80}}, []StepKind{ReplaceMembers}},
		{"everything in place is no step", []Listener{web}, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{p80},
			Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.2", ProtocolPort: 80, SubnetID: "s"}}}}, nil},
		{"a removed port loses its pool, then its listener", nil, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{p80}}, []StepKind{DeletePool, DeleteListener}},
		{"a changed algorithm replaces the pool", []Listener{{Protocol: "TCP", Port: 80, Algorithm: "SOURCE_IP"}},
			Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{p80}}, []StepKind{DeletePool, CreatePool}},
		{"a pool without its monitor gets it after the members, last", []Listener{monitored, web443},
			Current{Listeners: []openstack.Listener{l80, l443}, Pools: []openstack.Pool{p80, p443}}, []StepKind{ReplaceMembers, ReplaceMembers, CreateMonitor}},
		{"a monitor waits until the provider has made the pool's members", []Listener{monitored}, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{p80},
			Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.2", ProtocolPort: 80, SubnetID: "s", ProvisioningStatus: "PENDING_CREATE"}}}}, nil},
		{"a pool whose members are made gets its monitor", []Listener{monitored}, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{p80},
			Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.2", ProtocolPort: 80, SubnetID: "s", ProvisioningStatus: "ACTIVE"}}}}, []StepKind{CreateMonitor}},
		{"a monitored pool in place is no step", []Listener{monitored}, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{withMonitor},
			Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.2", ProtocolPort: 80}}}}, nil},
		{"monitors turned off: the monitor goes", []Listener{web}, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{withMonitor},
			Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.2", ProtocolPort: 80}}}}, []StepKind{DeleteMonitor}},
		{"a new listener gets its monitor once its pool exists", []Listener{monitored}, Current{}, []StepKind{CreateListener}},
		{"on a slow provider, three member changes under a monitor drop it first", []Listener{slowThree}, Current{Listeners: []openstack.Listener{l80},
			Pools: []openstack.Pool{withMonitor}, Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.2", ProtocolPort: 80}}}}, []StepKind{DeleteMonitor}},
		{"on a slow provider, one member change keeps the monitor", []Listener{slowOne}, Current{Listeners: []openstack.Listener{l80},
			Pools: []openstack.Pool{withMonitor}, Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.2", ProtocolPort: 80}}}}, []StepKind{ReplaceMembers}},
		{"on a slow provider, without its monitor the members change, and the monitor comes back", []Listener{slowThree}, Current{Listeners: []openstack.Listener{l80},
			Pools: []openstack.Pool{p80}, Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.2", ProtocolPort: 80}}}}, []StepKind{ReplaceMembers, CreateMonitor}},
		{"a pool whose provider still removes a member gets no new member change", []Listener{web}, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{p80},
			Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.2", ProtocolPort: 80, SubnetID: "s", ProvisioningStatus: "ACTIVE"},
				{Address: "10.244.0.9", ProtocolPort: 80, SubnetID: "s", ProvisioningStatus: "PENDING_DELETE"}}}}, nil},
		{"a pool whose provider still adds a member gets no new member change", nil, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{p80},
			Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.9", ProtocolPort: 80, ProvisioningStatus: "PENDING_CREATE"}}}}, []StepKind{DeletePool, DeleteListener}},
		{"a pool the provider is done with gets the change", []Listener{web}, Current{Listeners: []openstack.Listener{l80}, Pools: []openstack.Pool{p80},
			Members: map[string][]openstack.Member{"p80": {{Address: "10.244.0.9", ProtocolPort: 80, SubnetID: "s", ProvisioningStatus: "ACTIVE"}}}}, []StepKind{ReplaceMembers}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []StepKind
			for _, s := range Plan(tc.want, tc.cur) {
				got = append(got, s.Kind)
			}
			if !reflect.DeepEqual(got, tc.plan) {
				t.Fatalf("Plan = %v, want %v", got, tc.plan)
			}
		})
	}
}

// TestADeleteMakingProgressIsNotSentAgain: 8.0.0 removes a deleted load balancer's members one at a time, each
// with a status report that shows the load balancer ACTIVE; while its members go, the delete is not sent again
// (at one a minute, each resend queued another pass over the 100 members of bench-services' load balancer).
func TestADeleteMakingProgressIsNotSentAgain(t *testing.T) {
	d := &Deletes{}
	t0 := time.Now()
	d.Sent("lb", t0, "100")
	for i, left := range []string{"80", "60", "40"} {
		at := t0.Add(time.Duration(i+1) * (DeleteResend - time.Second))
		if d.Due("lb", at, left) {
			t.Fatalf("%d members left at %s: due, though the delete makes progress", 100-20*(i+1), at.Sub(t0))
		}
	}
	last := t0.Add(3 * (DeleteResend - time.Second))
	if d.Due("lb", last.Add(DeleteResend-time.Second), "40") {
		t.Error("due within DeleteResend of the last progress")
	}
	if !d.Due("lb", last.Add(DeleteResend), "40") {
		t.Error("not due after DeleteResend without progress")
	}
}

// TestADeleteIsNotSentAgainWhileQueued: the provider turns a load balancer it has a delete queued for back to
// ACTIVE; Raven, asked again at once, sends nothing until DeleteResend has passed.
func TestADeleteIsNotSentAgainWhileQueued(t *testing.T) {
	d := &deleteLB{}
	deletes := &Deletes{}
	prov, _ := ProviderNamed("amphora")
	active := openstack.LoadBalancer{ID: "lb", ProvisioningStatus: "ACTIVE"}
	for range 3 {
		if err := Delete(context.Background(), d, prov, active, deletes); err != nil {
			t.Fatal(err)
		}
	}
	if len(d.deleted) != 1 {
		t.Fatalf("%d deletes sent, want 1", len(d.deleted))
	}
	failed := active
	failed.ProvisioningStatus = "ERROR"
	if err := Delete(context.Background(), d, prov, failed, deletes); err != nil || len(d.deleted) != 2 {
		t.Fatalf("a load balancer the provider failed to delete (ERROR): %d deletes sent (%v), want 2", len(d.deleted), err)
	}
	if deletes.Due("lb", time.Now().Add(DeleteResend/2), "") {
		t.Error("due again within DeleteResend")
	}
	if !deletes.Due("lb", time.Now().Add(DeleteResend), "") {
		t.Error("not due after DeleteResend")
	}
	if !deletes.Due("other", time.Now(), "") {
		t.Error("another load balancer's delete is held")
	}
	// The same for the health monitors deleted before their load balancer.
	m := &deleteLB{tree: openstack.StatusTree{Monitors: map[string]openstack.MonitorStatus{"p1": {ID: "hm1"}}}}
	ovn, _ := ProviderNamed("ovn")
	for range 3 {
		if err := Delete(context.Background(), m, ovn, active, deletes); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.monitorsGone) != 1 {
		t.Fatalf("%d deletes of the same health monitor sent, want 1", len(m.monitorsGone))
	}
	var none *Deletes
	if !none.Due("lb", time.Now(), "") {
		t.Error("a nil Deletes holds a delete")
	}
}
