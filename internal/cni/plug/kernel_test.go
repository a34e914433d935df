package plug

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// hostNS is the fake kernel's name of the caller's namespace.
const hostNS = "host"

// fakeKernel is netlink over network namespaces in memory, as the kernel-VLAN path sees it: links are made,
// moved, renamed and deleted in the namespace the caller is in, and refused as the kernel refuses them (a
// name taken, a VLAN ID taken on its parent, no such link). fail injects an error at one step.
type fakeKernel struct {
	// links holds each namespace's links, by hostNS or the namespace's path.
	links map[string][]netlink.Link
	cur   string
	index int
	// noVLAN is a kernel without the VLAN link type (no 8021q module): LinkAdd of a Vlan fails with EOPNOTSUPP.
	noVLAN bool
	// fail makes the step of that name (a method's) return the error.
	fail map[string]error
	// added are the links LinkAdd was asked for, as asked.
	added []netlink.Link
	// configured are ConfigurePod's specs, by the namespace it ran in.
	configured map[string]Spec
	// open counts the namespaces GetNS opened and Close did not close.
	open int
}

// newFakeKernel is a host with the VM's NIC eth0 (index 2, MTU 1500, up) and an empty pod namespace at podPath.
func newFakeKernel(podPath string) *fakeKernel {
	lo := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "lo", Index: 1, Flags: net.FlagUp | net.FlagLoopback}}
	eth0 := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "eth0", Index: 2, MTU: 1500, Flags: net.FlagUp}}
	podLo := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "lo", Index: 1, Flags: net.FlagLoopback}}
	return &fakeKernel{
		links:      map[string][]netlink.Link{hostNS: {lo, eth0}, podPath: {podLo}},
		cur:        hostNS,
		index:      100,
		fail:       map[string]error{},
		configured: map[string]Spec{},
	}
}

var _ kernel = (*fakeKernel)(nil)

// names are the names of the links of a namespace, sorted.
func (k *fakeKernel) names(namespace string) []string {
	var out []string
	for _, l := range k.links[namespace] {
		out = append(out, l.Attrs().Name)
	}
	slices.Sort(out)
	return out
}

// find returns the position of the current namespace's link of that index (when not 0) or else name, or -1.
func (k *fakeKernel) find(index int, name string) int {
	return slices.IndexFunc(k.links[k.cur], func(l netlink.Link) bool {
		if index != 0 {
			return l.Attrs().Index == index
		}
		return l.Attrs().Name == name
	})
}

// clone copies a link, so that the caller's changes stay out of the fake and the other way round.
func clone(l netlink.Link) netlink.Link {
	switch v := l.(type) {
	case *netlink.Vlan:
		c := *v
		return &c
	case *netlink.Veth:
		c := *v
		return &c
	case *netlink.Device:
		c := *v
		return &c
	}
	panic(fmt.Sprintf("the fake kernel has no %T", l))
}

func (k *fakeKernel) LinkByName(name string) (netlink.Link, error) {
	if err := k.fail["LinkByName"]; err != nil {
		return nil, err
	}
	i := k.find(0, name)
	if i < 0 {
		return nil, fmt.Errorf("%w: %s", errNoLink, name)
	}
	return clone(k.links[k.cur][i]), nil
}

func (k *fakeKernel) LinkList() ([]netlink.Link, error) {
	if err := k.fail["LinkList"]; err != nil {
		return nil, err
	}
	out := make([]netlink.Link, 0, len(k.links[k.cur]))
	for _, l := range k.links[k.cur] {
		out = append(out, clone(l))
	}
	return out, nil
}

func (k *fakeKernel) LinkAdd(link netlink.Link) error {
	k.added = append(k.added, clone(link))
	if err := k.fail["LinkAdd"]; err != nil {
		return err
	}
	v, isVLAN := link.(*netlink.Vlan)
	switch {
	case isVLAN && k.noVLAN:
		return unix.EOPNOTSUPP
	case k.find(0, link.Attrs().Name) >= 0:
		return unix.EEXIST
	case isVLAN && k.find(v.ParentIndex, "") < 0:
		return unix.ENODEV
	case isVLAN && k.vlanTaken(v.ParentIndex, v.VlanId):
		return unix.EEXIST
	}
	k.index++
	link.Attrs().Index = k.index // as netlink.LinkAdd does
	k.links[k.cur] = append(k.links[k.cur], clone(link))
	return nil
}

// vlanTaken says a VLAN link of that ID on that parent exists, in whatever namespace it went: the kernel
// keeps the parent's VLAN IDs with the parent.
func (k *fakeKernel) vlanTaken(parent, id int) bool {
	for _, links := range k.links {
		for _, l := range links {
			if v, ok := l.(*netlink.Vlan); ok && v.ParentIndex == parent && v.VlanId == id {
				return true
			}
		}
	}
	return false
}

func (k *fakeKernel) LinkDel(link netlink.Link) error {
	if err := k.fail["LinkDel"]; err != nil {
		return err
	}
	i := k.find(link.Attrs().Index, link.Attrs().Name)
	if i < 0 {
		return unix.ENODEV
	}
	k.links[k.cur] = slices.Delete(k.links[k.cur], i, i+1)
	return nil
}

func (k *fakeKernel) LinkSetNsFd(link netlink.Link, fd int) error {
	if err := k.fail["LinkSetNsFd"]; err != nil {
		return err
	}
	i := k.find(link.Attrs().Index, link.Attrs().Name)
	if i < 0 {
		return unix.ENODEV
	}
	to := k.nsOfFd(fd)
	if to == "" {
		return unix.EBADF
	}
	l := k.links[k.cur][i]
	k.links[k.cur] = slices.Delete(k.links[k.cur], i, i+1)
	k.links[to] = append(k.links[to], l)
	return nil
}

func (k *fakeKernel) LinkSetName(link netlink.Link, name string) error {
	if err := k.fail["LinkSetName"]; err != nil {
		return err
	}
	i := k.find(link.Attrs().Index, link.Attrs().Name)
	if i < 0 {
		return unix.ENODEV
	}
	if k.find(0, name) >= 0 {
		return unix.EEXIST
	}
	k.links[k.cur][i].Attrs().Name = name
	return nil
}

func (k *fakeKernel) ConfigurePod(spec Spec) error {
	if err := k.fail["ConfigurePod"]; err != nil {
		return err
	}
	if k.find(0, spec.IfName) < 0 {
		return fmt.Errorf("finding %s: %w", spec.IfName, errNoLink)
	}
	k.configured[k.cur] = spec
	return nil
}

func (k *fakeKernel) GetNS(path string) (ns.NetNS, error) {
	if err := k.fail["GetNS"]; err != nil {
		return nil, err
	}
	if _, ok := k.links[path]; !ok || path == hostNS {
		return nil, ns.NSPathNotExistErr{}
	}
	k.open++
	return &fakeNS{k: k, path: path}, nil
}

// nsOfFd is the namespace a fakeNS's Fd stands for.
func (k *fakeKernel) nsOfFd(fd int) string {
	for name := range k.links {
		if fakeFd(name) == fd {
			return name
		}
	}
	return ""
}

// fakeFd is a namespace's file descriptor: the same for a name at every opening.
func fakeFd(name string) int {
	fd := 1000
	for _, c := range name {
		fd = fd*31 + int(c)
	}
	return fd & 0xffffff
}

// fakeNS is a namespace of a fakeKernel: Do runs with it current.
type fakeNS struct {
	k      *fakeKernel
	path   string
	closed bool
}

func (n *fakeNS) Do(f func(ns.NetNS) error) error {
	prev := n.k.cur
	n.k.cur = n.path
	defer func() { n.k.cur = prev }()
	return f(&fakeNS{k: n.k, path: prev, closed: true}) // the caller's namespace, not opened by GetNS
}

func (n *fakeNS) Set() error   { return errors.New("the fake kernel enters a namespace through Do only") }
func (n *fakeNS) Path() string { return n.path }
func (n *fakeNS) Fd() uintptr  { return uintptr(fakeFd(n.path)) }
func (n *fakeNS) Close() error {
	if !n.closed {
		n.closed = true
		n.k.open--
	}
	return nil
}
