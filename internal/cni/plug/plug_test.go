package plug

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and veth pairs (run the tests as root to cover plugging)")
	}
}

func newNS(t *testing.T) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating a network namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = n.Close()
		_ = testutils.UnmountNS(n)
	})
	return n
}

func cidr(t *testing.T, s string) *net.IPNet {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return n
}

func spec(t *testing.T, netns string) Spec {
	mac, _ := net.ParseMAC("fa:16:3e:84:88:2a")
	gw := net.ParseIP("10.244.0.1")
	return Spec{
		Netns:      netns,
		IfName:     "eth0",
		HostIfName: fmt.Sprintf("taptest%04x", rand.IntN(0xffff)),
		MAC:        mac,
		MTU:        1442,
		Address:    cidr(t, "10.244.0.158/24"),
		Routes: []Route{
			{Dst: DefaultRoute(gw), GW: gw},
			{Dst: cidr(t, "192.168.50.0/24"), GW: net.ParseIP("10.244.0.254")},
		},
	}
}

func TestSetupAndTeardownInARealNamespace(t *testing.T) {
	needRoot(t)
	tests := []struct {
		name     string
		teardown func(t *testing.T, s Spec, n ns.NetNS)
	}{
		{name: "teardown by the host end", teardown: func(t *testing.T, s Spec, _ ns.NetNS) {
			if err := Teardown("", s.Netns, s.IfName, s.HostIfName); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "teardown by the pod end only", teardown: func(t *testing.T, s Spec, _ ns.NetNS) {
			if err := Teardown("", s.Netns, s.IfName, ""); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "teardown after the runtime unmounted the namespace and left its file", teardown: func(t *testing.T, s Spec, n ns.NetNS) {
			_ = n.Close()
			if err := unix.Unmount(n.Path(), unix.MNT_DETACH); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Remove(n.Path()) })
			if err := Teardown("", s.Netns, s.IfName, s.HostIfName); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "teardown after the namespace is gone", teardown: func(t *testing.T, s Spec, n ns.NetNS) {
			_ = n.Close()
			if err := testutils.UnmountNS(n); err != nil {
				t.Fatal(err)
			}
			if err := Teardown("", s.Netns, s.IfName, s.HostIfName); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNS(t)
			s := spec(t, n.Path())
			t.Cleanup(func() { _ = Teardown("", "", "", s.HostIfName) })
			res, err := Setup(s)
			if err != nil {
				t.Fatal(err)
			}
			if res.Host.Name != s.HostIfName || res.Pod.Name != "eth0" || res.Pod.HardwareAddr.String() != s.MAC.String() {
				t.Errorf("result %+v", res)
			}
			checkHost(t, s)
			checkPod(t, s)
			tt.teardown(t, s, n)
			if ok, err := HostLinkExists(s.HostIfName); err != nil || ok {
				t.Errorf("host end still there after teardown (err %v)", err)
			}
			// Idempotent.
			if err := Teardown("", s.Netns, s.IfName, s.HostIfName); err != nil {
				t.Errorf("second teardown: %v", err)
			}
		})
	}
}

func checkHost(t *testing.T, s Spec) {
	t.Helper()
	host, err := netlinksafe.LinkByName(s.HostIfName)
	if err != nil {
		t.Fatalf("host end: %v", err)
	}
	if host.Attrs().MTU != s.MTU || host.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("host end MTU %d flags %v, want MTU %d and up", host.Attrs().MTU, host.Attrs().Flags, s.MTU)
	}
	if got := ipv6Disabled(t, s.HostIfName); got != "1" {
		t.Errorf("host end disable_ipv6 = %q, want 1", got)
	}
}

// ipv6Disabled reads the interface's disable_ipv6 in the current namespace.
func ipv6Disabled(t *testing.T, ifName string) string {
	t.Helper()
	v, err := sysctl.Sysctl(fmt.Sprintf("net/ipv6/conf/%s/disable_ipv6", ifName))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSetupKeepsIPv6ForAnIPv6Port(t *testing.T) {
	needRoot(t)
	n := newNS(t)
	s := spec(t, n.Path())
	s.Address, s.Routes = cidr(t, "fd00:10:244::9/64"), nil
	t.Cleanup(func() { _ = Teardown("", "", "", s.HostIfName) })
	if _, err := Setup(s); err != nil {
		t.Fatal(err)
	}
	if got := ipv6Disabled(t, s.HostIfName); got != "1" {
		t.Errorf("host end disable_ipv6 = %q, want 1", got)
	}
	var got string
	if err := n.Do(func(ns.NetNS) error { got = ipv6Disabled(t, s.IfName); return nil }); err != nil {
		t.Fatal(err)
	}
	if got != "0" {
		t.Errorf("pod end of an IPv6 port: disable_ipv6 = %q, want 0", got)
	}
}

func checkPod(t *testing.T, s Spec) {
	t.Helper()
	obs, err := Inspect(s.Netns, s.IfName)
	if err != nil {
		t.Fatal(err)
	}
	if obs.MAC.String() != s.MAC.String() || obs.MTU != s.MTU || !obs.Up || obs.TxChecksum {
		t.Errorf("pod end %+v, want MAC %s MTU %d up, tx checksum off", obs, s.MAC, s.MTU)
	}
	if len(obs.Addrs) != 1 || obs.Addrs[0].String() != "10.244.0.158/24" {
		t.Errorf("pod addresses %v", obs.Addrs)
	}
	if err := ns.WithNetNSPath(s.Netns, checkLoAndRoutes(t, s.IfName)); err != nil {
		t.Fatal(err)
	}
	if err := ns.WithNetNSPath(s.Netns, func(ns.NetNS) error {
		if got := ipv6Disabled(t, s.IfName); got != "1" {
			t.Errorf("pod end of an IPv4 port: disable_ipv6 = %q, want 1", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// checkLoAndRoutes runs in the pod's namespace: lo is up, and the pod interface has the default route and
// the subnet's host route.
func checkLoAndRoutes(t *testing.T, ifName string) func(ns.NetNS) error {
	return func(ns.NetNS) error {
		lo, err := netlinksafe.LinkByName("lo")
		if err != nil {
			return err
		}
		if lo.Attrs().Flags&net.FlagUp == 0 {
			t.Error("lo is down")
		}
		link, err := netlinksafe.LinkByName(ifName)
		if err != nil {
			return err
		}
		routes, err := netlinksafe.RouteList(link, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		want := map[string]string{"0.0.0.0/0": "10.244.0.1", "192.168.50.0/24": "10.244.0.254"}
		for _, r := range routes {
			if r.Gw == nil {
				continue
			}
			dst := "0.0.0.0/0"
			if r.Dst != nil {
				dst = r.Dst.String()
			}
			if want[dst] == r.Gw.String() {
				delete(want, dst)
			}
		}
		if len(want) > 0 {
			t.Errorf("routes missing: %v (have %v)", want, routes)
		}
		return nil
	}
}

func TestSetupLeavesNothingOnError(t *testing.T) {
	needRoot(t)
	n := newNS(t)
	s := spec(t, n.Path())
	s.Routes = []Route{{Dst: DefaultRoute(net.ParseIP("10.9.9.1")), GW: net.ParseIP("10.9.9.1")}} // unreachable gateway
	if _, err := Setup(s); err == nil {
		t.Fatal("Setup with an unreachable gateway succeeded")
	}
	if ok, _ := HostLinkExists(s.HostIfName); ok {
		t.Error("host end left behind")
	}
	if _, err := Inspect(s.Netns, s.IfName); err == nil {
		t.Error("pod end left behind")
	}
}

func TestSetupTwiceFailsWithoutDamage(t *testing.T) {
	needRoot(t)
	n := newNS(t)
	s := spec(t, n.Path())
	t.Cleanup(func() { _ = Teardown("", "", "", s.HostIfName) })
	if _, err := Setup(s); err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(s); err == nil {
		t.Fatal("second Setup succeeded")
	}
	checkPod(t, s)
}

// With the node's Open vSwitch in a namespace of its own, the host end goes there, and Teardown finds it there.
func TestTheHostEndGoesIntoTheDatapathNamespace(t *testing.T) {
	needRoot(t)
	pod, datapath := newNS(t), newNS(t)
	s := spec(t, pod.Path())
	s.HostNetns = datapath.Path()
	if _, err := Setup(s); err != nil {
		t.Fatal(err)
	}
	if ok, _ := HostLinkExists(s.HostIfName); ok {
		t.Fatal("the host end is in the caller's namespace, not the datapath's")
	}
	inDatapath := func() bool {
		found := false
		_ = datapath.Do(func(ns.NetNS) error { found, _ = HostLinkExists(s.HostIfName); return nil })
		return found
	}
	if !inDatapath() {
		t.Fatal("the host end is not in the datapath's namespace")
	}
	checkPod(t, s)
	if err := Teardown(datapath.Path(), s.Netns, s.IfName, s.HostIfName); err != nil {
		t.Fatal(err)
	}
	if inDatapath() {
		t.Error("Teardown left the host end in the datapath's namespace")
	}
}
