package neutron

import (
	"context"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

func TestAServiceWithoutFloatingIPCostsNoRequestOnceTheyAreListed(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m := setup(t, n)
	if m.C.ExternalNetworkID == "" {
		t.Skip("the fake cluster has no external network")
	}
	svc := func(uid string) ownership.Owner {
		return ownership.Owner{Cluster: m.C.ID, Kind: ownership.KindService, UID: uid, Name: "ns/" + uid}
	}
	vip, _, err := m.EnsurePort(ctx, PodRef{UID: "vip-holder", Namespace: "ns", Name: "vip"}, mustNamespace(t, m), "")
	if err != nil {
		t.Fatal(err)
	}
	// One Service holds a floating IP from before; another never had one.
	if _, _, err := m.EnsureFloatingIP(ctx, svc("with"), true, "", vip.ID); err != nil {
		t.Fatal(err)
	}
	fresh := &Manager{N: n, C: m.C, X: m.X} // a restarted Raven: nothing known yet
	lists := func() int { n.Lock(); defer n.Unlock(); return n.Calls["ListFloatingIPs"] }

	before := lists()
	if _, _, err := fresh.EnsureFloatingIP(ctx, svc("without"), false, "", ""); err != nil {
		t.Fatal(err)
	}
	if lists() != before+1 {
		t.Fatal("before any listing, a Service's floating IPs must be listed")
	}
	if err := fresh.LoadFloatingIPs(ctx); err != nil {
		t.Fatal(err)
	}
	before = lists()
	if _, _, err := fresh.EnsureFloatingIP(ctx, svc("without"), false, "", ""); err != nil {
		t.Fatal(err)
	}
	if lists() != before {
		t.Fatalf("a Service known to hold no floating IP cost %d listings", lists()-before)
	}
	// The one that holds a floating IP and no longer wants it still loses it.
	_, change, err := fresh.EnsureFloatingIP(ctx, svc("with"), false, "", "")
	if err != nil || len(change.Released) != 1 {
		t.Fatalf("released %v, %v; want the Service's floating IP released", change.Released, err)
	}
	if fips, _ := n.ListFloatingIPs(ctx, openstack.Filter{Tags: svc("with").Tags()[:3]}); len(fips) != 0 {
		t.Fatalf("%d floating IPs left", len(fips))
	}
}

func TestAListingBegunBeforeAFloatingIPWasMadeDoesNotHideIt(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m := setup(t, n)
	vip, _, err := m.EnsurePort(ctx, PodRef{UID: "vip-holder", Namespace: "ns", Name: "vip"}, mustNamespace(t, m), "")
	if err != nil {
		t.Fatal(err)
	}
	svc := func(uid string) ownership.Owner {
		return ownership.Owner{Cluster: m.C.ID, Kind: ownership.KindService, UID: uid, Name: "ns/" + uid}
	}
	fresh := &Manager{N: n, C: m.C, X: m.X}
	lists := func() int { n.Lock(); defer n.Unlock(); return n.Calls["ListFloatingIPs"] }
	// A listing begun before Raven made a floating IP does not hide it.
	started := time.Now()
	if _, _, err := fresh.EnsureFloatingIP(ctx, svc("later"), true, "", vip.ID); err != nil {
		t.Fatal(err)
	}
	fresh.NoteFloatingIPs(nil, started)
	before := lists()
	if _, change, err := fresh.EnsureFloatingIP(ctx, svc("later"), false, "", ""); err != nil || len(change.Released) != 1 || lists() != before+1 {
		t.Fatalf("a floating IP made after the listing began was not released (%v, %v)", change.Released, err)
	}
}

func mustNamespace(t *testing.T, m *Manager) *NamespaceNet {
	t.Helper()
	nn, err := m.EnsureNamespace(context.Background(), "ns-uid", "ns")
	if err != nil {
		t.Fatal(err)
	}
	return nn
}

// A Raven that listed the floating IPs before it made its first one (the order of every start) records it.
func TestAFloatingIPMadeAfterTheStartUpListingIsRecorded(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m := setup(t, n)
	vip, _, err := m.EnsurePort(ctx, PodRef{UID: "vip-holder", Namespace: "ns", Name: "vip"}, mustNamespace(t, m), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadFloatingIPs(ctx); err != nil {
		t.Fatal(err)
	}
	owner := ownership.Owner{Cluster: m.C.ID, Kind: ownership.KindService, UID: "svc", Name: "ns/svc"}
	if _, change, err := m.EnsureFloatingIP(ctx, owner, true, "", vip.ID); err != nil || !change.Created {
		t.Fatalf("Created %v, %v; want a floating IP made", change.Created, err)
	}
	if _, change, err := m.EnsureFloatingIP(ctx, owner, false, "", ""); err != nil || len(change.Released) != 1 {
		t.Fatalf("released %v, %v; want the floating IP released once no longer wanted", change.Released, err)
	}
}
