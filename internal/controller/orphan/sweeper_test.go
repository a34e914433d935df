package orphan

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

const grace = 2 * time.Minute

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// cloud is the Neutron side of one cluster c1: namespace "ns" with the ports of pods "live" and "gone",
// and objects the sweep must never touch (another cluster's network and port, an untagged port).
type cloud struct {
	n       *fake.Neutron
	m       *neutron.Manager
	net     *openstack.Network
	subnet  *openstack.Subnet
	ports   map[string]string // pod UID → port ID
	foreign []string          // IDs of networks and ports that are not c1's
}

func newCloud(t *testing.T) *cloud {
	t.Helper()
	ctx := context.Background()
	n := fake.NewNeutron()
	n.Now = func() time.Time { return t0 }
	cl, err := neutron.EnsureCluster(ctx, n, "c1", config.Neutron{ExternalNetwork: "public", PodSubnetPoolCIDR: "10.244.0.0/16", PodSubnetPrefixLength: 24}, false)
	if err != nil {
		t.Fatal(err)
	}
	m := &neutron.Manager{N: n, C: cl, X: neutron.NewIndex()}
	nn, err := m.EnsureNamespace(ctx, "ns-uid", "ns")
	if err != nil {
		t.Fatal(err)
	}
	c := &cloud{n: n, m: m, net: &nn.Network, subnet: nn.Subnet, ports: map[string]string{}}
	for _, uid := range []string{"live-uid", "gone-uid"} {
		p, _, err := m.EnsurePort(ctx, neutron.PodRef{UID: uid, Namespace: "ns", Name: uid[:4]}, nn, "")
		if err != nil {
			t.Fatal(err)
		}
		c.ports[uid] = p.ID
	}
	// Another cluster's namespace network with a pod port on it, and an untagged port on the public network.
	otherNet, err := n.CreateNetwork(ctx, openstack.NetworkSpec{Name: "c2-ns"})
	if err != nil {
		t.Fatal(err)
	}
	otherPort, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: otherNet.ID, DeviceID: "c2-pod"})
	if err != nil {
		t.Fatal(err)
	}
	untagged, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: "public", DeviceID: "someone"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.ReplaceTags(ctx, openstack.ResourceNetworks, otherNet.ID, ownership.Owner{Cluster: "c2", Kind: ownership.KindNamespace, UID: "ns-uid", Name: "ns"}.Tags()); err != nil {
		t.Fatal(err)
	}
	if err := n.ReplaceTags(ctx, openstack.ResourcePorts, otherPort.ID, ownership.Owner{Cluster: "c2", Kind: ownership.KindPod, UID: "gone-uid", Name: "ns/gone"}.Tags()); err != nil {
		t.Fatal(err)
	}
	c.foreign = []string{otherNet.ID, otherPort.ID, untagged.ID}
	return c
}

func (c *cloud) sweeper(objs ...client.Object) (*Sweeper, chan event.GenericEvent, chan event.GenericEvent) {
	reader := crfake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	pods, nss := make(chan event.GenericEvent, 10), make(chan event.GenericEvent, 10)
	return &Sweeper{
		Client: reader, Neutron: c.m, PodRepairs: pods, NamespaceRepairs: nss,
		Options: config.Options{ClusterID: "c1", OrphanGracePeriod: config.Duration{Duration: grace}},
	}, pods, nss
}

func (c *cloud) exists(id string) bool {
	_, port := c.n.Ports[id]
	_, net := c.n.Nets[id]
	_, sub := c.n.Subnets[id]
	return port || net || sub
}

func namespaceObj() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", UID: "ns-uid"}}
}

func podObj(name, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
}

type members map[string]bool

func (m members) Holds(addr string) bool { return m[addr] }

func TestOrphanSweep(t *testing.T) {
	cases := []struct {
		name string
		// objs are the Kubernetes objects that still exist.
		objs  []client.Object
		after time.Duration
		// wantPorts are the pod UIDs whose ports remain; wantNetwork says the namespace network remains.
		wantPorts   []string
		wantNetwork bool
		// member says the gone pod's address is still a load balancer member.
		member bool
	}{
		{name: "a gone pod's port stays during the grace period",
			objs: []client.Object{namespaceObj(), podObj("live", "live-uid")}, after: grace / 2,
			wantPorts: []string{"gone-uid", "live-uid"}, wantNetwork: true},
		{name: "a gone pod's port is released after the grace period, a live pod's port stays",
			objs: []client.Object{namespaceObj(), podObj("live", "live-uid")}, after: grace,
			wantPorts: []string{"live-uid"}, wantNetwork: true},
		{name: "a gone pod's port whose address is a load balancer member stays after the grace period",
			objs: []client.Object{namespaceObj(), podObj("live", "live-uid")}, after: grace, member: true,
			wantPorts: []string{"gone-uid", "live-uid"}, wantNetwork: true},
		{name: "a gone namespace keeps its network and ports during the grace period",
			after: grace - time.Second, wantPorts: []string{"gone-uid", "live-uid"}, wantNetwork: true},
		{name: "a gone namespace loses its pods' ports, router interface, subnet and network after the grace period",
			after: grace + time.Hour},
		{name: "a gone namespace whose pods still exist keeps its network while their ports remain",
			objs: []client.Object{podObj("live", "live-uid")}, after: grace + time.Hour,
			wantPorts: []string{"live-uid"}, wantNetwork: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCloud(t)
			s, _, _ := c.sweeper(tc.objs...)
			if tc.member {
				s.Backends = members{c.n.Ports[c.ports["gone-uid"]].FixedIPs[0].IPAddress: true}
			}
			if err := s.Resync(context.Background(), t0.Add(tc.after), true); err != nil {
				t.Fatal(err)
			}
			var remaining []string
			for uid, id := range c.ports {
				if c.exists(id) {
					remaining = append(remaining, uid)
				}
			}
			slices.Sort(remaining)
			if !slices.Equal(remaining, tc.wantPorts) {
				t.Errorf("ports of %v remain, want %v", remaining, tc.wantPorts)
			}
			attached := slices.Contains(c.n.Interfaces[c.m.C.RouterID], c.subnet.ID)
			if c.exists(c.net.ID) != tc.wantNetwork || c.exists(c.subnet.ID) != tc.wantNetwork || attached != tc.wantNetwork {
				t.Errorf("network %v, subnet %v, router interface %v; want all %v", c.exists(c.net.ID), c.exists(c.subnet.ID), attached, tc.wantNetwork)
			}
			for _, id := range c.foreign {
				if !c.exists(id) {
					t.Errorf("%s, of another cluster or untagged, was deleted", id)
				}
			}
		})
	}
}

func TestOrphanSweepSendsRepairs(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t)
	ann := func(o client.Object, key, value string) client.Object {
		o.SetAnnotations(map[string]string{key: value})
		return o
	}
	// The pod "live" announces a port Neutron no longer has; the namespace "lost" announces a network
	// Neutron never had.
	if err := c.n.DeletePort(ctx, c.ports["live-uid"]); err != nil {
		t.Fatal(err)
	}
	lost := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lost", UID: "lost-uid"}}
	s, pods, nss := c.sweeper(namespaceObj(),
		ann(podObj("live", "live-uid"), "kuryr.org/neutron-port", `{"id":"`+c.ports["live-uid"]+`"}`),
		ann(lost, "kuryr.org/neutron-network", `{"id":"net-x"}`))
	if err := s.Resync(ctx, t0.Add(time.Second), true); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-pods:
		if ev.Object.GetName() != "live" {
			t.Fatalf("repair of pod %s, want live", ev.Object.GetName())
		}
	default:
		t.Fatal("the pod whose port vanished was not sent back to its reconciler")
	}
	select {
	case ev := <-nss:
		if ev.Object.GetName() != "lost" {
			t.Fatalf("repair of namespace %s, want lost", ev.Object.GetName())
		}
	default:
		t.Fatal("the namespace whose network is missing was not sent back to its reconciler")
	}
	if len(pods)+len(nss) != 0 {
		t.Fatalf("%d more repairs, want none", len(pods)+len(nss))
	}
}

// With Pods set, the sweep reads the pods there, the cache's own objects, and changes none of them: a repair
// carries the pod's key, not the object.
func TestOrphanSweepReadsPodsInPlace(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t)
	if err := c.n.DeletePort(ctx, c.ports["live-uid"]); err != nil {
		t.Fatal(err)
	}
	live := podObj("live", "live-uid")
	live.Annotations = map[string]string{"kuryr.org/neutron-port": `{"id":"` + c.ports["live-uid"] + `"}`}
	before := live.DeepCopy()
	s, pods, _ := c.sweeper(namespaceObj()) // the client holds no pod: only Pods can show it
	walks := 0
	s.Pods = func(_ context.Context, fn func(*corev1.Pod)) error {
		walks++
		fn(live)
		return nil
	}
	if err := s.Resync(ctx, t0.Add(time.Second), true); err != nil {
		t.Fatal(err)
	}
	if walks == 0 {
		t.Fatal("the sweep did not read the pods through Pods")
	}
	select {
	case ev := <-pods:
		if ev.Object.GetName() != "live" || ev.Object == client.Object(live) {
			t.Fatalf("repair %s (the cache's object: %v), want a key of live", ev.Object.GetName(), ev.Object == client.Object(live))
		}
	default:
		t.Fatal("the pod whose port vanished was not sent back to its reconciler")
	}
	if !reflect.DeepEqual(live, before) {
		t.Errorf("the sweep changed the cache's pod:\n got %+v\nwant %+v", live, before)
	}
}

// portListings counts the listings of every port of the cluster (EachPortPage with the cluster's selector).
type portListings struct {
	*fake.Neutron
	whole int
}

func (p *portListings) EachPortPage(ctx context.Context, f openstack.Filter, fn func([]openstack.Port)) error {
	if slices.Equal(f.Tags, ownership.ClusterSelector("c1")) {
		p.whole++
	}
	return p.Neutron.EachPortPage(ctx, f, fn)
}

// A resync lists every port at first and then once every portAuditPeriod; those between list the namespace
// networks only. So a port made out of band with the cluster's tags, and a port deleted out of band, are seen
// at the next listing of every port: then the first is swept (its owner is gone past the grace period) and the
// pod of the second is sent back to its reconciler. With portAuditPeriod 0, every resync lists every port.
func TestResyncListsEveryPortOncePerAuditPeriod(t *testing.T) {
	cases := []struct {
		name  string
		audit time.Duration
		// wantSecond says whether the second resync, a minute after the first, lists every port.
		wantSecond bool
	}{
		{name: "the resyncs between two listings of every port list none", audit: 30 * time.Minute},
		{name: "portAuditPeriod 0 lists every port at every resync", wantSecond: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newCloud(t)
			rec := &portListings{Neutron: c.n}
			c.m.N = rec
			ann := podObj("live", "live-uid")
			ann.SetAnnotations(map[string]string{"kuryr.org/neutron-port": `{"id":"` + c.ports["live-uid"] + `"}`})
			s, pods, _ := c.sweeper(namespaceObj(), ann, podObj("gone", "gone-uid"))
			s.Options.PortAuditPeriod = config.Duration{Duration: tc.audit}
			if err := s.Resync(ctx, t0, true); err != nil {
				t.Fatal(err)
			}
			if rec.whole != 1 {
				t.Fatalf("%d listings of every port at the first resync, want 1", rec.whole)
			}
			// Out of band: a port with the tags of a pod that never existed, and the live pod's port deleted.
			stray, err := c.n.CreatePort(ctx, openstack.PortSpec{NetworkID: c.net.ID, DeviceID: "stray-uid"})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.n.ReplaceTags(ctx, openstack.ResourcePorts, stray.ID, ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: "stray-uid", Name: "ns/stray"}.Tags()); err != nil {
				t.Fatal(err)
			}
			if err := c.n.DeletePort(ctx, c.ports["live-uid"]); err != nil {
				t.Fatal(err)
			}
			// A minute later, past the grace period of the stray port (the fake dates it t0).
			if err := s.Resync(ctx, t0.Add(grace+time.Minute), true); err != nil {
				t.Fatal(err)
			}
			if got, want := rec.whole == 2, tc.wantSecond; got != want {
				t.Fatalf("the second resync listed every port: %v, want %v", got, want)
			}
			if c.exists(stray.ID) == tc.wantSecond || (len(pods) == 1) != tc.wantSecond {
				t.Fatalf("after the second resync: stray port exists %v, %d repairs; want the listing of every port (%v) to sweep it and repair the pod",
					c.exists(stray.ID), len(pods), tc.wantSecond)
			}
			// Past the audit period: every port is listed again.
			if err := s.Resync(ctx, t0.Add(tc.audit+grace+2*time.Minute), true); err != nil {
				t.Fatal(err)
			}
			if rec.whole < 2 {
				t.Fatal("the resync past portAuditPeriod did not list every port")
			}
			if c.exists(stray.ID) {
				t.Error("the port made out of band for a pod that does not exist was not swept")
			}
			if len(pods) == 0 {
				t.Error("the pod whose port was deleted out of band was never sent back to its reconciler")
			}
		})
	}
}

// The start-up listing is followed, at the first periodic resync, by a second listing of every port: a create
// the previous leader sent before it stopped may end in Neutron after the first. The resyncs after it list no
// port until portAuditPeriod has passed.
func TestTheFirstResyncAfterStartListsEveryPortAgain(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t)
	rec := &portListings{Neutron: c.n}
	c.m.N = rec
	s, _, _ := c.sweeper(namespaceObj(), podObj("live", "live-uid"), podObj("gone", "gone-uid"))
	s.Options.PortAuditPeriod = config.Duration{Duration: 30 * time.Minute}
	if ok, err := s.loadPorts(ctx); !ok || err != nil {
		t.Fatalf("loadPorts: %v %v", ok, err)
	}
	var got []int
	for _, after := range []time.Duration{time.Minute, 2 * time.Minute, 20 * time.Minute} {
		if err := s.Resync(ctx, t0.Add(after), true); err != nil {
			t.Fatal(err)
		}
		got = append(got, rec.whole)
	}
	if want := []int{2, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("listings of every port after the start-up load and each resync: %v, want %v", got, want)
	}
}
