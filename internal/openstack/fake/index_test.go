package fake_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// twins are an unindexed and an indexed Neutron given the same calls: they must answer the same.
type twins [2]*fake.Neutron

func newTwins(indexNow bool) twins {
	plain, indexed := fake.NewNeutron(), fake.NewNeutron()
	plain.UUIDs, indexed.UUIDs = true, true
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	plain.Now, indexed.Now = now, now
	if indexNow {
		indexed.Index()
		indexed.PortsByTag("raven.kind=") // counted from now on by the index
	}
	return twins{plain, indexed}
}

// do makes the call on both and returns the indexed one's answer; the answers must be equal.
func do[T any](t *testing.T, tw twins, call func(*fake.Neutron) (T, error)) T {
	t.Helper()
	a, errA := call(tw[0])
	b, errB := call(tw[1])
	if !reflect.DeepEqual(a, b) || fmt.Sprint(errA) != fmt.Sprint(errB) {
		t.Fatalf("unindexed: %+v, %v\nindexed: %+v, %v", a, errA, b, errB)
	}
	return b
}

// both makes a call that returns only an error on both; the errors must be equal, and nil.
func both(t *testing.T, tw twins, call func(*fake.Neutron) error) {
	t.Helper()
	if err := bothErr(t, tw, call); err != nil {
		t.Fatal(err)
	}
}

// bothErr makes a call that returns only an error on both, and returns the errors, which must be equal.
func bothErr(t *testing.T, tw twins, call func(*fake.Neutron) error) error {
	t.Helper()
	errA, errB := call(tw[0]), call(tw[1])
	if fmt.Sprint(errA) != fmt.Sprint(errB) {
		t.Fatalf("unindexed: %v\nindexed: %v", errA, errB)
	}
	return errB
}

// world is what cluster made.
type world struct {
	nets, subs []string
	router     string
	ports      []openstack.Port
}

// cluster fills the twins: two networks with subnets, a router on one, tagged ports of pods and pools, a
// trunk with a subport, a security group in use; then updates, tag replaces and deletes.
func cluster(t *testing.T, tw twins) world {
	t.Helper()
	ctx := context.Background()
	var w world
	for i := range 2 {
		n := do(t, tw, func(n *fake.Neutron) (*openstack.Network, error) {
			return n.CreateNetwork(ctx, openstack.NetworkSpec{Name: fmt.Sprint("ns-", i)})
		})
		s := do(t, tw, func(f *fake.Neutron) (*openstack.Subnet, error) {
			return f.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: n.ID, CIDR: fmt.Sprintf("10.%d.0.0/24", i)})
		})
		w.nets, w.subs = append(w.nets, n.ID), append(w.subs, s.ID)
	}
	w.router = do(t, tw, func(n *fake.Neutron) (*openstack.Router, error) {
		return n.CreateRouter(ctx, openstack.RouterSpec{Name: "r"})
	}).ID
	both(t, tw, func(n *fake.Neutron) error { return n.AddRouterInterface(ctx, w.router, w.subs[0]) })
	g := do(t, tw, func(n *fake.Neutron) (*openstack.SecurityGroup, error) {
		return n.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "g"})
	})
	for b := range 6 {
		w.ports = append(w.ports, do(t, tw, func(n *fake.Neutron) ([]openstack.Port, error) { return n.CreatePorts(ctx, specs(w, g.ID, b)) })...)
	}
	churn(t, tw, w, g.ID)
	return w
}

// specs are the b-th bulk of five ports: pods (every third, with a device) and pool ports, on both networks.
func specs(w world, group string, b int) []openstack.PortSpec {
	var out []openstack.PortSpec
	for i := b * 5; i < b*5+5; i++ {
		s := openstack.PortSpec{NetworkID: w.nets[i%2], Name: fmt.Sprint("p", i), DeviceOwner: "compute:kuryr",
			Tags: []string{"raven.cluster=c", "raven.kind=pool"}}
		if i%3 == 0 {
			s.DeviceID = fmt.Sprint("uid-", i)
			s.Tags = []string{"raven.cluster=c", "raven.kind=pod", "raven.uid=" + s.DeviceID}
		}
		if i%5 == 0 {
			s.SecurityGroups = []string{group}
		}
		out = append(out, s)
	}
	return out
}

// churn changes and deletes some of the ports, and makes others in their place.
func churn(t *testing.T, tw twins, w world, group string) {
	t.Helper()
	ctx := context.Background()
	device := "uid-x"
	do(t, tw, func(n *fake.Neutron) (*openstack.Port, error) {
		return n.UpdatePort(ctx, w.ports[1].ID, openstack.PortUpdate{DeviceID: &device})
	})
	both(t, tw, func(n *fake.Neutron) error {
		return n.ReplaceTags(ctx, openstack.ResourcePorts, w.ports[2].ID, []string{"raven.cluster=c", "raven.kind=pod", "raven.uid=uid-2"})
	})
	for _, i := range []int{4, 7} {
		both(t, tw, func(n *fake.Neutron) error { return n.DeletePort(ctx, w.ports[i].ID) })
	}
	do(t, tw, func(n *fake.Neutron) ([]openstack.Port, error) { return n.CreatePorts(ctx, specs(w, group, 6)) })
	do(t, tw, func(n *fake.Neutron) (*openstack.Port, error) {
		return n.CreatePort(ctx, openstack.PortSpec{NetworkID: w.nets[0], IPAddress: w.ports[0].FixedIPs[0].IPAddress})
	})
	do(t, tw, func(n *fake.Neutron) (*openstack.Port, error) {
		return n.CreatePort(ctx, openstack.PortSpec{NetworkID: w.nets[1], MACAddress: w.ports[1].MACAddress})
	})
	trunk := do(t, tw, func(n *fake.Neutron) (*openstack.Trunk, error) { return n.CreateTrunk(ctx, w.ports[10].ID) })
	both(t, tw, func(n *fake.Neutron) error {
		return n.AddSubports(ctx, trunk.ID, []openstack.Subport{{PortID: w.ports[11].ID, SegmentationType: "vlan", SegmentationID: 5}})
	})
	for _, call := range []func(*fake.Neutron) error{
		func(n *fake.Neutron) error { return n.DeletePort(ctx, w.ports[11].ID) },
		func(n *fake.Neutron) error { return n.DeleteSecurityGroup(ctx, group) },
		func(n *fake.Neutron) error { return n.DeleteNetwork(ctx, w.nets[0]) },
	} {
		if err := bothErr(t, tw, call); openstack.KindOf(err) != openstack.KindConflict {
			t.Fatalf("%v, want a conflict", err)
		}
	}
	r := do(t, tw, func(n *fake.Neutron) (*openstack.SecurityGroupRule, error) {
		return n.CreateSecurityGroupRule(ctx, openstack.SecurityGroupRule{SecurityGroupID: group, Direction: "ingress", EtherType: "IPv4"})
	})
	both(t, tw, func(n *fake.Neutron) error { return n.DeleteSecurityGroupRule(ctx, r.ID) })
}

// pages lists all the ports q selects in pages of three.
func pages(t *testing.T, n *fake.Neutron, q fake.Query) []openstack.Port {
	t.Helper()
	var out []openstack.Port
	q.Limit = 3
	for {
		p, err := n.PortsPage(q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Items...)
		if !p.More {
			return out
		}
		q.Marker = p.Items[len(p.Items)-1].ID
	}
}

func TestIndexedNeutronAnswersAsUnindexed(t *testing.T) {
	for _, indexNow := range []bool{true, false} {
		t.Run(fmt.Sprint("indexed from the start: ", indexNow), func(t *testing.T) {
			tw := newTwins(indexNow)
			w := cluster(t, tw)
			if !indexNow {
				tw[1].Index()
			}
			ip := w.ports[3].FixedIPs[0]
			for _, q := range []fake.Query{
				{},
				{Filter: openstack.Filter{NetworkID: w.nets[0]}},
				{Filter: openstack.Filter{DeviceID: "uid-0"}},
				{Filter: openstack.Filter{DeviceID: "uid-x", NetworkID: w.nets[1]}},
				{Filter: openstack.Filter{DeviceID: w.router}},
				{Filter: openstack.Filter{DeviceOwner: openstack.SubportOwner}},
				{Filter: openstack.Filter{Tags: []string{"raven.cluster=c", "raven.kind=pool"}}},
				{Filter: openstack.Filter{Tags: []string{"raven.uid=uid-2"}}},
				{Filter: openstack.Filter{Tags: []string{"nobody"}}},
				{Filter: openstack.Filter{DeviceOwner: "compute:kuryr", NotTagsAny: []string{"raven.kind=pod"}}},
				{Filter: openstack.Filter{Name: "p5"}},
				{TagsAny: []string{"raven.uid=uid-0", "raven.uid=uid-3"}},
				{NotTags: []string{"raven.cluster=c", "raven.kind=pool"}},
				{IPAddresses: []string{ip.IPAddress}},
				{IPAddresses: []string{ip.IPAddress}, SubnetIDs: []string{ip.SubnetID}},
				{SubnetIDs: []string{w.subs[1]}},
			} {
				got := do(t, tw, func(n *fake.Neutron) ([]openstack.Port, error) { return pages(t, n, q), nil })
				want := listed(t, tw[0], q)
				if !slices.Equal(ids(got), ids(want)) {
					t.Fatalf("%+v: paged %v, listed %v", q, ids(got), ids(want))
				}
			}
			do(t, tw, func(n *fake.Neutron) (fake.Counts, error) { return n.Count(), nil })
			do(t, tw, func(n *fake.Neutron) (map[string]int, error) { return n.PortsByTag("raven.kind="), nil })
			if free := do(t, tw, func(n *fake.Neutron) (int, error) { return n.PortsWithoutDevice("raven.kind=pool"), nil }); free == 0 {
				t.Fatal("no free pool port counted")
			}
		})
	}
}

// listed is what ListPorts (and PortsWithAddress) give for q, sorted by ID.
func listed(t *testing.T, n *fake.Neutron, q fake.Query) []openstack.Port {
	t.Helper()
	all, err := n.ListPorts(context.Background(), q.Filter)
	if err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(p openstack.Port) bool {
		return !hasAny(p.Tags, q.TagsAny) || len(q.NotTags) > 0 && hasAll(p.Tags, q.NotTags) || !onAddress(p, q) || q.DeviceID != "" && len(q.Tags) > 0 && p.DeviceOwner == "network:router_interface"
	})
	slices.SortFunc(all, func(a, b openstack.Port) int { return cmp(a.ID, b.ID) })
	return all
}

func hasAny(tags, any []string) bool {
	return len(any) == 0 || slices.ContainsFunc(any, func(t string) bool { return slices.Contains(tags, t) })
}

func hasAll(tags, all []string) bool {
	return !slices.ContainsFunc(all, func(t string) bool { return !slices.Contains(tags, t) })
}

func onAddress(p openstack.Port, q fake.Query) bool {
	return len(q.IPAddresses)+len(q.SubnetIDs) == 0 || slices.ContainsFunc(p.FixedIPs, func(f openstack.FixedIP) bool {
		return (len(q.IPAddresses) == 0 || slices.Contains(q.IPAddresses, f.IPAddress)) && (len(q.SubnetIDs) == 0 || slices.Contains(q.SubnetIDs, f.SubnetID))
	})
}

func cmp(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ids(ps []openstack.Port) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out
}

// allPages reads every page of a list, two objects a page.
func allPages[T any](list func(fake.Query) (fake.Page[T], error), q fake.Query, id func(T) string) ([]T, error) {
	var out []T
	q.Limit = 2
	for {
		p, err := list(q)
		if err != nil || !p.More {
			return append(out, p.Items...), err
		}
		out = append(out, p.Items...)
		q.Marker = id(p.Items[len(p.Items)-1])
	}
}

func TestIndexedTagListsAnswerAsUnindexed(t *testing.T) {
	ctx := context.Background()
	tw := newTwins(true)
	var nets, groups []string
	for i := range 6 {
		nets = append(nets, do(t, tw, func(n *fake.Neutron) (*openstack.Network, error) {
			return n.CreateNetwork(ctx, openstack.NetworkSpec{Name: fmt.Sprint("n", i)})
		}).ID)
		groups = append(groups, do(t, tw, func(n *fake.Neutron) (*openstack.SecurityGroup, error) {
			return n.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: fmt.Sprint("g", i)})
		}).ID)
	}
	for i := range 6 {
		tags := []string{"a", fmt.Sprint("b", i%2)}
		both(t, tw, func(n *fake.Neutron) error { return n.ReplaceTags(ctx, openstack.ResourceNetworks, nets[i], tags) })
		both(t, tw, func(n *fake.Neutron) error {
			return n.ReplaceTags(ctx, openstack.ResourceSecurityGroups, groups[i], tags)
		})
	}
	both(t, tw, func(n *fake.Neutron) error {
		return n.ReplaceTags(ctx, openstack.ResourceNetworks, nets[1], []string{"c"})
	})
	both(t, tw, func(n *fake.Neutron) error { return n.DeleteNetwork(ctx, nets[2]) })
	both(t, tw, func(n *fake.Neutron) error { return n.DeleteSecurityGroup(ctx, groups[3]) })
	for _, tags := range [][]string{{"a"}, {"a", "b0"}, {"b1", "a"}, {"c"}, {"x"}, nil} {
		q := fake.Query{Filter: openstack.Filter{Tags: tags}}
		nw := do(t, tw, func(n *fake.Neutron) ([]openstack.Network, error) {
			return allPages(n.NetworksPage, q, func(x openstack.Network) string { return x.ID })
		})
		gs := do(t, tw, func(n *fake.Neutron) ([]openstack.SecurityGroup, error) {
			return allPages(n.SecurityGroupsPage, q, func(x openstack.SecurityGroup) string { return x.ID })
		})
		if len(tags) > 0 && tags[0] == "a" && (len(nw) == 0 || len(gs) == 0) {
			t.Fatalf("tags %v: %d networks, %d groups listed", tags, len(nw), len(gs))
		}
	}
}
