package neutron

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

func TestBatcher(t *testing.T) {
	ctx := context.Background()
	n := fake.NewNeutron()
	net, _ := n.CreateNetwork(ctx, openstack.NetworkSpec{Name: "n"})
	if _, err := n.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: net.ID, CIDR: "10.0.0.0/24"}); err != nil {
		t.Fatal(err)
	}
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
