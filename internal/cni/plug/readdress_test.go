package plug

import (
	"net"
	"slices"
	"testing"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// podState is what the pod end holds, as Readdress's tests compare it.
type podState struct {
	mac    string
	up     bool
	addrs  []string
	routes []string // "dst via gw", gateway routes only
	neighs []string // the non-permanent neighbour entries' IPs
}

func readPod(t *testing.T, s Spec) podState {
	t.Helper()
	var st podState
	err := ns.WithNetNSPath(s.Netns, func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(s.IfName)
		if err != nil {
			return err
		}
		st.mac, st.up = link.Attrs().HardwareAddr.String(), link.Attrs().Flags&net.FlagUp != 0
		addrs, err := netlinksafe.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			st.addrs = append(st.addrs, a.IPNet.String())
		}
		routes, err := netlinksafe.RouteList(link, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Gw != nil {
				dst := "0.0.0.0/0"
				if r.Dst != nil {
					dst = r.Dst.String()
				}
				st.routes = append(st.routes, dst+" via "+r.Gw.String())
			}
		}
		slices.Sort(st.routes)
		neighs, err := netlink.NeighList(link.Attrs().Index, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, n := range neighs {
			if n.State&netlink.NUD_PERMANENT == 0 && n.State != netlink.NUD_NOARP {
				st.neighs = append(st.neighs, n.IP.String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// addNeigh puts a learnt neighbour entry on the pod end, as traffic to ip would.
func addNeigh(t *testing.T, s Spec, ip, mac string) {
	t.Helper()
	err := ns.WithNetNSPath(s.Netns, func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(s.IfName)
		if err != nil {
			return err
		}
		hw, _ := net.ParseMAC(mac)
		return netlink.NeighAdd(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V4,
			State: netlink.NUD_STALE, IP: net.ParseIP(ip), HardwareAddr: hw})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A pod whose port changed while it runs: Readdress gives its interface the new port's MAC, address and
// routes, in place.
func TestReaddress(t *testing.T) {
	needRoot(t)
	tests := []struct {
		name   string
		change func(t *testing.T, s *Spec)
		want   podState
	}{
		{
			name:   "the same MAC and address: only the learnt neighbours go (the gateway may have another MAC)",
			change: func(*testing.T, *Spec) {},
			want: podState{mac: "fa:16:3e:84:88:2a", up: true, addrs: []string{"10.244.0.158/24"},
				routes: []string{"0.0.0.0/0 via 10.244.0.1", "192.168.50.0/24 via 10.244.0.254"}},
		},
		{
			name: "another MAC and address in the same subnet",
			change: func(t *testing.T, s *Spec) {
				s.MAC, _ = net.ParseMAC("fa:16:3e:00:00:07")
				s.Address = cidr(t, "10.244.0.7/24")
			},
			want: podState{mac: "fa:16:3e:00:00:07", up: true, addrs: []string{"10.244.0.7/24"},
				routes: []string{"0.0.0.0/0 via 10.244.0.1", "192.168.50.0/24 via 10.244.0.254"}},
		},
		{
			name: "a network made again: another subnet, gateway and no host route",
			change: func(t *testing.T, s *Spec) {
				s.MAC, _ = net.ParseMAC("fa:16:3e:00:00:08")
				s.Address = cidr(t, "10.244.9.5/24")
				gw := net.ParseIP("10.244.9.1")
				s.Routes = []Route{{Dst: DefaultRoute(gw), GW: gw}}
			},
			want: podState{mac: "fa:16:3e:00:00:08", up: true, addrs: []string{"10.244.9.5/24"},
				routes: []string{"0.0.0.0/0 via 10.244.9.1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNS(t)
			s := spec(t, n.Path())
			t.Cleanup(func() { _ = Teardown("", "", "", s.HostIfName) })
			if _, err := Setup(s); err != nil {
				t.Fatal(err)
			}
			addNeigh(t, s, "10.244.0.1", "fa:16:3e:ff:ff:01")
			tt.change(t, &s)
			if err := Readdress(s); err != nil {
				t.Fatal(err)
			}
			if got := readPod(t, s); !slices.Equal(got.addrs, tt.want.addrs) || !slices.Equal(got.routes, tt.want.routes) ||
				!slices.Equal(got.neighs, tt.want.neighs) || got.mac != tt.want.mac || got.up != tt.want.up {
				t.Errorf("pod end %+v, want %+v", got, tt.want)
			}
			// Idempotent.
			if err := Readdress(s); err != nil {
				t.Errorf("second Readdress: %v", err)
			}
		})
	}
}

func TestReaddressWithoutThePodEnd(t *testing.T) {
	needRoot(t)
	n := newNS(t)
	s := spec(t, n.Path())
	if err := Readdress(s); err == nil {
		t.Fatal("Readdress of a namespace without the pod end succeeded")
	}
}
