package namespace

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/pkg/annotations"
)

type world struct {
	r   *Reconciler
	n   *fake.Neutron
	m   *neutron.Manager
	c   client.Client
	rec *events.FakeRecorder
}

func newWorld(t *testing.T) *world {
	t.Helper()
	n := fake.NewNeutron()
	cl, err := neutron.EnsureCluster(context.Background(), n, "c1", config.Neutron{ExternalNetwork: "public", PodSubnetPoolCIDR: "10.244.0.0/16", PodSubnetPrefixLength: 24}, false)
	if err != nil {
		t.Fatal(err)
	}
	m := &neutron.Manager{N: n, C: cl, X: neutron.NewIndex()}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", UID: "ns-uid"}}
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "other-uid"}}
	c := crfake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(ns, other).Build()
	gate := controller.NewGate()
	gate.Open()
	rec := events.NewFakeRecorder(20)
	return &world{r: &Reconciler{Client: c, Neutron: m, Gate: gate, Recorder: rec}, n: n, m: m, c: c, rec: rec}
}

func (w *world) reconcile(t *testing.T, name string) (reconcile.Result, error) {
	t.Helper()
	return w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
}

func (w *world) get(t *testing.T, name string) *corev1.Namespace {
	t.Helper()
	var ns corev1.Namespace
	if err := w.c.Get(context.Background(), types.NamespacedName{Name: name}, &ns); err != nil {
		t.Fatal(err)
	}
	return &ns
}

// network returns the namespace's network and subnet in Neutron, by tag.
func (w *world) network(uid string) (*openstack.Network, *openstack.Subnet) {
	var net *openstack.Network
	var sub *openstack.Subnet
	for _, x := range w.n.Nets {
		if slices.Contains(x.Tags, "raven.uid="+uid) {
			net = x
		}
	}
	for _, x := range w.n.Subnets {
		if net != nil && x.NetworkID == net.ID {
			sub = x
		}
	}
	return net, sub
}

func (w *world) attached(subnetID string) bool {
	return slices.Contains(w.n.Interfaces[w.m.C.RouterID], subnetID)
}

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

func TestNamespaceGetsItsNetwork(t *testing.T) {
	cases := []struct {
		name       string
		prepare    func(t *testing.T, w *world)
		wantErr    bool
		wantReason string
	}{
		{name: "a new namespace gets a network, a subnet from the pod pool on the router, and annotations naming them"},
		{name: "a network made by an earlier run is adopted by its tags, not made twice, and its router interface kept",
			prepare: func(t *testing.T, w *world) {
				if _, err := w.m.EnsureNamespace(context.Background(), "ns-uid", "ns"); err != nil {
					t.Fatal(err)
				}
				w.m.X = neutron.NewIndex() // a restart: the index is gone, Neutron keeps the network
				w.r.Neutron = w.m
			}},
		{name: "a network quota error is a Warning event and an error for the retry, and the retry finishes",
			prepare: func(t *testing.T, w *world) {
				w.n.Fail("CreateNetwork", 1, openstack.NewError("neutron network create", openstack.KindQuota, 409, "Quota exceeded for resources: ['network']."))
			},
			wantErr: true, wantReason: "NetworkCreateQuotaExceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			if tc.prepare != nil {
				tc.prepare(t, w)
			}
			_, err := w.reconcile(t, "ns")
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile = %v, wantErr %v", err, tc.wantErr)
			}
			checkWarningThenRetry(t, w, tc.wantReason)
			net, sub := checkOneNetworkOnTheRouter(t, w)
			ns := checkNamespaceAnnotations(t, w, net, sub)
			// In sync, a reconcile writes nothing: no Neutron write, no patch.
			writes, rv := w.n.Wrote(), ns.ResourceVersion
			if _, err := w.reconcile(t, "ns"); err != nil || w.n.Wrote() != writes || w.get(t, "ns").ResourceVersion != rv {
				t.Fatalf("a reconcile in sync: err %v, %d writes, resourceVersion %s → %s", err, w.n.Wrote()-writes, rv, w.get(t, "ns").ResourceVersion)
			}
			if other, _ := w.network("other-uid"); other != nil {
				t.Fatal("another namespace got a network")
			}
		})
	}
}

// checkWarningThenRetry checks the Warnings recorded so far: one with reason, after which the finalizer is on
// and a retry succeeds; none when reason is empty.
func checkWarningThenRetry(t *testing.T, w *world, reason string) {
	t.Helper()
	ws := w.warnings()
	if reason != "" {
		if len(ws) != 1 || !strings.Contains(ws[0], "Warning "+reason+" ") {
			t.Fatalf("Warnings %q, want one %s", ws, reason)
		}
		if !controllerutil.ContainsFinalizer(w.get(t, "ns"), annotations.NamespaceFinalizer) {
			t.Fatal("the finalizer must be on before the first OpenStack write")
		}
		if _, err := w.reconcile(t, "ns"); err != nil {
			t.Fatalf("retry: %v", err)
		}
	} else if len(ws) != 0 {
		t.Fatalf("Warnings %q", ws)
	}
}

// checkOneNetworkOnTheRouter checks that namespace ns-uid has one network, with a /24 of the pod pool on the
// cluster router, and returns them.
func checkOneNetworkOnTheRouter(t *testing.T, w *world) (*openstack.Network, *openstack.Subnet) {
	t.Helper()
	nets := 0
	for _, x := range w.n.Nets {
		if slices.Contains(x.Tags, "raven.uid=ns-uid") {
			nets++
		}
	}
	net, sub := w.network("ns-uid")
	if nets != 1 || sub == nil {
		t.Fatalf("%d networks, subnet %v; want one of each", nets, sub)
	}
	if sub.SubnetPoolID != w.m.C.SubnetPoolID || !strings.HasPrefix(sub.CIDR, "10.244.") || !strings.HasSuffix(sub.CIDR, "/24") {
		t.Fatalf("subnet %+v is not a /24 of the pod pool", sub)
	}
	if !w.attached(sub.ID) {
		t.Fatal("the subnet is not on the cluster router")
	}
	return net, sub
}

// checkNamespaceAnnotations checks that namespace ns has the finalizer and annotations naming net, the
// router and sub, and returns it.
func checkNamespaceAnnotations(t *testing.T, w *world, net *openstack.Network, sub *openstack.Subnet) *corev1.Namespace {
	t.Helper()
	ns := w.get(t, "ns")
	if !controllerutil.ContainsFinalizer(ns, annotations.NamespaceFinalizer) {
		t.Fatal("no finalizer")
	}
	var na annotations.Network
	if ok, err := annotations.Decode(ns.Annotations, annotations.NamespaceNetwork, &na); !ok || err != nil {
		t.Fatalf("network annotation: %v %v", ok, err)
	}
	if na.ID != net.ID || na.RouterID != w.m.C.RouterID {
		t.Fatalf("network annotation %+v, network %s, router %s", na, net.ID, w.m.C.RouterID)
	}
	if raw := ns.Annotations[annotations.NamespaceSubnet]; !strings.Contains(raw, sub.ID) || !strings.Contains(raw, sub.CIDR) {
		t.Fatalf("subnet annotation %s does not name subnet %s (%s)", raw, sub.ID, sub.CIDR)
	}
	return ns
}

func TestNamespaceTeardown(t *testing.T) {
	cases := []struct {
		name string
		// podPorts is how many pod ports are on the network when the namespace is deleted.
		podPorts int
		prepare  func(t *testing.T, w *world)
		wantErr  bool
	}{
		{name: "a deleted namespace loses its router interface, subnet and network, then its finalizer"},
		{name: "a deleted namespace with pod ports left keeps everything and looks again", podPorts: 2},
		{name: "a network held by a port Raven does not own is reported and kept with its finalizer",
			prepare: func(t *testing.T, w *world) {
				net, _ := w.network("ns-uid")
				if _, err := w.n.CreatePort(context.Background(), openstack.PortSpec{NetworkID: net.ID, Name: "foreign"}); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t)
			if _, err := w.reconcile(t, "ns"); err != nil {
				t.Fatal(err)
			}
			net, sub := w.network("ns-uid")
			nn := w.m.X.Network("ns-uid")
			for i := range tc.podPorts {
				if _, _, err := w.m.EnsurePort(ctx, neutron.PodRef{UID: "pod-" + string(rune('a'+i)), Namespace: "ns", Name: "p"}, nn, ""); err != nil {
					t.Fatal(err)
				}
			}
			if tc.prepare != nil {
				tc.prepare(t, w)
			}
			if err := w.c.Delete(ctx, w.get(t, "ns")); err != nil {
				t.Fatal(err)
			}
			res, err := w.reconcile(t, "ns")
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile = %v, wantErr %v", err, tc.wantErr)
			}
			var ns corev1.Namespace
			getErr := w.c.Get(ctx, types.NamespacedName{Name: "ns"}, &ns)
			if tc.podPorts > 0 || tc.wantErr {
				checkTeardownWaits(t, w, tc.podPorts, tc.wantErr, res, getErr, &ns, net, sub)
				return
			}
			checkTornDown(t, w, getErr, &ns, net, sub)
		})
	}

	t.Run("once the last pod port is gone the waiting namespace is torn down", teardownAfterTheLastPodPort)
}

// checkTeardownWaits checks a teardown that must wait (pod ports left) or fail (a foreign port): the
// namespace keeps its finalizer and the network (and, while pod ports are left, the subnet on the router);
// a failure is one NetworkDelete Warning.
func checkTeardownWaits(t *testing.T, w *world, podPorts int, wantErr bool, res reconcile.Result, getErr error, ns *corev1.Namespace,
	net *openstack.Network, sub *openstack.Subnet) {
	t.Helper()
	if podPorts > 0 && res.RequeueAfter != time.Second {
		t.Fatalf("result %+v, want a look again in a second", res)
	}
	if getErr != nil || !controllerutil.ContainsFinalizer(ns, annotations.NamespaceFinalizer) {
		t.Fatalf("the namespace lost its finalizer (%v)", getErr)
	}
	if _, ok := w.n.Nets[net.ID]; !ok {
		t.Fatal("the network went while ports were on it")
	}
	if podPorts > 0 && (w.n.Subnets[sub.ID] == nil || !w.attached(sub.ID)) {
		t.Fatal("the subnet or its router interface went while pod ports were on it")
	}
	if ws := w.warnings(); wantErr != (len(ws) == 1 && strings.Contains(ws[0], "Warning NetworkDelete")) {
		t.Fatalf("Warnings %q", ws)
	}
}

// checkTornDown checks that the namespace is gone with its network, subnet, router interface and index entry.
func checkTornDown(t *testing.T, w *world, getErr error, ns *corev1.Namespace, net *openstack.Network, sub *openstack.Subnet) {
	t.Helper()
	if !apierrors.IsNotFound(getErr) {
		t.Fatalf("the namespace is still there (%v), finalizers %v", getErr, ns.Finalizers)
	}
	if _, ok := w.n.Nets[net.ID]; ok {
		t.Fatal("network left")
	}
	if _, ok := w.n.Subnets[sub.ID]; ok || w.attached(sub.ID) {
		t.Fatal("subnet or router interface left")
	}
	if w.m.X.Network("ns-uid") != nil {
		t.Fatal("the index still holds the network")
	}
}

func teardownAfterTheLastPodPort(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	if _, err := w.reconcile(t, "ns"); err != nil {
		t.Fatal(err)
	}
	nn := w.m.X.Network("ns-uid")
	if _, _, err := w.m.EnsurePort(ctx, neutron.PodRef{UID: "pod-a", Namespace: "ns", Name: "a"}, nn, ""); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Delete(ctx, w.get(t, "ns")); err != nil {
		t.Fatal(err)
	}
	if res, err := w.reconcile(t, "ns"); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("%+v, %v; want a wait", res, err)
	}
	if _, err := w.m.ReleasePorts(ctx, "pod-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.reconcile(t, "ns"); err != nil {
		t.Fatal(err)
	}
	if net, _ := w.network("ns-uid"); net != nil {
		t.Fatal("network left")
	}
	var ns corev1.Namespace
	if err := w.c.Get(ctx, types.NamespacedName{Name: "ns"}, &ns); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace still there: %v", err)
	}
}

func TestANewNamespaceDoesNotWaitBehindTeardowns(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	if _, err := w.reconcile(t, "ns"); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Delete(ctx, w.get(t, "ns")); err != nil {
		t.Fatal(err)
	}
	// Every teardown slot is held by other slow teardowns.
	w.r.Teardowns = make(chan struct{}, 1)
	w.r.Teardowns <- struct{}{}
	writes := w.n.Wrote()
	res, err := w.reconcile(t, "ns")
	if err != nil || res.RequeueAfter == 0 || w.n.Wrote() != writes {
		t.Fatalf("a teardown beyond the bound ran (writes %d, %v, %+v); it must wait its turn", w.n.Wrote()-writes, err, res)
	}
	if _, err := w.reconcile(t, "other"); err != nil {
		t.Fatal(err)
	}
	if net, sub := w.network("other-uid"); net == nil || sub == nil {
		t.Fatal("a new namespace was not served while teardowns held their slots")
	}
	<-w.r.Teardowns
	if _, err := w.reconcile(t, "ns"); err != nil {
		t.Fatal(err)
	}
	if net, _ := w.network("ns-uid"); net != nil {
		t.Fatal("the teardown did not run once a slot was free")
	}
}
