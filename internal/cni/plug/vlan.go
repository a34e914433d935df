package plug

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The kernel-VLAN path of nested nodes (raven-node --nested --vlan-uplink, kuryr-kubernetes' nested VLAN
// driver's way): a pod's interface is an 802.1Q link of its subport's VLAN on the VM's NIC, moved into the pod's
// namespace. There is no host end and no Open vSwitch: frames the pod sends leave the NIC tagged, and the trunk
// hands them to the subport.

// vlanAlias is the alias (IFLA_IFALIAS) of every link SetupVLAN makes: the host's VLAN links without it are
// the node's own, which nothing here touches.
const vlanAlias = "raven-node pod"

// maxVLAN is the highest 802.1Q VLAN ID.
const maxVLAN = 4094

// errNoLink says the namespace has no link of the name asked for.
var errNoLink = errors.New("no such link")

// SetupVLAN makes the pod's interface an 802.1Q link of spec.VLAN on the uplink (the VM's NIC): made in the
// caller's namespace as spec.HostIfName with spec's MAC and MTU, moved into the pod's namespace, renamed
// spec.IfName and configured as Setup configures a veth's pod end. On error nothing it made is left behind.
// The Result has no host end.
func SetupVLAN(spec Spec, uplink string) (Result, error) {
	return setupVLAN(netlinkKernel{}, spec, uplink)
}

func setupVLAN(k kernel, spec Spec, uplink string) (Result, error) {
	if spec.VLAN < 1 || spec.VLAN > maxVLAN {
		return Result{}, fmt.Errorf("VLAN %d is outside 1-%d", spec.VLAN, maxVLAN)
	}
	parent, err := uplinkLink(k, uplink)
	if err != nil {
		return Result{}, err
	}
	if mtu := parent.Attrs().MTU; spec.MTU > mtu {
		return Result{}, fmt.Errorf("the port's MTU %d is above the MTU %d of the VLAN uplink %s, and a VLAN link carries no more "+
			"than its NIC: give the pods' networks an MTU no larger than the network of the VM's port", spec.MTU, mtu, uplink)
	}
	netns, err := k.GetNS(spec.Netns)
	if err != nil {
		return Result{}, fmt.Errorf("opening network namespace %s: %w", spec.Netns, err)
	}
	defer netns.Close()
	link := &netlink.Vlan{
		LinkAttrs: netlink.LinkAttrs{
			Name: spec.HostIfName, ParentIndex: parent.Attrs().Index, MTU: spec.MTU, HardwareAddr: spec.MAC, Alias: vlanAlias,
		},
		VlanId: spec.VLAN, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q,
	}
	if err := k.LinkAdd(link); err != nil {
		return Result{}, addVLANError(err, spec, uplink)
	}
	if err := k.LinkSetNsFd(link, int(netns.Fd())); err != nil {
		_ = k.LinkDel(link)
		return Result{}, fmt.Errorf("moving VLAN link %s into network namespace %s: %w", spec.HostIfName, spec.Netns, err)
	}
	var res Result
	err = netns.Do(func(ns.NetNS) error {
		var err error
		res.Pod, err = podVLAN(k, spec)
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("in network namespace %s: %w", spec.Netns, err)
	}
	return res, nil
}

// podVLAN runs inside the pod's namespace: it names the link moved there spec.IfName and configures it; on
// error it deletes it.
func podVLAN(k kernel, spec Spec) (net.Interface, error) {
	link, err := k.LinkByName(spec.HostIfName)
	if err != nil {
		return net.Interface{}, fmt.Errorf("finding VLAN link %s after its move: %w", spec.HostIfName, err)
	}
	if err = k.LinkSetName(link, spec.IfName); err != nil {
		err = fmt.Errorf("renaming VLAN link %s to %s: %w", spec.HostIfName, spec.IfName, err)
	} else {
		err = k.ConfigurePod(spec)
	}
	if err != nil {
		_ = k.LinkDel(link) // by its index, whichever name it has
		return net.Interface{}, err
	}
	return net.Interface{Name: spec.IfName, Index: link.Attrs().Index, MTU: spec.MTU, HardwareAddr: spec.MAC}, nil
}

// addVLANError says why the kernel refused the VLAN link, and what to do about it.
func addVLANError(err error, spec Spec, uplink string) error {
	what := fmt.Sprintf("making VLAN link %s (VLAN %d on %s)", spec.HostIfName, spec.VLAN, uplink)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%s: the kernel has no 802.1Q VLAN support (modprobe 8021q on the node, and have it loaded at boot): %w",
			what, err)
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("%s: %s already carries VLAN %d, or a link of that name exists (a former pod's on that VLAN, whose "+
			"DEL has not come yet?): %w", what, uplink, spec.VLAN, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// uplinkLink finds the uplink in the caller's namespace.
func uplinkLink(k kernel, uplink string) (netlink.Link, error) {
	link, err := k.LinkByName(uplink)
	if errors.Is(err, errNoLink) {
		return nil, fmt.Errorf("the VLAN uplink %s does not exist in raven-node's network namespace: --vlan-uplink must name the "+
			"VM's NIC (whose port is the trunk's parent), and raven-node must run in the host's network", uplink)
	}
	if err != nil {
		return nil, fmt.Errorf("finding the VLAN uplink %s: %w", uplink, err)
	}
	return link, nil
}

// CheckUplink says whether the uplink can carry pods' VLANs: it exists in the caller's namespace and is up.
func CheckUplink(uplink string) error {
	return checkUplink(netlinkKernel{}, uplink)
}

func checkUplink(k kernel, uplink string) error {
	link, err := uplinkLink(k, uplink)
	if err != nil {
		return err
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Errorf("the VLAN uplink %s is down", uplink)
	}
	return nil
}

// TeardownVLAN removes a pod's VLAN link: the link hostIfName if it is still in the caller's namespace (an ADD
// stopped between making it and moving it), and the link ifName in the namespace at netnsPath. Only VLAN links
// go, and in the caller's namespace only those SetupVLAN made. A namespace that is gone took its links with it,
// and a link already removed is fine: TeardownVLAN is idempotent.
func TeardownVLAN(netnsPath, ifName, hostIfName string) error {
	return teardownVLAN(netlinkKernel{}, netnsPath, ifName, hostIfName)
}

func teardownVLAN(k kernel, netnsPath, ifName, hostIfName string) error {
	if hostIfName != "" {
		if err := deleteVLAN(k, hostIfName, true); err != nil {
			return err
		}
	}
	if netnsPath == "" || ifName == "" {
		return nil
	}
	netns, err := k.GetNS(netnsPath)
	if NamespaceGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", netnsPath, err)
	}
	defer netns.Close()
	if err := netns.Do(func(ns.NetNS) error { return deleteVLAN(k, ifName, false) }); err != nil {
		return fmt.Errorf("in network namespace %s: %w", netnsPath, err)
	}
	return nil
}

// deleteVLAN deletes the VLAN link of that name in the current namespace, when it carries SetupVLAN's alias or
// marked is false. No link, or one of another kind, is fine: it is not a pod's VLAN link.
func deleteVLAN(k kernel, name string, marked bool) error {
	link, err := k.LinkByName(name)
	if errors.Is(err, errNoLink) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finding %s: %w", name, err)
	}
	if v, ok := link.(*netlink.Vlan); !ok || (marked && v.Alias != vlanAlias) {
		return nil
	}
	if err := k.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("deleting VLAN link %s: %w", name, err)
	}
	return nil
}

// SweepVLAN removes the VLAN links on the uplink that an ADD left in the caller's namespace, stopped (raven-node
// killed) between making one and moving it into its pod: each holds its VLAN on the NIC, which a later pod
// given that VLAN could then not have. Only links that carry SetupVLAN's alias go; it returns their names.
// Run it before serving ADDs: an ADD in flight has such a link for a moment.
func SweepVLAN(uplink string) ([]string, error) {
	return sweepVLAN(netlinkKernel{}, uplink)
}

func sweepVLAN(k kernel, uplink string) ([]string, error) {
	parent, err := uplinkLink(k, uplink)
	if err != nil {
		return nil, err
	}
	links, err := k.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	var removed []string
	var errs []error
	for _, l := range links {
		v, ok := l.(*netlink.Vlan)
		if !ok || v.ParentIndex != parent.Attrs().Index || v.Alias != vlanAlias {
			continue
		}
		if err := k.LinkDel(v); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("deleting VLAN link %s (VLAN %d on %s): %w", v.Name, v.VlanId, uplink, err))
			continue
		}
		removed = append(removed, v.Name)
	}
	return removed, errors.Join(errs...)
}
