package sim_test

import (
	"fmt"
	"testing"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/sim"
)

// TestRavenNeutronOverHTTP runs Raven's own Neutron layer against the simulator, as the benchmark's Raven does:
// the cluster's objects, a namespace's network, a pod's port and their deletes; a second EnsureCluster finds
// everything and writes nothing.
func TestRavenNeutronOverHTTP(t *testing.T) {
	e := start(t, sim.Model{})
	var refused []string
	e.s.Log = func(format string, args ...any) { refused = append(refused, fmt.Sprintf(format, args...)) }
	ctx := t.Context()
	opts := config.Neutron{ExternalNetwork: "public", ExternalSubnetCIDR: "172.24.4.0/24", PodSubnetPoolCIDR: "10.128.0.0/9",
		PodSubnetPrefixLength: 24, ServiceSubnetCIDR: "10.96.0.0/16", TagPortsOnCreate: "true"}
	c := must(neutron.EnsureCluster(ctx, e.net, "scale", opts, true))(t)
	expect(t, "external network", c.ExternalNetworkID, e.ext.ID)
	m := &neutron.Manager{N: e.net, C: c, X: neutron.NewIndex()}
	m.X.Replace(c.ID, must(neutron.List(ctx, e.net, c))(t))
	nn := must(m.EnsureNamespace(ctx, "ns-uid", "ns"))(t)
	pod := neutron.PodRef{UID: "11111111-2222-3333-4444-555555555555", Namespace: "ns", Name: "web", Node: "node-1"}
	port, created := must2(m.EnsurePort(ctx, pod, nn, ""))(t)
	expect(t, "the pod's port", []any{created, port.NetworkID, port.DeviceID, port.HostID}, []any{true, nn.Network.ID, pod.UID, "node-1"})
	st := e.s.Stats()
	expect(t, "ports by kind", st.Objects.PortsByKind["pod"], 1)

	e.s.Reset()
	again := must(neutron.EnsureCluster(ctx, e.net, "scale", opts, true))(t)
	expect(t, "the second EnsureCluster", []string{again.RouterID, again.SubnetPoolID, again.ServiceSubnet.ID}, []string{c.RouterID, c.SubnetPoolID, c.ServiceSubnet.ID})
	expect(t, "writes of the second EnsureCluster", e.s.Stats().Totals.Writes, int64(0))

	released := must(m.ReleasePorts(ctx, pod.UID))(t)
	expect(t, "ports released", released, 1)
	if err := m.DeleteNamespace(ctx, "ns-uid"); err != nil {
		t.Fatal(err)
	}
	left := must(e.net.ListNetworks(ctx, openstack.Filter{Tags: []string{"raven.cluster=scale", "raven.kind=namespace"}}))(t)
	expect(t, "namespace networks left", len(left), 0)
	expect(t, "requests refused", refused, []string(nil))
}

// must2 is must for calls with two results.
func must2[A, B any](a A, b B, err error) func(testing.TB) (A, B) {
	return func(t testing.TB) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}
