package orphan

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// heldListing holds the listing of the cluster's ports, and that of the router's interfaces, until release opens,
// and closes listing, and routerListing, when each begins.
type heldListing struct {
	openstack.Networking
	once, routerOnce       sync.Once
	listing, routerListing chan struct{}
	release                *controller.Gate
	// routerListings counts the listings of a device's ports (the router's interfaces).
	routerListings atomic.Int32
}

func (h *heldListing) ListPorts(ctx context.Context, f openstack.Filter) ([]openstack.Port, error) {
	if f.DeviceID != "" {
		h.routerListings.Add(1)
		h.routerOnce.Do(func() { close(h.routerListing) })
		if err := h.release.Wait(ctx); err != nil {
			return nil, err
		}
	}
	if err := h.hold(ctx, f); err != nil {
		return nil, err
	}
	return h.Networking.ListPorts(ctx, f)
}

func (h *heldListing) EachPortPage(ctx context.Context, f openstack.Filter, fn func([]openstack.Port)) error {
	if err := h.hold(ctx, f); err != nil {
		return err
	}
	return h.Networking.EachPortPage(ctx, f, fn)
}

// hold holds the listing of every port of the cluster (by the cluster's tag alone) until release opens.
func (h *heldListing) hold(ctx context.Context, f openstack.Filter) error {
	if len(f.Tags) == 1 && f.DeviceID == "" {
		h.once.Do(func() { close(h.listing) })
		return h.release.Wait(ctx)
	}
	return nil
}

// startListing starts a sweeper (with a parking place for pods) whose listing of the cluster's ports is held, and
// returns once that listing has begun, with the pods' repair channel and Start's context. before, when given,
// runs before Start. The test's end stops Start.
func startListing(t *testing.T, before ...func(*cloud, *Sweeper)) (*Sweeper, chan event.GenericEvent, *heldListing, context.Context) {
	t.Helper()
	c := newCloud(t)
	held := &heldListing{Networking: c.n, listing: make(chan struct{}), routerListing: make(chan struct{}), release: controller.NewGate()}
	c.m.N = held
	s, pods, _ := c.sweeper(namespaceObj(), podObj("live", "live-uid"))
	s.Gate, s.PodGate, s.Parked = controller.NewGate(), controller.NewGate(), &controller.Parked{}
	s.Options.ResyncPeriod = config.Duration{Duration: time.Hour}
	s.Options.Neutron = config.Neutron{ExternalNetwork: "public", PodSubnetPoolCIDR: "10.244.0.0/16", PodSubnetPrefixLength: 24}
	for _, f := range before {
		f(c, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Start(ctx) // ended at the test's end; the tests check the gates and repairs, not what Start returns
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-held.listing:
	case <-time.After(10 * time.Second):
		t.Fatal("the listing of the cluster's ports did not begin")
	}
	return s, pods, held, ctx
}

// A reconciler behind the gate releases and deletes by the index: it must not run before the index holds
// every port, or a finished pod's port is not found and its annotation goes without it. The pod reconciler's
// gate opens before: it serves new pods while the ports are listed, and checks PortsLoaded before a release.
func TestTheGateOpensOnlyOnceThePortsAreListed(t *testing.T) {
	s, _, held, ctx := startListing(t)
	if !s.PodGate.IsOpen() {
		t.Error("the pods' gate is closed while the ports are being listed: a new leader would serve no new pod until they are")
	}
	if s.Gate.IsOpen() {
		t.Error("the gate is open while the ports are being listed")
	}
	if s.Neutron.X.PortsLoaded() {
		t.Error("the index says its ports are loaded while they are being listed")
	}
	held.release.Open()
	wait, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := s.Gate.Wait(wait); err != nil {
		t.Fatalf("the gate did not open once the ports were listed: %v", err)
	}
	if !s.Neutron.X.PortsLoaded() {
		t.Error("the gate opened before the index held the ports")
	}
}

// A pod parked while the ports are listed comes back to its reconciler once they are, and a pod that comes
// after the listing is not parked.
// The Service reconciler finds a VIP port in the index or asks Neutron, and deletes only what it found: its gate
// opens once the Service ports are in the index, while every other port is still being listed (at a cold start
// with 50,000 pods, that listing is most of it).
func TestTheServiceGateOpensOnceTheServicePortsAreListed(t *testing.T) {
	var vip string
	s, _, held, _ := startListing(t, func(c *cloud, s *Sweeper) {
		s.ServiceGate = controller.NewGate()
		p, err := c.n.CreatePort(context.Background(), openstack.PortSpec{NetworkID: c.net.ID, DeviceOwner: neutron.VIPDeviceOwner,
			Tags: ownership.Owner{Cluster: "c1", Kind: ownership.KindService, UID: "svc-uid"}.Tags()})
		if err != nil {
			t.Fatal(err)
		}
		vip = p.ID
	})
	if !s.ServiceGate.IsOpen() {
		t.Error("the Service gate is closed while the other ports are being listed")
	}
	if ports := s.Neutron.X.PortsOf("svc-uid"); len(ports) != 1 || ports[0].ID != vip {
		t.Errorf("the index holds %v for the Service, want its VIP port %s", ports, vip)
	}
	if s.Gate.IsOpen() || s.Neutron.X.PortsLoaded() {
		t.Error("the gate is open, or the index says it holds every port, while the ports are being listed")
	}
	held.release.Open()
}

// A new leader serves new pods as soon as it has listed the namespace networks, trusting the namespaces'
// annotations to say which subnets are on the router: the router's interfaces, one per namespace, are listed
// with the ports. A namespace without them waits for that listing.
func TestANewLeaderTrustsTheNamespacesAnnotationsForTheRouter(t *testing.T) {
	s, _, held, ctx := startListing(t, func(c *cloud, s *Sweeper) {
		if _, err := c.m.EnsureNamespace(context.Background(), "bare-uid", "bare"); err != nil {
			t.Fatal(err)
		}
		bare := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bare", UID: "bare-uid"}} // the sweep keeps its network
		if err := s.Client.(client.Client).Create(context.Background(), bare); err != nil {
			t.Fatal(err)
		}
		ns := namespaceObj()
		for k, v := range map[string]any{annotations.NamespaceNetwork: annotations.Network{ID: c.net.ID, RouterID: c.m.C.RouterID},
			annotations.NamespaceSubnet: annotations.Subnet{ID: c.subnet.ID}} {
			enc, err := annotations.Encode(v)
			if err != nil {
				t.Fatal(err)
			}
			metav1.SetMetaDataAnnotation(&ns.ObjectMeta, k, enc)
		}
		if err := s.Client.(client.Client).Update(context.Background(), ns); err != nil {
			t.Fatal(err)
		}
	})
	if err := s.PodGate.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if nn := s.Neutron.X.Network("ns-uid"); nn == nil || !nn.Attached {
		t.Errorf("the annotated namespace's network is %+v while the ports are listed, want it attached", nn)
	}
	if nn := s.Neutron.X.Network("bare-uid"); nn == nil || nn.Attached {
		t.Errorf("a namespace without annotations: %+v, want its network known and not attached until the router's interfaces are listed", nn)
	}
	held.release.Open()
	wait, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := s.Gate.Wait(wait); err != nil {
		t.Fatalf("the gate did not open once the ports were listed: %v", err)
	}
	if n := held.routerListings.Load(); n != 1 {
		t.Errorf("the router's interfaces were listed %d times by the time every port was, want once (with the ports)", n)
	}
	if nn := s.Neutron.X.Network("bare-uid"); nn == nil || !nn.Attached {
		t.Errorf("once every port is listed, the other namespace's network is %+v, want it attached", nn)
	}
}

func TestPodsParkedDuringTheListingComeBackOnceItIsIn(t *testing.T) {
	s, pods, held, _ := startListing(t)
	parked := types.NamespacedName{Namespace: "ns", Name: "waiting"}
	if !s.Parked.Park(parked) {
		t.Fatal("a pod could not be parked while the ports were being listed")
	}
	held.release.Open()
	timeout := time.After(10 * time.Second)
	for back := false; !back; {
		select {
		case e := <-pods:
			back = e.Object.GetNamespace() == parked.Namespace && e.Object.GetName() == parked.Name
		case <-timeout:
			t.Fatal("the parked pod did not come back once the ports were listed")
		}
	}
	if s.Parked.Park(types.NamespacedName{Namespace: "ns", Name: "late"}) {
		t.Error("a pod was parked after the listing was in: it would never come back")
	}
}

func TestAFinishedPodThatStillHasAPortGoesBackToItsReconciler(t *testing.T) {
	phase := func(p *corev1.Pod, ph corev1.PodPhase) *corev1.Pod { p.Status.Phase = ph; return p }
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "a succeeded pod with a port goes back", pod: phase(podObj("live", "live-uid"), corev1.PodSucceeded), want: true},
		{name: "a failed pod with a port goes back", pod: phase(podObj("live", "live-uid"), corev1.PodFailed), want: true},
		{name: "a running pod with its one port does not", pod: phase(podObj("live", "live-uid"), corev1.PodRunning)},
		{name: "a finished pod without a port does not", pod: phase(podObj("done", "done-uid"), corev1.PodSucceeded)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCloud(t)
			s, pods, _ := c.sweeper(namespaceObj(), tc.pod)
			if err := s.Resync(context.Background(), t0.Add(time.Second), true); err != nil {
				t.Fatal(err)
			}
			var sent []client.Object
			for len(pods) > 0 {
				sent = append(sent, (<-pods).Object)
			}
			if got := len(sent) == 1 && sent[0].GetName() == tc.pod.Name; got != tc.want || len(sent) > 1 {
				t.Fatalf("repairs sent: %d (want the pod %s: %v)", len(sent), tc.pod.Name, tc.want)
			}
		})
	}
}

// At start the router's interfaces (a listing of their own: they carry no tag of the cluster's) are listed beside
// the cluster's ports, not before them: with both held, both must begin.
func TestAStartListsTheRouterInterfacesBesideThePorts(t *testing.T) {
	_, _, held, _ := startListing(t) // returns once the cluster's listing has begun, the router's still held
	select {
	case <-held.routerListing:
	case <-time.After(10 * time.Second):
		t.Fatal("the router's interfaces were not listed while the cluster's ports were")
	}
	held.release.Open()
}
