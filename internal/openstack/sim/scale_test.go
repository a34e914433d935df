package sim_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/sim"
)

// scale is a Sim filled as the scale benchmark's largest size: 10,000 namespaces, each a network with a
// subnet, 15 pods' ports and a load balancer.
type scale struct {
	*env
	networks, lbs []string
	ports         []openstack.Port
}

const scaleNets, scalePerNet = 10_000, 15

func fill(b *testing.B) *scale {
	b.Helper()
	ctx := b.Context()
	s := &scale{env: start(b, sim.Model{})}
	began := time.Now()
	for i := range scaleNets {
		n := must(s.s.Networking.CreateNetwork(ctx, openstack.NetworkSpec{Name: fmt.Sprint("ns-", i)}))(b)
		nsTags := []string{"raven.cluster=scale", "raven.kind=namespace", fmt.Sprint("raven.uid=ns-", i)}
		if err := s.s.Networking.ReplaceTags(ctx, openstack.ResourceNetworks, n.ID, nsTags); err != nil {
			b.Fatal(err)
		}
		must(s.s.Networking.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: n.ID, CIDR: fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256)}))(b)
		specs := make([]openstack.PortSpec, scalePerNet)
		for j := range specs {
			uid := fmt.Sprintf("uid-%d-%d", i, j)
			specs[j] = openstack.PortSpec{NetworkID: n.ID, DeviceID: uid, DeviceOwner: "compute:kuryr",
				Tags: []string{"raven.cluster=scale", "raven.kind=pod", "raven.uid=" + uid, fmt.Sprintf("raven.owner=ns-%d/pod-%d", i, j)}}
		}
		s.ports = append(s.ports, must(s.s.Networking.CreatePorts(ctx, specs))(b)...)
		s.networks = append(s.networks, n.ID)
		lb := must(s.s.LoadBalancing.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: fmt.Sprint("svc-", i), VipPortID: "vip",
			Tags: []string{"raven.cluster=scale", "raven.kind=service", fmt.Sprint("raven.uid=svc-", i)}, Listeners: []openstack.ListenerGraph{{Listener: openstack.ListenerSpec{Protocol: "TCP", ProtocolPort: 80},
				Pool: openstack.PoolSpec{Name: "p", Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN"}, Members: []openstack.MemberSpec{{Address: "10.0.0.1", ProtocolPort: 80}}}}}))(b)
		s.lbs = append(s.lbs, lb.ID)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("filled in %v: %d ports, %d networks, %d load balancers; heap %d MiB", time.Since(began).Round(time.Millisecond),
		len(s.ports), len(s.networks), len(s.lbs), ms.HeapAlloc>>20)
	return s
}

// BenchmarkScale times, through the real clients and HTTP, what Raven asks of a cloud of 150,000 ports: no
// request may cost a look at every port (the whole list excepted, which costs each port once).
func BenchmarkScale(b *testing.B) {
	s := fill(b)
	ctx := b.Context()
	port := func(i int) openstack.Port { return s.ports[i%len(s.ports)] }
	for _, tc := range []struct {
		name string
		call func(i int) error
	}{
		{"port get", func(i int) error { _, err := s.net.GetPort(ctx, port(i).ID); return err }},
		{"ports by network", func(i int) error {
			_, err := s.net.ListPorts(ctx, openstack.Filter{NetworkID: s.networks[i%scaleNets], Tags: []string{"raven.cluster=scale"}})
			return err
		}},
		{"ports by device and network", func(i int) error {
			_, err := s.net.ListPorts(ctx, openstack.Filter{DeviceID: port(i).DeviceID, NetworkID: port(i).NetworkID})
			return err
		}},
		{"ports by uid tag", func(i int) error {
			_, err := s.net.ListPorts(ctx, openstack.Filter{Tags: []string{"raven.cluster=scale", "raven.uid=" + port(i).DeviceID}})
			return err
		}},
		{"port create and delete", func(i int) error {
			p, err := s.net.CreatePort(ctx, openstack.PortSpec{NetworkID: s.networks[i%scaleNets], Tags: []string{"raven.kind=pool"}})
			if err == nil {
				err = s.net.DeletePort(ctx, p.ID)
			}
			return err
		}},
		{"network by its namespace's tags", func(i int) error {
			_, err := s.net.ListNetworks(ctx, openstack.Filter{Tags: []string{"raven.cluster=scale", "raven.kind=namespace", fmt.Sprint("raven.uid=ns-", i%scaleNets)}})
			return err
		}},
		{"load balancer by its service's tags", func(i int) error {
			_, err := s.lb.ListLoadBalancers(ctx, []string{"raven.cluster=scale", "raven.kind=service", fmt.Sprint("raven.uid=svc-", i%scaleNets)})
			return err
		}},
		{"load balancer get", func(i int) error { _, err := s.lb.GetLoadBalancer(ctx, s.lbs[i%scaleNets]); return err }},
		{"pools of a load balancer", func(i int) error { _, err := s.lb.ListPools(ctx, s.lbs[i%scaleNets]); return err }},
		{"all ports of the cluster, 150 pages", func(int) error {
			_, err := s.net.ListPorts(ctx, openstack.Filter{Tags: []string{"raven.cluster=scale"}})
			return err
		}},
		{"all load balancers, 10 pages", func(int) error {
			_, err := s.lb.ListLoadBalancers(ctx, []string{"raven.cluster=scale"})
			return err
		}},
		{"all ports of the cluster, 150 pages, answers only", func(int) error { return s.pages(b, "/v2.0/ports?limit=1000&tags=raven.cluster%3Dscale") }},
		{"stats", func(int) error { s.s.Stats(); return nil }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := tc.call(i); err != nil {
					b.Fatal(err)
				}
				i += 7919
			}
		})
	}
}

// pages reads the pages of a list, from path on, without decoding the objects.
func (s *scale) pages(b *testing.B, path string) error {
	next := s.neutronURL + path
	for next != "" {
		req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, next, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var page struct {
			Links []struct{ Href string } `json:"ports_links"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		next = ""
		if len(page.Links) > 0 {
			next = page.Links[0].Href
		}
	}
	return nil
}
