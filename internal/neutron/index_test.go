package neutron

import (
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

func TestReplaceKeepsChangesMadeWhileListing(t *testing.T) {
	pod := func(id, uid string) openstack.Port {
		return openstack.Port{ID: id, NetworkID: "n", Tags: ownership.Owner{Cluster: "c", Kind: ownership.KindPod, UID: uid}.Tags()}
	}
	pool := func(id string) openstack.Port {
		return openstack.Port{ID: id, NetworkID: "n", Tags: ownership.Owner{Cluster: "c", Kind: ownership.KindPool}.Tags()}
	}
	owner := ownership.Owner{Cluster: "c", Kind: ownership.KindPod, UID: "u-claim"}
	cases := []struct {
		name   string
		before func(x *Index)               // before the listing begins
		during func(x *Index)               // while Neutron is listed
		listed []openstack.Port             // what the listing returned
		nets   []openstack.Network          // the namespace networks the listing returned
		check  func(t *testing.T, x *Index) // after Replace
	}{
		{
			name:   "a port created while listing is kept",
			during: func(x *Index) { x.PutPort("c", pod("p1", "u1")) },
			check: func(t *testing.T, x *Index) {
				if len(x.PortsOf("u1")) != 1 {
					t.Fatal("the new port was forgotten")
				}
			},
		},
		{
			name:   "a port deleted while listing does not come back",
			before: func(x *Index) { x.PutPort("c", pod("p1", "u1")) },
			during: func(x *Index) { x.DropPort("p1") },
			listed: []openstack.Port{pod("p1", "u1")},
			check: func(t *testing.T, x *Index) {
				if len(x.PortsOf("u1")) != 0 {
					t.Fatal("the deleted port came back")
				}
			},
		},
		{
			name:   "a pool port claimed before the listing stays claimed while Neutron still shows it free",
			before: func(x *Index) { x.PutPort("c", pool("p1")); x.Claim("n", "", owner, "pod") },
			listed: []openstack.Port{pool("p1")},
			check: func(t *testing.T, x *Index) {
				if x.FreeIn("n", "") != 0 || len(x.PortsOf("u-claim")) != 1 {
					t.Fatal("a claimed port went back to the pool: it could be given twice")
				}
			},
		},
		{
			name:   "a claim confirmed while listing stays with its pod",
			before: func(x *Index) { x.PutPort("c", pool("p1")); x.Claim("n", "", owner, "pod") },
			during: func(x *Index) { x.Confirm("p1", owner.UID) },
			listed: []openstack.Port{pool("p1")},
			check: func(t *testing.T, x *Index) {
				if x.FreeIn("n", "") != 0 || len(x.PortsOf("u-claim")) != 1 {
					t.Fatal("a confirmed claim was undone by an older listing")
				}
			},
		},
		{
			name:   "a namespace network created while listing is kept",
			during: func(x *Index) { x.SetNetwork(NamespaceNet{NamespaceUID: "ns1", Network: openstack.Network{ID: "n1"}}) },
			check: func(t *testing.T, x *Index) {
				if x.Network("ns1") == nil {
					t.Fatal("the new network was forgotten: the namespace's pods would wait for the next resync")
				}
			},
		},
		{
			name:   "a namespace network deleted while listing does not come back",
			before: func(x *Index) { x.SetNetwork(NamespaceNet{NamespaceUID: "ns1", Network: openstack.Network{ID: "n1"}}) },
			during: func(x *Index) { x.DropNetwork("ns1") },
			nets:   []openstack.Network{nsNet("n1", "ns1")},
			check: func(t *testing.T, x *Index) {
				if x.Network("ns1") != nil {
					t.Fatal("the deleted network came back")
				}
			},
		},
		{
			name:   "an untouched namespace network follows the listing",
			before: func(x *Index) { x.SetNetwork(NamespaceNet{NamespaceUID: "ns1", Network: openstack.Network{ID: "n1"}}) },
			nets:   []openstack.Network{nsNet("n2", "ns2")},
			check: func(t *testing.T, x *Index) {
				if x.Network("ns1") != nil || x.Network("ns2") == nil {
					t.Fatal("the index does not follow the listing for networks Raven did not change")
				}
			},
		},
		{
			name:   "an untouched port follows the listing",
			before: func(x *Index) { x.PutPort("c", pod("p1", "u1")) },
			listed: nil,
			check: func(t *testing.T, x *Index) {
				if len(x.PortsOf("u1")) != 0 {
					t.Fatal("a port deleted out of band stayed in the index")
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := NewIndex()
			// The index's clock moves only when the test says: each change is dated before or after the
			// listing began, whatever the resolution of the machine's clock.
			now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			x.now = func() time.Time { return now }
			if tc.before != nil {
				tc.before(x)
			}
			now = now.Add(time.Second)
			snap := &Snapshot{Started: now, Ports: tc.listed, Networks: tc.nets, WithPorts: true}
			now = now.Add(time.Second)
			if tc.during != nil {
				tc.during(x)
			}
			x.Replace("c", snap)
			tc.check(t, x)
		})
	}
}

func nsNet(id, uid string) openstack.Network {
	return openstack.Network{ID: id, Tags: ownership.Owner{Cluster: "c", Kind: ownership.KindNamespace, UID: uid}.Tags()}
}

// AddListed records a listing of one kind of port as Replace would, but leaves the rest of the view alone: what
// Raven changed after the listing began wins, and the index still does not hold every port.
func TestAddListedKeepsChangesMadeWhileListing(t *testing.T) {
	svc := func(id, uid, ip string) openstack.Port {
		return openstack.Port{ID: id, NetworkID: "svc", FixedIPs: []openstack.FixedIP{{IPAddress: ip}},
			Tags: ownership.Owner{Cluster: "c", Kind: ownership.KindService, UID: uid}.Tags()}
	}
	pod := openstack.Port{ID: "pod-port", NetworkID: "n", Tags: ownership.Owner{Cluster: "c", Kind: ownership.KindPod, UID: "pod"}.Tags()}
	x := NewIndex()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	x.now = func() time.Time { return now }
	x.PutPort("c", pod) // a new pod's port, made before the listing
	x.PutPort("c", svc("gone", "s-gone", "10.96.0.9"))
	now = now.Add(time.Second)
	started := now
	now = now.Add(time.Second)
	x.PutPort("c", svc("changed", "s-changed", "10.96.0.2")) // Raven's newer view of a listed port
	x.DropPort("gone")                                       // deleted while listing
	x.AddListed("c", started, []openstack.Port{svc("listed", "s-listed", "10.96.0.1"), svc("changed", "s-changed", "10.96.0.3"),
		svc("gone", "s-gone", "10.96.0.9"), {ID: "foreign", Tags: ownership.Owner{Cluster: "other", Kind: ownership.KindService, UID: "x"}.Tags()}})

	if ps := x.PortsOf("s-listed"); len(ps) != 1 {
		t.Errorf("the listed port is not in the index: %v", ps)
	}
	if ps := x.PortsOf("s-changed"); len(ps) != 1 || ps[0].FixedIPs[0].IPAddress != "10.96.0.2" {
		t.Errorf("a port changed while listing is %v, want Raven's view (10.96.0.2)", ps)
	}
	if ps := x.PortsOf("s-gone"); len(ps) != 0 {
		t.Errorf("a port deleted while listing came back: %v", ps)
	}
	if x.Known("foreign") {
		t.Error("another cluster's port is in the index")
	}
	if ps := x.PortsOf("pod"); len(ps) != 1 {
		t.Errorf("the pod's port, not of the listed kind, is %v", ps)
	}
	if x.PortsLoaded() {
		t.Error("the index says it holds every port after a listing of one kind")
	}
}
