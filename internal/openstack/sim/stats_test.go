package sim_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/sim"
)

// statsWorld makes 8 ports (4 pool ports, one of them claimed, 2 pods' ports, 2 without a kind), a trunk with a
// subport, a group, a floating IP and a load balancer, and asks for a port that does not exist.
func (e *env) statsWorld(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	net, _ := e.namespace(t, "ns", "10.1.0.0/24")
	e.ports(t, net.ID, 3, "raven.cluster=c", "raven.kind=pool")
	claimed := e.ports(t, net.ID, 1, "raven.cluster=c", "raven.kind=pool")[0]
	device := "pod-uid"
	must(e.net.UpdatePort(ctx, claimed.ID, openstack.PortUpdate{DeviceID: &device}))(t)
	e.ports(t, net.ID, 2, "raven.kind=pod")
	e.ports(t, net.ID, 1)
	trunk := e.trunk(t, claimed.ID)
	sub := e.ports(t, net.ID, 1)[0]
	steps(t, func() error {
		return e.net.AddSubports(ctx, trunk, []openstack.Subport{{PortID: sub.ID, SegmentationType: "vlan", SegmentationID: 7}})
	})
	g := must(e.net.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "g"}))(t)
	must(e.net.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: e.ext.ID}))(t)
	e.service(t, "web")
	_, err := e.net.GetPort(ctx, g.ID)
	wantKind(t, "a port with a group's ID", err, openstack.KindNotFound)
}

func TestStats(t *testing.T) {
	e := start(t, sim.Model{})
	e.statsWorld(t)
	want := sim.Objects{Networks: 2, Subnets: 2, Ports: 8, PortsByKind: map[string]int{"pool": 4, "pod": 2, "none": 2}, FreePoolPorts: 3,
		Trunks: 1, Subports: 1, SecurityGroups: 1, Rules: 2, FloatingIPs: 1, LoadBalancers: 1, Listeners: 2, Pools: 2, Members: 2}
	for _, url := range []string{e.neutronURL, e.octURL} {
		st := stats(t, url)
		expect(t, "objects", st.Objects, want)
		port := st.Ops["neutron port create"]
		expect(t, "counters", []int64{port.Calls, port.Items, st.Ops["neutron port get"].Errors, st.Totals.Errors, st.Ops["neutron trunk create"].Errors,
			st.Ops["neutron port update"].Calls, st.Ops["octavia loadbalancer create"].Items, st.Totals.Calls - st.Totals.Writes},
			[]int64{5, 8, 1, 2, 1, 1, 2, 1})
	}
	status, _ := raw(t, http.MethodPost, e.octURL+"/sim/reset", "")
	expect(t, "reset", status, http.StatusNoContent)
	st := stats(t, e.neutronURL)
	expect(t, "after the reset", []any{len(st.Ops), st.Totals, st.Objects.Ports}, []any{0, sim.Totals{}, 8})
	must(e.net.ListPorts(t.Context(), openstack.Filter{}))(t)
	expect(t, "one list after the reset", stats(t, e.neutronURL).Totals, sim.Totals{Calls: 1, ListCalls: 1, ListPages: 1})
	for _, on := range []string{"false", "true"} {
		status, _ := raw(t, http.MethodPost, e.neutronURL+"/sim/latency?on="+on, "")
		expect(t, "latency "+on, []any{status, stats(t, e.octURL).Latency}, []any{http.StatusOK, on == "true"})
	}
}

func stats(t *testing.T, url string) sim.Stats {
	t.Helper()
	status, body := raw(t, http.MethodGet, url+"/sim/stats", "")
	if status != http.StatusOK {
		t.Fatalf("stats: %d", status)
	}
	var st sim.Stats
	b, _ := json.Marshal(body)
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}
