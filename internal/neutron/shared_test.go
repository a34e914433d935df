package neutron

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// decoded is a port as a JSON decoder gives it: every string its own copy.
func decoded(id, name, node string) openstack.Port {
	c := func(s string) string { return string([]byte(s)) }
	return openstack.Port{ID: c(id), Name: c(name), NetworkID: c("net-1"), ProjectID: c("project"), DeviceOwner: c("compute:kuryr"),
		HostID: c(node), Status: c("ACTIVE"), VIFType: c("ovs"), MACAddress: c("fa:16:3e:00:00:01"),
		FixedIPs:       []openstack.FixedIP{{SubnetID: c("subnet-1"), IPAddress: c("10.0.0." + id)}},
		SecurityGroups: []string{c("sg-a"), c("sg-b")},
		Tags:           []string{c("raven.cluster=c1"), c("raven.kind=pod"), c("raven.owner=ns/" + name), c("raven.uid=uid-" + id)},
		VIFDetails:     map[string]any{"port_filter": true, "connectivity": c("l2")},
		Extra:          map[string]any{"unread": 1}}
}

func sameMemory(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestSharedPortsKeepTheirValuesAndShareTheRepeatedOnes(t *testing.T) {
	s := newShared()
	a, b := decoded("1", "a", "node-1"), decoded("2", "b", "node-1")
	sa, sb := s.port(a), s.port(b)
	a.Extra, b.Extra = nil, nil
	if !reflect.DeepEqual(sa, a) || !reflect.DeepEqual(sb, b) {
		t.Fatalf("sharing changed a port:\n got %+v\nwant %+v", sb, b)
	}
	for _, c := range []struct {
		what   string
		a, b   string
		shared bool
	}{
		{"network", sa.NetworkID, sb.NetworkID, true},
		{"project", sa.ProjectID, sb.ProjectID, true},
		{"device owner", sa.DeviceOwner, sb.DeviceOwner, true},
		{"node", sa.HostID, sb.HostID, true},
		{"subnet", sa.FixedIPs[0].SubnetID, sb.FixedIPs[0].SubnetID, true},
		{"cluster tag", sa.Tags[0], sb.Tags[0], true},
		{"kind tag", sa.Tags[1], sb.Tags[1], true},
		{"security group", sa.SecurityGroups[1], sb.SecurityGroups[1], true},
		{"owner tag", sa.Tags[2], sb.Tags[2], false},
	} {
		if got := sameMemory(c.a, c.b); got != c.shared {
			t.Errorf("%s: shared %v, want %v", c.what, got, c.shared)
		}
	}
	if &sa.SecurityGroups[0] != &sb.SecurityGroups[0] || cap(sa.SecurityGroups) != len(sa.SecurityGroups) {
		t.Errorf("the security groups are not one slice without spare capacity: cap %d", cap(sa.SecurityGroups))
	}
	if reflect.ValueOf(sa.VIFDetails).UnsafePointer() != reflect.ValueOf(sb.VIFDetails).UnsafePointer() {
		t.Error("equal binding details are two maps")
	}
	for _, v := range s.strs {
		if v == a.Tags[2] || v == a.Tags[3] || v == a.ID || v == a.FixedIPs[0].IPAddress {
			t.Errorf("the shared table keeps %q, a value of one port", v)
		}
	}
}

func TestSharedGroupsGrowWithoutTouchingOtherPorts(t *testing.T) {
	s := newShared()
	a, b := s.port(decoded("1", "a", "n")), s.port(decoded("2", "b", "n"))
	a.SecurityGroups = append(a.SecurityGroups, "sg-c")
	if fmt.Sprint(b.SecurityGroups) != "[sg-a sg-b]" {
		t.Errorf("an append to one port's groups changed another's: %v", b.SecurityGroups)
	}
}

func TestAReplaceDropsTheSharedValuesOfGonePorts(t *testing.T) {
	x := NewIndex()
	x.PutPort("c1", decoded("1", "a", "node-gone"))
	if _, ok := x.sh.strs["node-gone"]; !ok {
		t.Fatal("the node of a put port is not shared")
	}
	x.Replace("c1", &Snapshot{WithPorts: true, Started: time.Now()})
	if _, ok := x.sh.strs["node-gone"]; ok {
		t.Error("the node of a port gone at the last listing is still held")
	}
}

// TestListedPortsShareAsTheyArrive checks that a listing's ports share their repeated values as each page
// arrives, and that the index keeps the listing's table: a port put after the listing shares with the listed.
func TestListedPortsShareAsTheyArrive(t *testing.T) {
	n := fake.NewNeutron()
	for i := range openstack.PortPageSize + 1 { // two pages
		p := decoded(fmt.Sprint(i), fmt.Sprintf("p%d", i), "node-1")
		n.Ports[p.ID] = &p
	}
	s, err := List(t.Context(), n, &Cluster{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Ports) != openstack.PortPageSize+1 {
		t.Fatalf("listed %d ports, want %d", len(s.Ports), openstack.PortPageSize+1)
	}
	first, last := s.Ports[0], s.Ports[len(s.Ports)-1]
	if !sameMemory(first.NetworkID, last.NetworkID) || !sameMemory(first.HostID, last.HostID) || first.Extra != nil {
		t.Fatal("the listed ports of two pages keep their own copies of their network and node")
	}
	x := NewIndex()
	x.Replace("c1", s)
	later := decoded("new", "new", "node-1")
	x.PutPort("c1", later)
	got, ok := x.Port("new")
	if !ok || !sameMemory(got.NetworkID, first.NetworkID) {
		t.Fatal("a port put after the listing does not share the listing's values")
	}
}
