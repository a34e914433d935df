package plug

import (
	"errors"
	"fmt"
	"io/fs"
	"net"

	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Setup builds the pair and configures the pod end. On error nothing it made is left behind.
func Setup(spec Spec) (Result, error) {
	netns, err := ns.GetNS(spec.Netns)
	if err != nil {
		return Result{}, fmt.Errorf("opening network namespace %s: %w", spec.Netns, err)
	}
	defer netns.Close()

	var datapath ns.NetNS
	if spec.HostNetns != "" {
		if datapath, err = ns.GetNS(spec.HostNetns); err != nil {
			return Result{}, fmt.Errorf("opening the datapath's network namespace %s: %w", spec.HostNetns, err)
		}
		defer datapath.Close()
	}
	var res Result
	created := false
	err = netns.Do(func(hostNS ns.NetNS) error {
		if datapath != nil {
			hostNS = datapath
		}
		host, pod, err := ip.SetupVethWithName(spec.IfName, spec.HostIfName, spec.MTU, spec.MAC.String(), hostNS)
		if err != nil {
			return fmt.Errorf("creating veth %s/%s: %w", spec.HostIfName, spec.IfName, err)
		}
		created = true
		res = Result{Host: host, Pod: pod}
		// The host end only feeds the datapath: without IPv6 it sends no router solicitation, DAD or MLD
		// report into the pod, and the kernel has no address of its own to configure on it.
		err = hostNS.Do(func(ns.NetNS) error { return disableIPv6(spec.HostIfName) })
		if err == nil {
			err = configurePod(spec)
		}
		if err != nil {
			// The pair goes with either end.
			_ = ip.DelLinkByName(spec.IfName)
			return err
		}
		return nil
	})
	if err != nil {
		if created {
			// The pod end is gone with its pair; make sure the host end is too.
			_ = inHostNetns(spec.HostNetns, func() error { return deleteLink(spec.HostIfName) })
		}
		return Result{}, err
	}
	return res, nil
}

// configurePod runs inside the pod's namespace.
func configurePod(spec Spec) error {
	link, err := netlinksafe.LinkByName(spec.IfName)
	if err != nil {
		return fmt.Errorf("finding %s: %w", spec.IfName, err)
	}
	if err := SetTxChecksum(spec.IfName, false); err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: spec.Address}
	if spec.Address.IP.To4() == nil {
		addr.Flags = unix.IFA_F_NODAD // Neutron gave the address to this port alone
	}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("adding address %s to %s: %w", spec.Address, spec.IfName, err)
	}
	if spec.Address.IP.To4() != nil {
		// A port without an IPv6 address: no link-local address, DAD, router solicitation or MLD report from
		// the pod into the datapath, each an upcall for the userspace datapath when a burst of pods starts.
		if err := disableIPv6(spec.IfName); err != nil {
			return err
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting %s up: %w", spec.IfName, err)
	}
	lo, err := netlinksafe.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("setting lo up: %w", err)
	}
	for _, r := range spec.Routes {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: r.Dst, Gw: r.GW}
		if r.GW == nil {
			route.Scope = netlink.SCOPE_LINK
		}
		if err := netlink.RouteAdd(route); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("adding route %s via %s on %s: %w", r.Dst, r.GW, spec.IfName, err)
		}
	}
	return nil
}

// disableIPv6 turns IPv6 off on the interface ifName of the current namespace; a kernel without IPv6 has
// nothing to turn off.
func disableIPv6(ifName string) error {
	if _, err := sysctl.Sysctl(fmt.Sprintf("net/ipv6/conf/%s/disable_ipv6", ifName), "1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("turning IPv6 off on %s: %w", ifName, err)
	}
	return nil
}

// inHostNetns runs f in the datapath's namespace (path), or in the caller's when path is empty.
func inHostNetns(path string, f func() error) error {
	if path == "" {
		return f()
	}
	return ns.WithNetNSPath(path, func(ns.NetNS) error { return f() })
}

// deleteLink removes a link of the current namespace; a missing one is fine.
func deleteLink(name string) error {
	if name == "" {
		return nil
	}
	if err := ip.DelLinkByName(name); err != nil && !errors.Is(err, ip.ErrLinkNotFound) {
		return err
	}
	return nil
}

// DefaultRoute is 0.0.0.0/0 or ::/0, by the family of gw.
func DefaultRoute(gw net.IP) *net.IPNet {
	if gw.To4() != nil {
		return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	}
	return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
}
