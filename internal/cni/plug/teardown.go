package plug

import (
	"errors"
	"fmt"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Teardown removes the pair: the host end by name when hostIfName is set (the pod end goes with it), in
// the datapath's namespace hostNetns (the caller's when empty), and the pod end when netnsPath is set and
// still holds a veth of that name. A namespace that is gone, or a link already removed, is fine: Teardown
// is idempotent.
func Teardown(hostNetns, netnsPath, ifName, hostIfName string) error {
	if err := inHostNetns(hostNetns, func() error { return deleteLink(hostIfName) }); err != nil {
		return fmt.Errorf("deleting host interface %s: %w", hostIfName, err)
	}
	if netnsPath == "" || ifName == "" {
		return nil
	}
	err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(ifName)
		if err != nil {
			if errors.As(err, &netlink.LinkNotFoundError{}) {
				return nil
			}
			return fmt.Errorf("finding %s: %w", ifName, err)
		}
		if _, ok := link.(*netlink.Veth); !ok {
			return nil // not ours
		}
		if err := netlink.LinkDel(link); err != nil {
			return fmt.Errorf("deleting %s: %w", ifName, err)
		}
		return nil
	})
	if NamespaceGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("in network namespace %s: %w", netnsPath, err)
	}
	return nil
}

// HostLinkExists tells whether the caller's namespace has a link of that name.
func HostLinkExists(name string) (bool, error) {
	_, err := netlinksafe.LinkByName(name)
	if err == nil {
		return true, nil
	}
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return false, nil
	}
	return false, err
}
