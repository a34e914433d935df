package plug

import (
	"errors"
	"fmt"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// kernel is the netlink the kernel-VLAN path asks for, in the network namespace the calling thread is in: the
// caller's, or the pod's inside Do of a namespace GetNS opened. It is that path's seam for tests, which cannot
// count on a kernel with a VLAN link type.
type kernel interface {
	// LinkByName returns the link of that name, or an error wrapping errNoLink.
	LinkByName(name string) (netlink.Link, error)
	LinkList() ([]netlink.Link, error)
	LinkAdd(link netlink.Link) error
	LinkDel(link netlink.Link) error
	LinkSetNsFd(link netlink.Link, fd int) error
	LinkSetName(link netlink.Link, name string) error
	// GetNS opens the network namespace at path.
	GetNS(path string) (ns.NetNS, error)
	// ConfigurePod gives the pod's interface spec.IfName, from inside the pod's namespace, what configurePod
	// gives a veth's pod end: TX checksum offload off, the address, IPv6 off for an IPv4 port, up, lo up, the
	// routes.
	ConfigurePod(spec Spec) error
}

// netlinkKernel is the kernel's netlink.
type netlinkKernel struct{}

var _ kernel = netlinkKernel{}

func (netlinkKernel) LinkByName(name string) (netlink.Link, error) {
	link, err := netlinksafe.LinkByName(name)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return nil, fmt.Errorf("%w: %s", errNoLink, name)
	}
	return link, err
}

func (netlinkKernel) LinkList() ([]netlink.Link, error) { return netlinksafe.LinkList() }
func (netlinkKernel) LinkAdd(link netlink.Link) error   { return netlink.LinkAdd(link) }
func (netlinkKernel) LinkDel(link netlink.Link) error   { return netlink.LinkDel(link) }
func (netlinkKernel) LinkSetNsFd(link netlink.Link, fd int) error {
	return netlink.LinkSetNsFd(link, fd)
}
func (netlinkKernel) LinkSetName(link netlink.Link, name string) error {
	return netlink.LinkSetName(link, name)
}
func (netlinkKernel) GetNS(path string) (ns.NetNS, error) { return ns.GetNS(path) }
func (netlinkKernel) ConfigurePod(spec Spec) error        { return configurePod(spec) }
