package neutron

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// TestPortsOnFollowsEveryChange checks the ports-by-network index against the ports themselves after puts,
// claims, drops and a listing that replaces the view.
func TestPortsOnFollowsEveryChange(t *testing.T) {
	x := NewIndex()
	pod := func(i int, net string) openstack.Port {
		o := ownership.Owner{Cluster: "c", Kind: ownership.KindPod, UID: fmt.Sprintf("u%d", i), Name: fmt.Sprintf("ns/p%d", i)}
		return openstack.Port{ID: fmt.Sprintf("p%d", i), NetworkID: net, Tags: o.Tags()}
	}
	pool := func(i int, net string) openstack.Port {
		o := ownership.Owner{Cluster: "c", Kind: ownership.KindPool, Name: "ns"}
		return openstack.Port{ID: fmt.Sprintf("f%d", i), NetworkID: net, Tags: o.Tags(), Name: PoolPortName}
	}
	ids := func(ps []openstack.Port) []string {
		out := make([]string, 0, len(ps))
		for _, p := range ps {
			out = append(out, p.ID)
		}
		slices.Sort(out)
		return out
	}
	steps := []struct {
		name string
		do   func()
		want map[string][]string
	}{
		{"ports put on two networks", func() {
			x.PutPort("c", pod(1, "a"))
			x.PutPort("c", pod(2, "b"))
			x.PutPort("c", pool(1, "a"))
		}, map[string][]string{"a": {"f1", "p1"}, "b": {"p2"}}},
		{"a pool port claimed stays on its network", func() {
			x.Claim("a", "", ownership.Owner{Cluster: "c", Kind: ownership.KindPod, UID: "u9", Name: "ns/p9"}, "p9")
		}, map[string][]string{"a": {"f1", "p1"}, "b": {"p2"}}},
		{"a port dropped", func() { x.DropPort("p2") }, map[string][]string{"a": {"f1", "p1"}, "b": {}}},
		{"a listing begun after every change replaces the view", func() {
			x.Replace("c", &Snapshot{Started: time.Now().Add(time.Hour), WithPorts: true, Ports: []openstack.Port{pod(3, "b"), pod(4, "c")}})
		}, map[string][]string{"a": {}, "b": {"p3"}, "c": {"p4"}}},
	}
	for _, st := range steps {
		st.do()
		all := append(x.PortsOfKind(ownership.KindPod), x.PortsOfKind(ownership.KindPool)...)
		for net, want := range st.want {
			got := ids(x.PortsOn(net))
			scanned := ids(slices.DeleteFunc(slices.Clone(all), func(p openstack.Port) bool { return p.NetworkID != net }))
			if !slices.Equal(got, scanned) {
				t.Fatalf("after %s: ports on %s %v, but the ports themselves say %v", st.name, net, got, scanned)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("after %s: ports on %s %v, want %v", st.name, net, got, want)
			}
		}
	}
}
