package plug

import (
	"bytes"
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Readdress makes the pod end of a plugged pair carry spec's MAC, address and routes, in place: for a running
// pod whose port changed. Addresses and gateway routes of the address's family that spec does not name go, and
// so do the neighbours the pod learnt (a network made again has a router port with another MAC, even when the
// pod keeps its address). Only Netns, IfName, MAC, Address and Routes of spec are read.
func Readdress(spec Spec) error {
	err := ns.WithNetNSPath(spec.Netns, func(ns.NetNS) error { return readdress(spec) })
	if err != nil {
		return fmt.Errorf("in network namespace %s: %w", spec.Netns, err)
	}
	return nil
}

// readdress runs inside the pod's namespace.
func readdress(spec Spec) error {
	link, err := netlinksafe.LinkByName(spec.IfName)
	if err != nil {
		return fmt.Errorf("finding %s: %w", spec.IfName, err)
	}
	family := netlink.FAMILY_V4
	if spec.Address.IP.To4() == nil {
		family = netlink.FAMILY_V6
	}
	if err := setMAC(link, spec.MAC); err != nil {
		return err
	}
	if err := setAddress(link, spec.Address, family); err != nil {
		return err
	}
	if err := setRoutes(link, spec.Routes, family); err != nil {
		return err
	}
	return flushNeighbours(link, family)
}

// setMAC gives the link mac; a driver that refuses to change it while the link is up gets it down and up
// again (which drops its routes: setRoutes puts them back).
func setMAC(link netlink.Link, mac net.HardwareAddr) error {
	name := link.Attrs().Name
	if bytes.Equal(link.Attrs().HardwareAddr, mac) {
		return nil
	}
	err := netlink.LinkSetHardwareAddr(link, mac)
	if errors.Is(err, unix.EBUSY) {
		if err = netlink.LinkSetDown(link); err == nil {
			err = netlink.LinkSetHardwareAddr(link, mac)
		}
		if upErr := netlink.LinkSetUp(link); err == nil {
			err = upErr
		}
	}
	if err != nil {
		return fmt.Errorf("setting MAC %s on %s: %w", mac, name, err)
	}
	return nil
}

// setAddress makes addr the link's one global address of its family. The others go first: a new address in
// the subnet of an old one would be its secondary, and go with it.
func setAddress(link netlink.Link, addr *net.IPNet, family int) error {
	name := link.Attrs().Name
	have, err := netlinksafe.AddrList(link, family)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", name, err)
	}
	found := false
	for _, a := range have {
		switch {
		case a.IPNet == nil || !a.IP.IsGlobalUnicast():
			continue
		case a.IP.Equal(addr.IP) && bytes.Equal(a.Mask, addr.Mask):
			found = true
			continue
		}
		if err := netlink.AddrDel(link, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("removing address %s from %s: %w", a.IPNet, name, err)
		}
	}
	if found {
		return nil
	}
	na := &netlink.Addr{IPNet: addr}
	if family == netlink.FAMILY_V6 {
		na.Flags = unix.IFA_F_NODAD // Neutron gave the address to this port alone
	}
	if err := netlink.AddrAdd(link, na); err != nil {
		return fmt.Errorf("adding address %s to %s: %w", addr, name, err)
	}
	return nil
}

// setRoutes puts routes on the link and removes its other gateway routes of the family.
func setRoutes(link netlink.Link, routes []Route, family int) error {
	name := link.Attrs().Name
	want := map[string]bool{}
	for _, r := range routes {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: r.Dst, Gw: r.GW}
		if r.GW == nil {
			route.Scope = netlink.SCOPE_LINK
		}
		if err := netlink.RouteReplace(route); err != nil {
			return fmt.Errorf("setting route %s via %s on %s: %w", r.Dst, r.GW, name, err)
		}
		want[routeKey(r.Dst, r.GW)] = true
	}
	have, err := netlinksafe.RouteList(link, family)
	if err != nil {
		return fmt.Errorf("listing routes of %s: %w", name, err)
	}
	for _, r := range have {
		if r.Gw == nil || want[routeKey(r.Dst, r.Gw)] {
			continue
		}
		if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("removing route %s via %s from %s: %w", r.Dst, r.Gw, name, err)
		}
	}
	return nil
}

// routeKey names a gateway route; a nil destination is the default route of gw's family.
func routeKey(dst *net.IPNet, gw net.IP) string {
	if dst == nil {
		dst = DefaultRoute(gw)
	}
	return dst.String() + " via " + gw.String()
}

// flushNeighbours forgets what the link learnt of its neighbours' MACs.
func flushNeighbours(link netlink.Link, family int) error {
	neighs, err := netlink.NeighList(link.Attrs().Index, family)
	if err != nil {
		return fmt.Errorf("listing the neighbours of %s: %w", link.Attrs().Name, err)
	}
	for _, n := range neighs {
		if n.State&(netlink.NUD_PERMANENT|netlink.NUD_NOARP) != 0 {
			continue
		}
		if err := netlink.NeighDel(&n); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("forgetting neighbour %s on %s: %w", n.IP, link.Attrs().Name, err)
		}
	}
	return nil
}

// NamespaceGone says err comes from a network namespace that no longer exists, or whose path is no longer a
// namespace (the runtime unmounted it and left the file): its sandbox is gone.
func NamespaceGone(err error) bool {
	var gone ns.NSPathNotExistErr
	var notNS ns.NSPathNotNSErr
	return errors.As(err, &gone) || errors.As(err, &notNS)
}
