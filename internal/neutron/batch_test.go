package neutron

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

// netWithSubnet makes a network "n" with one subnet of cidr, outside any cluster.
func netWithSubnet(t *testing.T, n *fake.Neutron, cidr string) *openstack.Network {
	t.Helper()
	net, err := n.CreateNetwork(context.Background(), openstack.NetworkSpec{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateSubnet(context.Background(), openstack.SubnetSpec{NetworkID: net.ID, CIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	return net
}

func TestBatcher(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	net := netWithSubnet(t, n, "10.0.0.0/24")
	var mu sync.Mutex
	created := 0
	b := &Batcher{N: n, Max: 50, InFlight: 1, Created: func(openstack.Port) { mu.Lock(); created++; mu.Unlock() }}

	t.Run("a lone create is a single-port request", func(t *testing.T) {
		if _, err := b.Create(ctx, openstack.PortSpec{NetworkID: net.ID}); err != nil {
			t.Fatal(err)
		}
		if n.Called("CreatePort") != 1 || n.Called("CreatePorts") != 0 {
			t.Fatalf("calls %v", n.Calls)
		}
	})
	t.Run("a burst of 100 goes out in few bulk requests, each port to its caller", func(t *testing.T) {
		n.Delay = 20 * time.Millisecond
		defer func() { n.Delay = 0 }()
		var wg sync.WaitGroup
		ids := make([]string, 100)
		for i := range 100 {
			wg.Go(func() {
				p, err := b.Create(ctx, openstack.PortSpec{NetworkID: net.ID, DeviceID: string(rune('a' + i%26))})
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = p.ID
			})
		}
		wg.Wait()
		seen := map[string]bool{}
		for _, id := range ids {
			if id == "" || seen[id] {
				t.Fatalf("port %q missing or given twice", id)
			}
			seen[id] = true
		}
		if calls := n.Called("CreatePort", "CreatePorts"); calls > 10 {
			t.Fatalf("%d requests for 100 ports", calls)
		}
		if created != 101 {
			t.Fatalf("Created saw %d ports, want 101", created)
		}
	})
	t.Run("a failing bulk request falls back to one request per port", func(t *testing.T) {
		n.Fail("CreatePorts", -1, openstack.NewError("bulk", openstack.KindQuota, 409, "OverQuota"))
		var wg sync.WaitGroup
		errs := make(chan error, 5)
		for range 5 {
			wg.Go(func() {
				_, err := b.Create(ctx, openstack.PortSpec{NetworkID: net.ID})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("every port must still be created alone: %v", err)
			}
		}
	})
}

// heldCreates is a Neutron whose port creates wait for release: pods' creates in flight for as long as a test
// needs.
type heldCreates struct {
	*fake.Neutron
	started chan struct{}
	release chan struct{}
}

func (h *heldCreates) CreatePort(ctx context.Context, s openstack.PortSpec) (*openstack.Port, error) {
	h.started <- struct{}{}
	<-h.release
	return h.Neutron.CreatePort(ctx, s)
}

// holdCreate starts a create through b that waits, in Neutron, until release is closed.
func holdCreate(t *testing.T, b *Batcher, h *heldCreates, netID string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := b.Create(context.Background(), openstack.PortSpec{NetworkID: netID}); done <- err }()
	<-h.started
	return done
}

func TestWaitIdle(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	net := netWithSubnet(t, n, "10.0.0.0/24")
	t.Run("a nil or idle Batcher does not wait", func(t *testing.T) {
		var nilB *Batcher
		if d := nilB.WaitIdle(ctx, time.Hour); d != 0 {
			t.Fatalf("a nil Batcher waited %v", d)
		}
		if d := (&Batcher{N: n, Max: 50, InFlight: 2}).WaitIdle(ctx, time.Hour); d != 0 {
			t.Fatalf("an idle Batcher waited %v", d)
		}
	})
	t.Run("a create in flight holds the wait until its limit", func(t *testing.T) {
		h := &heldCreates{Neutron: n, started: make(chan struct{}), release: make(chan struct{})}
		b := &Batcher{N: h, Max: 50, InFlight: 2}
		done := holdCreate(t, b, h, net.ID)
		if d := b.WaitIdle(ctx, 20*time.Millisecond); d < 20*time.Millisecond {
			t.Fatalf("waited %v with a create in flight, want its limit of 20ms", d)
		}
		close(h.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the wait ends when the last create does", func(t *testing.T) {
		h := &heldCreates{Neutron: n, started: make(chan struct{}), release: make(chan struct{})}
		b := &Batcher{N: h, Max: 50, InFlight: 2}
		done := holdCreate(t, b, h, net.ID)
		waited := make(chan time.Duration, 1)
		go func() { waited <- b.WaitIdle(ctx, time.Hour) }()
		for waiting := false; !waiting; runtime.Gosched() { // until the wait is registered
			b.mu.Lock()
			waiting = b.idle != nil
			b.mu.Unlock()
		}
		close(h.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d := <-waited; d == 0 || d >= time.Hour {
			t.Fatalf("waited %v, want the create's end", d)
		}
		if b.Busy() {
			t.Fatal("the Batcher is busy after its only create ended")
		}
	})
}

// TestRelistLetsPodCreatesGoFirst checks that a resync's port listing waits between its pages while pod ports
// are being created, and lists every port all the same.
func TestRelistLetsPodCreatesGoFirst(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	m := setup(t, n)
	net := netWithSubnet(t, n, "10.1.0.0/20")
	for i := range 2*openstack.PortPageSize + 1 {
		o := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: fmt.Sprintf("u%d", i)}
		if _, err := n.CreatePort(ctx, openstack.PortSpec{NetworkID: net.ID, Tags: o.Tags()}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := List(ctx, n, m.C)
	if err != nil {
		t.Fatal(err)
	}
	full := len(all.Ports) / openstack.PortPageSize
	if full < 2 || all.Yields != 0 {
		t.Fatalf("List: %d ports, %d yields; want more than two pages and no yield", len(all.Ports), all.Yields)
	}
	h := &heldCreates{Neutron: n, started: make(chan struct{}), release: make(chan struct{})}
	m.B = &Batcher{N: h, Max: 50, InFlight: 2}
	m.PageYield = 20 * time.Millisecond
	t.Run("with a create in flight, it waits after each full page", func(t *testing.T) {
		done := holdCreate(t, m.B, h, net.ID)
		s, err := m.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Ports) != len(all.Ports) {
			t.Fatalf("listed %d ports, want %d", len(s.Ports), len(all.Ports))
		}
		if s.Yields != full || s.Yielded < time.Duration(full)*m.PageYield {
			t.Fatalf("waited after %d pages for %v, want %d pages at their limit of %v", s.Yields, s.Yielded, full, m.PageYield)
		}
		close(h.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The create's caller has its port a moment before the Batcher's loop ends: wait for that end.
		if d := m.B.WaitIdle(ctx, time.Minute); d >= time.Minute {
			t.Fatalf("the Batcher stayed busy %v after its only create ended", d)
		}
	})
	t.Run("with no create in flight, it does not wait", func(t *testing.T) {
		s, err := m.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Yields != 0 || len(s.Ports) != len(all.Ports) {
			t.Fatalf("%d yields and %d ports, want none and %d", s.Yields, len(s.Ports), len(all.Ports))
		}
	})
}
