package service

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

const clusterIP = "10.96.0.10"

// world is one cluster: a fake Neutron with the cluster's objects and a namespace network, a fake Octavia,
// and a fake Kubernetes API holding the objects of the test.
type world struct {
	r   *Reconciler
	n   *fake.Neutron
	o   *fake.Octavia
	m   *neutron.Manager
	c   client.Client
	rec *events.FakeRecorder
	// podSubnet is the namespace subnet the endpoints live on.
	podSubnet string
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	ctx := context.Background()
	n := fake.NewNeutron()
	cl, err := neutron.EnsureCluster(ctx, n, "c1", config.Neutron{ExternalNetwork: "public", ExternalSubnetCIDR: "172.24.4.0/24",
		PodSubnetPoolCIDR: "10.244.0.0/16", PodSubnetPrefixLength: 24, ServiceSubnetCIDR: "10.96.0.0/16"}, true)
	if err != nil {
		t.Fatal(err)
	}
	m := &neutron.Manager{N: n, C: cl, X: neutron.NewIndex()}
	nn, err := m.EnsureNamespace(ctx, "ns-uid", "ns")
	if err != nil {
		t.Fatal(err)
	}
	o := fake.NewOctavia()
	c := crfake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).WithStatusSubresource(&corev1.Service{}).Build()
	gate := controller.NewGate()
	gate.Open()
	rec := events.NewFakeRecorder(100)
	return &world{r: &Reconciler{Client: c, Neutron: m, LB: o, Provider: provider(t, "amphora"), Gate: gate, Recorder: rec, Backends: &octavia.Backends{},
		Class: config.DefaultLoadBalancerClass},
		n: n, o: o, m: m, c: c, rec: rec,
		podSubnet: nn.Subnet.ID}
}

func provider(t *testing.T, name string) octavia.Provider {
	t.Helper()
	p, err := octavia.ProviderNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// svcPort is a Service port with a named target port of the same name in the EndpointSlice.
type svcPort struct {
	name   string
	proto  corev1.Protocol
	port   int32
	target int32
}

var (
	http    = svcPort{"http", corev1.ProtocolTCP, 80, 8080}
	dns     = svcPort{"dns", corev1.ProtocolUDP, 53, 5353}
	metrics = svcPort{"metrics", corev1.ProtocolTCP, 9090, 9090}
)

func service(mutate func(*corev1.Service), ports ...svcPort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "svc-uid"},
		Spec:       corev1.ServiceSpec{ClusterIP: clusterIP, Type: corev1.ServiceTypeClusterIP},
	}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: p.name, Protocol: p.proto, Port: p.port, TargetPort: intstr.FromInt32(p.target)})
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

// endpoints is the Service's EndpointSlice: the addresses ready unless listed in notReady.
func endpoints(ports []svcPort, ready []string, notReady ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, p := range ports {
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr(p.name), Protocol: ptr(p.proto), Port: ptr(p.target)})
	}
	for _, a := range ready {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "pod-" + a}})
	}
	for _, a := range notReady {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}})
	}
	return es
}

func ptr[T any](v T) *T { return &v }

func (w *world) reconcile(t *testing.T) (reconcile.Result, error) {
	t.Helper()
	return w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}})
}

// converge reconciles until nothing is left to do: a reconcile with no OpenStack write that does not ask to
// look again soon (Octavia pending, or a change applied). It stops at the first error.
func (w *world) converge(t *testing.T) (reconcile.Result, error) {
	t.Helper()
	for range 500 {
		before := w.o.Wrote() + w.n.Wrote()
		res, err := w.reconcile(t)
		if err != nil {
			return res, err
		}
		if w.o.Wrote()+w.n.Wrote() == before && (res.RequeueAfter == 0 || res.RequeueAfter > 5*time.Second) {
			return res, nil
		}
	}
	t.Fatal("no convergence after 500 reconciles")
	return reconcile.Result{}, nil
}

func (w *world) mustConverge(t *testing.T) {
	t.Helper()
	if _, err := w.converge(t); err != nil {
		t.Fatalf("converge: %v", err)
	}
}

// served describes the load balancers as "PROTO:port → addr:port@subnet,…" per listener, for comparing.
func (w *world) served(t *testing.T) map[string][]string {
	t.Helper()
	lbs := w.o.LoadBalancers()
	if len(lbs) != 1 {
		t.Fatalf("%d load balancers, want 1", len(lbs))
	}
	lb := lbs[0]
	out := map[string][]string{}
	for _, l := range lb.Listeners {
		key := fmt.Sprintf("%s:%d", l.Protocol, l.ProtocolPort)
		out[key] = []string{}
		for _, p := range lb.Pools {
			if p.ListenerID != l.ID {
				continue
			}
			if l.DefaultPoolID != p.ID {
				t.Errorf("listener %s has default pool %q, its pool is %s", key, l.DefaultPoolID, p.ID)
			}
			for _, m := range lb.Members[p.ID] {
				out[key] = append(out[key], fmt.Sprintf("%s:%d@%s", m.Address, m.ProtocolPort, m.SubnetID))
			}
			slices.Sort(out[key])
		}
	}
	return out
}

func (w *world) get(t *testing.T) *corev1.Service {
	t.Helper()
	var s corev1.Service
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func (w *world) vipPort(t *testing.T) *openstack.Port {
	t.Helper()
	for _, p := range w.n.Ports {
		if p.DeviceOwner == neutron.VIPDeviceOwner {
			return p
		}
	}
	return nil
}

// warnings drains the recorded events and returns the Warnings.
func (w *world) warnings() []string {
	var out []string
	for {
		select {
		case ev := <-w.rec.Events:
			if strings.HasPrefix(ev, corev1.EventTypeWarning) {
				out = append(out, ev)
			}
		default:
			return out
		}
	}
}

func hasWarning(ws []string, reason, text string) bool {
	for _, w := range ws {
		if strings.Contains(w, "Warning "+reason+" ") && strings.Contains(w, text) {
			return true
		}
	}
	return false
}

func (w *world) at(sub string, addrs ...string) func(port int32) []string {
	return func(port int32) []string {
		var out []string
		for _, a := range addrs {
			out = append(out, fmt.Sprintf("%s:%d@%s", a, port, sub))
		}
		slices.Sort(out)
		return out
	}
}

func TestServiceConverges(t *testing.T) {
	three := []svcPort{http, dns, metrics}
	cases := []struct {
		name    string
		svc     *corev1.Service
		eps     *discoveryv1.EndpointSlice
		pending int // Octavia's PendingReads
		// change runs after a first convergence; the world then converges again.
		change func(t *testing.T, w *world)
		want   func(w *world) map[string][]string
		// amphora: the case needs what only the amphora provider has (a second algorithm).
		amphora bool
	}{
		{
			name: "a Service with three ports and two ready endpoints gets one listener, pool and two members per port",
			svc:  service(nil, three...), eps: endpoints(three, []string{"10.244.0.5", "10.244.0.6"}, "10.244.0.7"),
			want: func(w *world) map[string][]string {
				m := w.at(w.podSubnet, "10.244.0.5", "10.244.0.6")
				return map[string][]string{"TCP:80": m(8080), "UDP:53": m(5353), "TCP:9090": m(9090)}
			},
		},
		{
			name: "the same Service converges as well when Octavia keeps every change PENDING for three reads",
			svc:  service(nil, three...), eps: endpoints(three, []string{"10.244.0.5", "10.244.0.6"}), pending: 3,
			want: func(w *world) map[string][]string {
				m := w.at(w.podSubnet, "10.244.0.5", "10.244.0.6")
				return map[string][]string{"TCP:80": m(8080), "UDP:53": m(5353), "TCP:9090": m(9090)}
			},
		},
		{
			name: "a Service without endpoints gets its listeners and empty pools",
			svc:  service(nil, http, dns), eps: endpoints([]svcPort{http, dns}, nil),
			want: func(*world) map[string][]string { return map[string][]string{"TCP:80": {}, "UDP:53": {}} },
		},
		{
			name: "endpoints that come, go and turn unready change the members of every pool",
			svc:  service(nil, http, dns), eps: endpoints([]svcPort{http, dns}, []string{"10.244.0.5", "10.244.0.6"}),
			change: func(t *testing.T, w *world) {
				update(t, w, endpoints([]svcPort{http, dns}, []string{"10.244.0.6", "10.244.0.8"}, "10.244.0.5"))
			},
			want: func(w *world) map[string][]string {
				m := w.at(w.podSubnet, "10.244.0.6", "10.244.0.8")
				return map[string][]string{"TCP:80": m(8080), "UDP:53": m(5353)}
			},
		},
		{
			name: "a port removed from the Service loses its listener and its pool, the others keep theirs",
			svc:  service(nil, three...), eps: endpoints(three, []string{"10.244.0.5"}),
			change: func(t *testing.T, w *world) {
				update(t, w, service(nil, http, metrics))
			},
			want: func(w *world) map[string][]string {
				m := w.at(w.podSubnet, "10.244.0.5")
				return map[string][]string{"TCP:80": m(8080), "TCP:9090": m(9090)}
			},
		},
		{
			name: "a port added to the Service gets its listener and pool",
			svc:  service(nil, http), eps: endpoints(three, []string{"10.244.0.5"}),
			change: func(t *testing.T, w *world) {
				update(t, w, service(nil, http, dns))
			},
			want: func(w *world) map[string][]string {
				m := w.at(w.podSubnet, "10.244.0.5")
				return map[string][]string{"TCP:80": m(8080), "UDP:53": m(5353)}
			},
		},
		{
			name: "ClientIP affinity rebuilds the pools with SOURCE_IP", amphora: true,
			svc: service(nil, http), eps: endpoints([]svcPort{http}, []string{"10.244.0.5"}),
			change: func(t *testing.T, w *world) {
				update(t, w, service(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }, http))
			},
			want: func(w *world) map[string][]string {
				if p := w.o.LoadBalancers()[0].Pools; len(p) != 1 || p[0].LBAlgorithm != "SOURCE_IP" {
					return map[string][]string{"pools": {fmt.Sprint(p)}}
				}
				return map[string][]string{"TCP:80": w.at(w.podSubnet, "10.244.0.5")(8080)}
			},
		},
	}
	for _, prov := range []string{"amphora", "ovn"} {
		for _, tc := range cases {
			if tc.amphora && prov != "amphora" {
				continue
			}
			t.Run(prov+"/"+tc.name, func(t *testing.T) {
				w := newWorld(t, tc.svc.DeepCopy(), tc.eps.DeepCopy())
				w.r.Provider = provider(t, prov)
				w.o.PendingReads = tc.pending
				w.mustConverge(t)
				if tc.change != nil {
					tc.change(t, w)
					w.mustConverge(t)
				}
				if got, want := w.served(t), tc.want(w); !equalServed(got, want) {
					t.Fatalf("served\n  %v\nwant\n  %v", got, want)
				}
				if lb := w.o.LoadBalancers()[0]; len(lb.Pools) != len(lb.Listeners) {
					t.Fatalf("%d pools for %d listeners", len(lb.Pools), len(lb.Listeners))
				}
				checkLoadBalancer(t, w)
				checkAnnotations(t, w)
				if ws := w.warnings(); len(ws) != 0 {
					t.Fatalf("unexpected Warnings: %q", ws)
				}
				// In sync, a reconcile writes nothing.
				ow, nw := w.o.Wrote(), w.n.Wrote()
				if _, err := w.reconcile(t); err != nil || w.o.Wrote() != ow || w.n.Wrote() != nw {
					t.Fatalf("a reconcile in sync: err %v, %d Octavia and %d Neutron writes", err, w.o.Wrote()-ow, w.n.Wrote()-nw)
				}
			})
		}
	}
}

func equalServed(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

func update(t *testing.T, w *world, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	cur := obj.DeepCopyObject().(client.Object)
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		t.Fatal(err)
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	obj.SetFinalizers(cur.GetFinalizers())
	obj.SetAnnotations(cur.GetAnnotations())
	if err := w.c.Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// checkLoadBalancer: the load balancer of the configured provider has the clusterIP as its VIP; on the amphora
// provider it sits on a VIP port Raven made on the service network, on the ovn provider on the provider's
// own port (Raven makes none). It and Raven's VIP port carry the Service's tags.
func checkLoadBalancer(t *testing.T, w *world) {
	t.Helper()
	lb := w.o.LoadBalancers()[0]
	if lb.Provider != w.r.Provider.Name || lb.VipAddress != clusterIP || lb.VipSubnetID != w.m.C.ServiceSubnet.ID {
		t.Fatalf("load balancer %+v, want provider %s with the clusterIP %s on the service subnet", lb.LoadBalancer, w.r.Provider.Name, clusterIP)
	}
	tagged := [][]string{lb.Tags}
	vip := w.vipPort(t)
	if w.r.Provider.MakesVIPPort {
		if vip != nil || lb.VipPortID == "" {
			t.Fatalf("Raven made VIP port %+v for a provider that makes its own (load balancer's: %q)", vip, lb.VipPortID)
		}
	} else {
		if vip == nil || lb.VipPortID != vip.ID || vip.FixedIPs[0].IPAddress != clusterIP || vip.NetworkID != w.m.C.ServiceNetworkID {
			t.Fatalf("load balancer %+v on VIP port %+v, want the clusterIP %s on the service network", lb.LoadBalancer, vip, clusterIP)
		}
		tagged = append(tagged, vip.Tags)
	}
	want := ownership.Owner{Cluster: "c1", Kind: ownership.KindService, UID: "svc-uid"}.Tags()
	for _, tags := range tagged {
		for _, tag := range want {
			if !slices.Contains(tags, tag) {
				t.Fatalf("tags %v lack %s", tags, tag)
			}
		}
	}
	if lb.ProvisioningStatus != "ACTIVE" {
		t.Fatalf("load balancer %s after convergence", lb.ProvisioningStatus)
	}
}

// checkAnnotations: the annotations say what Octavia holds.
func checkAnnotations(t *testing.T, w *world) {
	t.Helper()
	s := w.get(t)
	if !controllerutil.ContainsFinalizer(s, annotations.ServiceFinalizer) {
		t.Fatal("no finalizer")
	}
	var vip annotations.VIP
	var pools []annotations.Pool
	if ok, err := annotations.Decode(s.Annotations, annotations.ServiceVIP, &vip); !ok || err != nil {
		t.Fatalf("VIP annotation: %v %v", ok, err)
	}
	if ok, err := annotations.Decode(s.Annotations, annotations.ServicePools, &pools); !ok || err != nil {
		t.Fatalf("pools annotation: %v %v", ok, err)
	}
	lb := w.o.LoadBalancers()[0]
	if vip.LoadBalancerID != lb.ID || vip.PortID != lb.VipPortID || vip.Address != clusterIP || vip.ProvisioningStatus != "ACTIVE" {
		t.Fatalf("VIP annotation %+v, load balancer %+v", vip, lb.LoadBalancer)
	}
	checkAnnotatedPools(t, pools, lb)
}

// checkAnnotatedPools: each annotated pool is a pool of lb, on its listener, with its members.
func checkAnnotatedPools(t *testing.T, pools []annotations.Pool, lb fake.LoadBalancerState) {
	t.Helper()
	if len(pools) != len(lb.Pools) {
		t.Fatalf("%d pools annotated, %d in Octavia", len(pools), len(lb.Pools))
	}
	for _, p := range pools {
		if len(p.Members) != len(lb.Members[p.ID]) {
			t.Fatalf("pool %s: %d members annotated, %d in Octavia", p.ID, len(p.Members), len(lb.Members[p.ID]))
		}
		var found bool
		for _, l := range lb.Listeners {
			found = found || l.ID == p.ListenerID && l.DefaultPoolID == p.ID && l.ProtocolPort == p.ProtocolPort
		}
		if !found {
			t.Fatalf("annotated pool %+v matches no listener", p)
		}
	}
}

func TestServiceRefusals(t *testing.T) {
	three := []svcPort{http, dns, metrics}
	cases := []struct {
		name          string
		method        string
		status        int
		message       string
		times         int
		wantErr       bool
		wantReason    string
		wantText      string
		wantWarnings  int      // 1 when not given
		wantListeners []string // served listeners, in "PROTO:port" form
	}{
		{name: "a listener over Octavia's quota (403) is reported and skipped, the other ports are served",
			method: "CreateListener", status: 403, message: "Quota has been met for resources: Listener", times: 1,
			wantReason: "LoadBalancerRefusedQuotaExceeded", wantText: "CreateListener TCP 80", wantListeners: []string{"TCP:9090", "UDP:53"}},
		{name: "pools the provider cannot build (501) are reported, each when first refused, and the listeners stay",
			method: "CreatePool", status: 501, message: "Provider 'amphora' does not support a requested option: SOURCE_IP", times: -1,
			wantReason: "LoadBalancerRefusedUnsupported", wantText: "CreatePool", wantWarnings: 3, wantListeners: []string{"TCP:80", "TCP:9090", "UDP:53"}},
		{name: "members Octavia finds invalid (400) are reported and skipped, the other pools get theirs",
			method: "ReplaceMembers", status: 400, message: "Invalid input for field/attribute address.", times: 1,
			wantReason: "LoadBalancerRefusedBadRequest", wantText: "ReplaceMembers TCP 80", wantListeners: []string{"TCP:80", "TCP:9090", "UDP:53"}},
		{name: "a listener refused by policy (403 without quota) stops the plan with a Warning and an error for the retry",
			method: "CreateListener", status: 403, message: "Policy does not allow this request to be performed.", times: 1,
			wantErr: true, wantReason: "LoadBalancerUpdateForbidden", wantText: "CreateListener TCP 80", wantListeners: []string{}},
		{name: "a 503 on the load balancer create is a Warning and an error for the retry",
			method: "CreateLoadBalancer", status: 503, message: "Service Unavailable", times: 1,
			wantErr: true, wantReason: "LoadBalancerCreateServerError", wantText: "creating the load balancer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, service(nil, three...), endpoints(three, []string{"10.244.0.5"}))
			w.o.FailStatus(tc.method, tc.times, tc.status, tc.message)
			_, err := w.converge(t)
			if (err != nil) != tc.wantErr {
				t.Fatalf("converge: %v, wantErr %v", err, tc.wantErr)
			}
			ws := w.warnings()
			if tc.wantWarnings == 0 {
				tc.wantWarnings = 1
			}
			if !hasWarning(ws, tc.wantReason, tc.wantText) || len(ws) != tc.wantWarnings {
				t.Fatalf("Warnings %q, want %d %s naming %q", ws, tc.wantWarnings, tc.wantReason, tc.wantText)
			}
			if tc.wantListeners != nil {
				checkServed(t, w, tc.wantListeners)
			}
			if tc.wantErr {
				// The fault was for one call: the retry builds everything.
				w.mustConverge(t)
				if len(w.served(t)) != 3 {
					t.Fatalf("after the retry: %v", w.served(t))
				}
				checkAnnotations(t, w)
				return
			}
			checkRefusalPassedOver(t, w, tc.method)
		})
	}
}

// checkServed: the listeners served, in "PROTO:port" form, are want.
func checkServed(t *testing.T, w *world, want []string) {
	t.Helper()
	var got []string
	for k := range w.served(t) {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("listeners %v, want %v", got, want)
	}
}

// checkRefusalPassedOver: after Octavia refused the calls of method, the annotation lists only the ports with
// a listener and a pool, and a second pass neither asks again nor warns again.
func checkRefusalPassedOver(t *testing.T, w *world, method string) {
	t.Helper()
	// The annotation lists only the ports with a listener and a pool.
	var pools []annotations.Pool
	_, _ = annotations.Decode(w.get(t).Annotations, annotations.ServicePools, &pools)
	if want := map[string]int{"CreatePool": 0, "CreateListener": 2, "ReplaceMembers": 3}[method]; len(pools) != want {
		t.Fatalf("%d pools annotated, want %d: %+v", len(pools), want, pools)
	}
	if method == "ReplaceMembers" && len(w.served(t)["TCP:80"]) != 0 {
		t.Fatalf("the refused members are in the pool: %v", w.served(t))
	}
	// A remembered refusal is not asked again, and raises no second Warning.
	calls := w.o.Called(method)
	if _, err := w.converge(t); err != nil || w.o.Called(method) != calls || len(w.warnings()) != 0 {
		t.Fatalf("a second pass: err %v, %d more %s calls", err, w.o.Called(method)-calls, method)
	}
}

func TestServiceOctaviaBusyIsNoError(t *testing.T) {
	three := []svcPort{http, dns, metrics}
	w := newWorld(t, service(nil, three...), endpoints(three, []string{"10.244.0.5"}))
	w.o.FailStatus("CreatePool", 2, 409, "Load Balancer lb is immutable and cannot be updated.")
	w.mustConverge(t)
	if got := w.served(t); len(got) != 3 || len(got["UDP:53"]) != 1 {
		t.Fatalf("served %v", got)
	}
	if ws := w.warnings(); len(ws) != 0 {
		t.Fatalf("Octavia busy raised Warnings: %q", ws)
	}
}

func TestServiceFloatingIP(t *testing.T) {
	cases := []struct {
		name       string
		mutate     func(*corev1.Service)
		wantFIP    string // "" for none, "any" for an address Neutron picks
		wantReason string
		wantStatus bool // status.loadBalancer.ingress names the floating IP
	}{
		{name: "an externalIP inside the external subnet becomes a floating IP on the VIP",
			mutate: func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"172.24.4.50"} }, wantFIP: "172.24.4.50"},
		{name: "an externalIP outside the external subnet gets a Warning and no floating IP",
			mutate: func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.7"} }, wantReason: "ExternalIPIgnored"},
		{name: "of two externalIPs inside the subnet the first gets the floating IP, the second a Warning",
			mutate:  func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"172.24.4.51", "172.24.4.52"} },
			wantFIP: "172.24.4.51", wantReason: "ExternalIPIgnored"},
		{name: "type LoadBalancer gets a floating IP Neutron picks, announced in the status",
			mutate: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }, wantFIP: "any", wantStatus: true},
		{name: "a ClusterIP Service without externalIPs gets no floating IP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, service(tc.mutate, http), endpoints([]svcPort{http}, []string{"10.244.0.5"}))
			w.mustConverge(t)
			fips := checkFloatingIPs(t, w, tc.wantFIP)
			ws := w.warnings()
			if tc.wantReason != "" && !hasWarning(ws, tc.wantReason, "") || tc.wantReason == "" && len(ws) != 0 {
				t.Fatalf("Warnings %q, want %q", ws, tc.wantReason)
			}
			checkFloatingIPAnnounced(t, w, fips, tc.wantStatus)
		})
	}

	t.Run("an externalIP removed releases its floating IP", func(t *testing.T) {
		w := newWorld(t, service(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"172.24.4.50"} }, http), endpoints([]svcPort{http}, nil))
		w.mustConverge(t)
		update(t, w, service(nil, http))
		w.mustConverge(t)
		if len(w.n.FIPs) != 0 {
			t.Fatalf("floating IPs left: %d", len(w.n.FIPs))
		}
	})
}

func TestServiceLoadBalancerClass(t *testing.T) {
	theirs := []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}} // written by the class's own controller
	cases := []struct {
		name        string
		class       *string
		wantFIP     string // "" for none, "any" for an address Neutron picks
		wantIngress func(fips []*openstack.FloatingIP) []corev1.LoadBalancerIngress
	}{
		{name: "a Service of Raven's class gets a floating IP, announced in the status", class: ptr(config.DefaultLoadBalancerClass), wantFIP: "any",
			wantIngress: func(fips []*openstack.FloatingIP) []corev1.LoadBalancerIngress {
				return []corev1.LoadBalancerIngress{{IP: fips[0].FloatingIP}}
			}},
		{name: "a Service of another class keeps its clusterIP, but gets no floating IP and its status stays its controller's", class: ptr("metallb.io/metallb"),
			wantIngress: func([]*openstack.FloatingIP) []corev1.LoadBalancerIngress { return theirs }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, service(func(s *corev1.Service) {
				s.Spec.Type, s.Spec.LoadBalancerClass = corev1.ServiceTypeLoadBalancer, tc.class
				s.Status.LoadBalancer.Ingress = theirs
			}, http), endpoints([]svcPort{http}, []string{"10.244.0.5"}))
			w.mustConverge(t)
			if got, want := w.served(t), map[string][]string{"TCP:80": w.at(w.podSubnet, "10.244.0.5")(8080)}; !equalServed(got, want) {
				t.Fatalf("served %v, want %v: the clusterIP is Raven's whatever the class", got, want)
			}
			fips := checkFloatingIPs(t, w, tc.wantFIP)
			if got, want := w.get(t).Status.LoadBalancer.Ingress, tc.wantIngress(fips); !reflect.DeepEqual(got, want) {
				t.Fatalf("status ingress %+v, want %+v", got, want)
			}
			if ws := w.warnings(); len(ws) != 0 {
				t.Fatalf("Warnings %q", ws)
			}
		})
	}
}

// The floating IP Raven made for a Service is what the NetworkPolicy controller admits egress to, besides the
// clusterIP: the Service controller records it as made, and forgets it as released.
func TestTheFloatingIPsRavenMadeAreRecorded(t *testing.T) {
	w := newWorld(t, service(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"172.24.4.50", "192.0.2.7"} }, http), endpoints([]svcPort{http}, nil))
	w.mustConverge(t)
	if got := w.r.Backends.FloatingIPs("svc-uid"); !slices.Equal(got, []string{"172.24.4.50"}) {
		t.Fatalf("recorded floating IPs %v, want the one Raven made, 172.24.4.50 (192.0.2.7 is outside the external subnet)", got)
	}
	update(t, w, service(nil, http))
	w.mustConverge(t)
	if got := w.r.Backends.FloatingIPs("svc-uid"); len(got) != 0 {
		t.Fatalf("recorded floating IPs %v after the floating IP was released, want none", got)
	}
}

// checkFloatingIPs: Neutron holds no floating IP when want is "", else one on the VIP port, with address want
// unless want is "any". It returns the floating IPs.
func checkFloatingIPs(t *testing.T, w *world, want string) []*openstack.FloatingIP {
	t.Helper()
	vip := w.vipPort(t)
	var fips []*openstack.FloatingIP
	for _, f := range w.n.FIPs {
		fips = append(fips, f)
	}
	switch {
	case want == "" && len(fips) != 0:
		t.Fatalf("floating IPs %+v, want none", fips)
	case want != "" && (len(fips) != 1 || fips[0].PortID != vip.ID || want != "any" && fips[0].FloatingIP != want):
		t.Fatalf("floating IPs %+v, want %s on VIP port %s", fips, want, vip.ID)
	}
	return fips
}

// checkFloatingIPAnnounced: the VIP annotation names the floating IP, and the status announces it when
// wantStatus.
func checkFloatingIPAnnounced(t *testing.T, w *world, fips []*openstack.FloatingIP, wantStatus bool) {
	t.Helper()
	s := w.get(t)
	var ann annotations.VIP
	_, _ = annotations.Decode(s.Annotations, annotations.ServiceVIP, &ann)
	if len(fips) == 1 && (ann.FloatingIP != fips[0].FloatingIP || ann.FloatingIPID != fips[0].ID) {
		t.Fatalf("VIP annotation %+v does not name floating IP %+v", ann, fips[0])
	}
	if ingress := s.Status.LoadBalancer.Ingress; wantStatus != (len(ingress) == 1) || wantStatus && ingress[0].IP != fips[0].FloatingIP {
		t.Fatalf("ingress %+v", ingress)
	}
}

func TestServiceTeardown(t *testing.T) {
	cases := []struct {
		name    string
		pending int
		// remove takes the Service away from Raven: a delete, or a change that needs no load balancer.
		remove func(t *testing.T, w *world)
		// gone says the Service object is gone (deleted) rather than kept without the finalizer.
		gone bool
	}{
		{name: "a deleted Service loses its load balancer, VIP port and floating IP, then its finalizer",
			remove: deleteService, gone: true},
		{name: "while Octavia deletes the load balancer the finalizer stays, and goes when the delete is done",
			pending: 2, remove: deleteService, gone: true},
		{name: "a Service turned ExternalName loses its load balancer, annotations and finalizer but stays",
			remove: func(t *testing.T, w *world) {
				update(t, w, service(func(s *corev1.Service) {
					s.Spec.Type, s.Spec.ClusterIP, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "", "example.org"
				}, http))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := service(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"172.24.4.50"} }, http, dns)
			w := newWorld(t, svc, endpoints([]svcPort{http, dns}, []string{"10.244.0.5"}))
			w.o.PendingReads = tc.pending
			w.mustConverge(t)
			if len(w.n.FIPs) != 1 || w.vipPort(t) == nil || len(w.o.LoadBalancers()) != 1 {
				t.Fatal("the Service was not built")
			}
			podPorts := len(w.n.Ports) - 1
			// The pod controller keeps a member's port while the load balancer has it, and no longer.
			if !w.r.Backends.Holds("10.244.0.5") {
				t.Fatal("the member's address is not recorded as held")
			}
			tc.remove(t, w)
			if tc.pending > 0 {
				checkDeletePending(t, w)
			}
			w.mustConverge(t)
			checkTornDown(t, w, podPorts)
			checkServiceReleased(t, w, tc.gone)
			if w.r.Backends.Holds("10.244.0.5") {
				t.Error("the member's address is still held after the load balancer went")
			}
			if ws := w.warnings(); len(ws) != 0 {
				t.Fatalf("Warnings: %q", ws)
			}
		})
	}

	t.Run("a failed load balancer delete keeps the finalizer and is a Warning", failedDeleteKeepsTheFinalizer)
}

// checkDeletePending: a teardown pass while Octavia deletes the load balancer comes back later and keeps the
// finalizer and the VIP port.
func checkDeletePending(t *testing.T, w *world) {
	t.Helper()
	res, err := w.reconcile(t)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("first teardown pass: %+v, %v; want a requeue while Octavia deletes", res, err)
	}
	if lbs := w.o.LoadBalancers(); len(lbs) != 1 || lbs[0].ProvisioningStatus != "PENDING_DELETE" {
		t.Fatalf("load balancers %+v, want one PENDING_DELETE", lbs)
	}
	if !controllerutil.ContainsFinalizer(w.get(t), annotations.ServiceFinalizer) || w.vipPort(t) == nil {
		t.Fatal("the finalizer or the VIP port went before the load balancer")
	}
}

// checkTornDown: no load balancer, VIP port or floating IP is left, and the podPorts other ports are.
func checkTornDown(t *testing.T, w *world, podPorts int) {
	t.Helper()
	if n := len(w.o.LoadBalancers()); n != 0 {
		t.Fatalf("%d load balancers left", n)
	}
	if w.vipPort(t) != nil || len(w.n.FIPs) != 0 {
		t.Fatalf("VIP port %v or %d floating IPs left", w.vipPort(t), len(w.n.FIPs))
	}
	if len(w.n.Ports) != podPorts {
		t.Fatalf("%d other ports, want %d", len(w.n.Ports), podPorts)
	}
}

// checkServiceReleased: the Service is gone when gone, else kept without finalizer and annotations.
func checkServiceReleased(t *testing.T, w *world, gone bool) {
	t.Helper()
	var s corev1.Service
	err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, &s)
	switch {
	case gone && !apierrors.IsNotFound(err):
		t.Fatalf("the deleted Service is still there (%v), finalizers %v", err, s.Finalizers)
	case !gone && err != nil:
		t.Fatal(err)
	case !gone && (len(s.Finalizers) != 0 || s.Annotations[annotations.ServiceVIP] != "" || s.Annotations[annotations.ServicePools] != ""):
		t.Fatalf("finalizers %v, annotations %v", s.Finalizers, s.Annotations)
	}
}

func failedDeleteKeepsTheFinalizer(t *testing.T) {
	w := newWorld(t, service(nil, http), endpoints([]svcPort{http}, nil))
	w.mustConverge(t)
	deleteService(t, w)
	w.o.FailStatus("DeleteLoadBalancer", 1, 500, "(sqlite3.OperationalError) database is locked")
	if _, err := w.reconcile(t); err == nil {
		t.Fatal("no error")
	}
	if ws := w.warnings(); !hasWarning(ws, "LoadBalancerDeleteServerError", "database is locked") {
		t.Fatalf("Warnings %q", ws)
	}
	if !controllerutil.ContainsFinalizer(w.get(t), annotations.ServiceFinalizer) {
		t.Fatal("finalizer removed before the load balancer was deleted")
	}
	w.mustConverge(t)
	if len(w.o.LoadBalancers()) != 0 || w.vipPort(t) != nil {
		t.Fatal("the retry left objects behind")
	}
}

func deleteService(t *testing.T, w *world) {
	t.Helper()
	if err := w.c.Delete(context.Background(), w.get(t)); err != nil {
		t.Fatal(err)
	}
}

// TestServiceCallCounts measures what building a Service costs, and bounds it: Octavia takes one write per
// listener, pool and member list plus the load balancer, Neutron one (the VIP port); the reads grow with
// the number of pools, since every reconcile lists every pool's members.
// octaviaReads counts the reads among calls (by method name).
func octaviaReads(calls map[string]int) int {
	reads := 0
	for m, v := range calls {
		if strings.HasPrefix(m, "List") || strings.HasPrefix(m, "Get") || m == "LoadBalancerStatus" {
			reads += v
		}
	}
	return reads
}

func TestServiceCallCounts(t *testing.T) {
	for _, ports := range []int{3, 20, 100} {
		t.Run(fmt.Sprintf("a Service with %d ports and 3 endpoints", ports), func(t *testing.T) {
			var sps []svcPort
			for i := range ports {
				sps = append(sps, svcPort{fmt.Sprintf("p%d", i), corev1.ProtocolTCP, int32(1000 + i), int32(2000 + i)})
			}
			w := newWorld(t, service(nil, sps...), endpoints(sps, []string{"10.244.0.5", "10.244.0.6", "10.244.0.7"}))
			w.r.Recorder = nil // one event per pool would fill the fake recorder
			nCalls := func() int {
				s := 0
				for _, v := range w.n.Calls {
					s += v
				}
				return s
			}
			n0, nw0 := nCalls(), w.n.Wrote()
			reconciles := 0
			for {
				before := w.o.Wrote() + w.n.Wrote()
				res, err := w.reconcile(t)
				reconciles++
				if err != nil {
					t.Fatal(err)
				}
				if w.o.Wrote()+w.n.Wrote() == before && res.RequeueAfter == 0 {
					break
				}
			}
			reads := octaviaReads(w.o.Calls)
			t.Logf("%d ports: %d reconciles; Octavia %d writes %v; Neutron %d calls, %d writes", ports, reconciles, w.o.Wrote(), w.o.Calls, nCalls()-n0, w.n.Wrote()-nw0)
			if want := 3*ports + 1; w.o.Wrote() != want {
				t.Errorf("%d Octavia writes, want %d (one load balancer, then a listener, a pool and one member update per port)", w.o.Wrote(), want)
			}
			if w.o.Called("ReplaceMembers") != ports {
				t.Errorf("%d member updates for %d pools", w.o.Called("ReplaceMembers"), ports)
			}
			if got := w.n.Wrote() - nw0; got != 1 {
				t.Errorf("%d Neutron writes, want 1 (the VIP port)", got)
			}
			// Each reconcile reads at most the load balancers, then its listeners, its pools and the members of
			// all its pools (the status tree): four reads, however many ports; and the reconciler lists every load
			// balancer, listener and pool once, at its first reconcile (firstLook).
			if bound := 4*reconciles + 3; reads > bound {
				t.Errorf("%d Octavia reads in %d reconciles, more than %d", reads, reconciles, bound)
			}
			if w.o.Called("ListMembers") != 0 {
				t.Errorf("%d member lists of single pools, want none", w.o.Called("ListMembers"))
			}
		})
	}
}
