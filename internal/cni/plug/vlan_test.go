package plug

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const podNS = "/var/run/netns/cni-pod"

// vlanSpec is a nested pod's spec: VLAN 42, in the fake kernel's pod namespace.
func vlanSpec(t *testing.T) Spec {
	s := spec(t, podNS)
	s.VLAN = 42
	return s
}

// formerVLAN is a VLAN link of the NIC's (index 2) already in a namespace.
func formerVLAN(name string, id int, alias string) *netlink.Vlan {
	return &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: name, Index: 50 + id, ParentIndex: 2, Alias: alias}, VlanId: id,
		VlanProtocol: netlink.VLAN_PROTOCOL_8021Q}
}

// The kernel-VLAN path asks for one 802.1Q link of the subport's VLAN on the VM's NIC, with the port's MAC and
// MTU, moves it into the pod's namespace and names it CNI_IFNAME there; whatever step fails, neither the host
// nor the pod keeps anything of it, and the error says what to do.
func TestSetupVLAN(t *testing.T) {
	tests := []struct {
		name   string
		uplink string // eth0 when empty
		change func(k *fakeKernel, s *Spec)
		// wantErr is what the error says; empty means success.
		wantErr   string
		wantErrno error
		// wantPod are the pod namespace's links afterwards (lo alone when empty).
		wantPod []string
	}{
		{name: "the link is made on the NIC, moved into the pod and named CNI_IFNAME", wantPod: []string{"eth0", "lo"}},
		{name: "the pod's namespace cannot be opened", change: fail("GetNS", ns.NSPathNotExistErr{}), wantErr: "opening network namespace"},
		{name: "the kernel refuses the link", change: fail("LinkAdd", unix.EPERM), wantErr: "making VLAN link", wantErrno: unix.EPERM},
		{name: "the link cannot move into the pod's namespace", change: fail("LinkSetNsFd", unix.EINVAL), wantErr: "moving VLAN link"},
		{name: "the link cannot be renamed in the pod's namespace", change: fail("LinkSetName", unix.EBUSY), wantErr: "renaming VLAN link"},
		{name: "the pod's interface cannot be configured", change: fail("ConfigurePod", errors.New("adding address: permission denied")),
			wantErr: "adding address"},
		{name: "the pod's namespace already has CNI_IFNAME: a second setup changes nothing", change: func(k *fakeKernel, _ *Spec) {
			k.links[podNS] = append(k.links[podNS], formerVLAN("eth0", 7, vlanAlias))
		}, wantErr: "renaming VLAN link", wantErrno: unix.EEXIST, wantPod: []string{"eth0", "lo"}},
		{name: "a kernel without 802.1Q VLAN support", change: func(k *fakeKernel, _ *Spec) { k.noVLAN = true },
			wantErr: "the kernel has no 802.1Q VLAN support (modprobe 8021q", wantErrno: unix.EOPNOTSUPP},
		{name: "an uplink that does not exist", uplink: "ens3", wantErr: "the VLAN uplink ens3 does not exist in raven-node's network namespace: --vlan-uplink must name the VM's NIC"},
		{name: "a VLAN a former pod's link still holds on the NIC", change: func(k *fakeKernel, _ *Spec) {
			k.links["/var/run/netns/cni-former"] = []netlink.Link{formerVLAN("eth0", 42, vlanAlias)}
		}, wantErr: "eth0 already carries VLAN 42", wantErrno: unix.EEXIST},
		{name: "an MTU above the NIC's", change: func(_ *fakeKernel, s *Spec) { s.MTU = 9000 }, wantErr: "MTU 9000 is above the MTU 1500 of the VLAN uplink eth0"},
		{name: "no VLAN ID", change: func(_ *fakeKernel, s *Spec) { s.VLAN = 0 }, wantErr: "VLAN 0 is outside 1-4094"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, s := newFakeKernel(podNS), vlanSpec(t)
			if tt.change != nil {
				tt.change(k, &s)
			}
			uplink := tt.uplink
			if uplink == "" {
				uplink = "eth0"
			}
			res, err := setupVLAN(k, s, uplink)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				checkVLANMade(t, k, s, res)
			} else {
				checkVLANFailed(t, err, tt.wantErr, tt.wantErrno)
			}
			if got := k.names(hostNS); !slices.Equal(got, []string{"eth0", "lo"}) {
				t.Errorf("the host holds %v afterwards, want its own eth0 and lo only", got)
			}
			want := tt.wantPod
			if want == nil {
				want = []string{"lo"}
			}
			if got := k.names(podNS); !slices.Equal(got, want) {
				t.Errorf("the pod's namespace holds %v afterwards, want %v", got, want)
			}
			if k.open != 0 {
				t.Errorf("%d network namespace(s) left open", k.open)
			}
		})
	}
}

// fail makes one step of the fake kernel fail.
func fail(step string, err error) func(*fakeKernel, *Spec) {
	return func(k *fakeKernel, _ *Spec) { k.fail[step] = err }
}

func checkVLANFailed(t *testing.T, err error, want string, errno error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one saying %q", err, want)
	}
	if errno != nil && !errors.Is(err, errno) {
		t.Errorf("error %v does not wrap %v", err, errno)
	}
}

// checkVLANMade: the one link asked for is an 802.1Q link of the spec's VLAN on the NIC (index 2), with the
// port's MAC and MTU and Raven's alias; it is in the pod's namespace as CNI_IFNAME, configured there.
func checkVLANMade(t *testing.T, k *fakeKernel, s Spec, res Result) {
	t.Helper()
	checkVLANAsked(t, k, s)
	k.cur = podNS
	link, err := k.LinkByName("eth0")
	k.cur = hostNS
	if err != nil {
		t.Fatalf("the pod's namespace has no eth0: %v", err)
	}
	if pv, ok := link.(*netlink.Vlan); !ok || pv.VlanId != 42 || pv.ParentIndex != 2 || pv.HardwareAddr.String() != s.MAC.String() {
		t.Errorf("the pod's eth0 is %+v, want the VLAN 42 link on the NIC with the port's MAC", link)
	}
	if got, ok := k.configured[podNS]; !ok || len(k.configured) != 1 || got.IfName != "eth0" || got.Address.String() != s.Address.String() {
		t.Errorf("configured %v, want the pod's namespace alone, its eth0 with %s", k.configured, s.Address)
	}
	if res.Host.Name != "" || res.Host.HardwareAddr != nil || res.Pod.Name != "eth0" || res.Pod.HardwareAddr.String() != s.MAC.String() || res.Pod.MTU != 1442 {
		t.Errorf("result %+v, want no host end and the pod's eth0", res)
	}
}

// checkVLANAsked: the one link asked for is the 802.1Q link of VLAN 42 on the NIC, as the host's link of that
// name, with the port's MAC and MTU and Raven's alias.
func checkVLANAsked(t *testing.T, k *fakeKernel, s Spec) {
	t.Helper()
	if len(k.added) != 1 {
		t.Fatalf("asked for %d links, want 1: %v", len(k.added), k.added)
	}
	v, ok := k.added[0].(*netlink.Vlan)
	if !ok {
		t.Fatalf("asked for a %T, want a *netlink.Vlan", k.added[0])
	}
	want := netlink.Vlan{
		LinkAttrs: netlink.LinkAttrs{Name: s.HostIfName, ParentIndex: 2, MTU: 1442, HardwareAddr: s.MAC, Alias: vlanAlias},
		VlanId:    42, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q,
	}
	if v.Name != want.Name || v.ParentIndex != want.ParentIndex || v.MTU != want.MTU || v.HardwareAddr.String() != want.HardwareAddr.String() ||
		v.Alias != want.Alias || v.VlanId != want.VlanId || v.VlanProtocol != want.VlanProtocol || v.MasterIndex != 0 {
		t.Errorf("asked for %+v, want %+v", *v, want)
	}
}

// Teardown of a pod's VLAN link removes it in the pod's namespace, and a link an ADD left in the host; never a
// link of another kind, nor a VLAN link of the node's own; and it is idempotent.
func TestTeardownVLAN(t *testing.T) {
	const hostName = "tap7d7cc334-bc"
	tests := []struct {
		name      string
		netns     string // podNS when empty
		setup     func(k *fakeKernel)
		wantErr   string
		wantPod   []string
		wantHost  []string
		unchanged bool
	}{
		{name: "the pod's VLAN link goes", setup: func(k *fakeKernel) {
			k.links[podNS] = append(k.links[podNS], formerVLAN("eth0", 42, vlanAlias))
		}},
		{name: "a namespace without it", setup: func(*fakeKernel) {}},
		{name: "a namespace that is gone", netns: "/var/run/netns/cni-gone", setup: func(*fakeKernel) {}},
		{name: "a namespace the runtime unmounted, its file left", setup: func(k *fakeKernel) {
			k.fail["GetNS"] = ns.NSPathNotNSErr{}
		}},
		{name: "a veth of that name is no pod's VLAN link: it stays", setup: func(k *fakeKernel) {
			k.links[podNS] = append(k.links[podNS], &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0", Index: 9}})
		}, wantPod: []string{"eth0", "lo"}},
		{name: "a link an ADD left in the host goes", setup: func(k *fakeKernel) {
			k.links[hostNS] = append(k.links[hostNS], formerVLAN(hostName, 42, vlanAlias))
		}},
		{name: "a VLAN link of the node's own of that name stays", setup: func(k *fakeKernel) {
			k.links[hostNS] = append(k.links[hostNS], formerVLAN(hostName, 42, ""))
		}, wantHost: []string{"eth0", "lo", hostName}},
		{name: "a link the kernel does not delete", setup: func(k *fakeKernel) {
			k.links[podNS] = append(k.links[podNS], formerVLAN("eth0", 42, vlanAlias))
			k.fail["LinkDel"] = unix.EPERM
		}, wantErr: "deleting VLAN link eth0", wantPod: []string{"eth0", "lo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKernel(podNS)
			tt.setup(k)
			netns := tt.netns
			if netns == "" {
				netns = podNS
			}
			err := teardownVLAN(k, netns, "eth0", hostName)
			if tt.wantErr != "" {
				checkVLANFailed(t, err, tt.wantErr, nil)
			} else if err != nil {
				t.Fatal(err)
			} else if err := teardownVLAN(k, netns, "eth0", hostName); err != nil {
				t.Errorf("second teardown: %v", err)
			}
			wantPod, wantHost := or(tt.wantPod, "lo"), or(tt.wantHost, "eth0", "lo")
			if got := k.names(podNS); !slices.Equal(got, wantPod) {
				t.Errorf("the pod's namespace holds %v, want %v", got, wantPod)
			}
			if got := k.names(hostNS); !slices.Equal(got, wantHost) {
				t.Errorf("the host holds %v, want %v", got, wantHost)
			}
			if k.open != 0 {
				t.Errorf("%d network namespace(s) left open", k.open)
			}
		})
	}
}

func or(s []string, dflt ...string) []string {
	if s == nil {
		return dflt
	}
	return s
}

// At start, raven-node removes the VLAN links an ADD killed halfway left in the host on the uplink: those with
// Raven's alias, not the node's own VLAN links nor another NIC's.
func TestSweepVLAN(t *testing.T) {
	k := newFakeKernel(podNS)
	eth1 := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "eth1", Index: 3, MTU: 1500, Flags: net.FlagUp}}
	onEth1 := formerVLAN("tapother-1234", 9, vlanAlias)
	onEth1.ParentIndex = 3
	k.links[hostNS] = append(k.links[hostNS], eth1, onEth1, formerVLAN("tap7d7cc334-bc", 42, vlanAlias), formerVLAN("eth0.100", 100, ""))
	k.links[podNS] = append(k.links[podNS], formerVLAN("eth0", 43, vlanAlias))
	removed, err := sweepVLAN(k, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"tap7d7cc334-bc"}) {
		t.Errorf("removed %v, want the left link alone", removed)
	}
	if got, want := k.names(hostNS), []string{"eth0", "eth0.100", "eth1", "lo", "tapother-1234"}; !slices.Equal(got, want) {
		t.Errorf("the host holds %v, want %v", got, want)
	}
	if got := k.names(podNS); !slices.Equal(got, []string{"eth0", "lo"}) {
		t.Errorf("the pod's namespace holds %v: a running pod's link was touched", got)
	}
	if _, err := sweepVLAN(k, "ens3"); err == nil || !strings.Contains(err.Error(), "--vlan-uplink") {
		t.Errorf("sweep on a missing uplink: %v, want an error naming --vlan-uplink", err)
	}
}

// raven-node's readiness on the kernel-VLAN path: the uplink exists and is up.
func TestCheckUplink(t *testing.T) {
	tests := []struct {
		name    string
		uplink  string
		down    bool
		wantErr string
	}{
		{name: "an uplink that is up", uplink: "eth0"},
		{name: "an uplink that is down", uplink: "eth0", down: true, wantErr: "the VLAN uplink eth0 is down"},
		{name: "an uplink that does not exist", uplink: "ens3", wantErr: "--vlan-uplink must name the VM's NIC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKernel(podNS)
			if tt.down {
				k.links[hostNS][1].Attrs().Flags = 0
			}
			err := checkUplink(k, tt.uplink)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			checkVLANFailed(t, err, tt.wantErr, nil)
		})
	}
}

// On a kernel with 802.1Q support, the path end to end in real namespaces: a VM's namespace whose NIC is one
// end of a veth, and a pod's. Skipped where the kernel has no VLAN link type; TestSetupVLAN covers the requests.
func TestSetupVLANInARealNamespace(t *testing.T) {
	needRoot(t)
	vm, pod := newNS(t), newNS(t)
	s := spec(t, pod.Path())
	s.VLAN = 42
	err := vm.Do(func(ns.NetNS) error { return setupOnVeth(s) })
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("this kernel has no 802.1Q VLAN link type (%v): the kernel-VLAN path is covered by TestSetupVLAN's requests only", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	obs, err := Inspect(s.Netns, s.IfName)
	if err != nil {
		t.Fatal(err)
	}
	if obs.VLAN != 42 || obs.MAC.String() != s.MAC.String() || obs.MTU != s.MTU || !obs.Up || len(obs.Addrs) != 1 {
		t.Errorf("the pod's interface %+v, want VLAN 42 with the port's MAC, MTU and address, up", obs)
	}
	if err := ns.WithNetNSPath(s.Netns, checkLoAndRoutes(t, s.IfName)); err != nil {
		t.Fatal(err)
	}
	err = vm.Do(func(ns.NetNS) error {
		if err := TeardownVLAN(s.Netns, s.IfName, s.HostIfName); err != nil {
			return err
		}
		return TeardownVLAN(s.Netns, s.IfName, s.HostIfName)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(s.Netns, s.IfName); err == nil {
		t.Error("the pod's VLAN link is still there after teardown")
	}
}

// setupOnVeth gives the current namespace a NIC, nic0 (one end of a veth, up), and sets the pod up on it.
func setupOnVeth(s Spec) error {
	nic := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nic0", MTU: 1500}, PeerName: "trunk0"}
	if err := netlink.LinkAdd(nic); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(nic); err != nil {
		return err
	}
	if _, err := SetupVLAN(s, "nic0"); err != nil {
		return err
	}
	return CheckUplink("nic0")
}
