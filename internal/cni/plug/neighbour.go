package plug

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// resolved are the neighbour states that hold an address the neighbour answered with.
const resolved = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE

// WaitNeighbour returns once ip answers ARP on the pod's interface ifName in the namespace at netnsPath, or an
// error when ctx ends first. Every look sends one UDP datagram to ip's discard port, which makes the kernel ask
// for ip's address, and then reads the namespace's neighbour table: a resolved entry means a frame went out of
// the pod and the answer came back. It needs nothing from the node's Open vSwitch or OVN, so it works inside a
// VM.
func WaitNeighbour(ctx context.Context, netnsPath, ifName string, ip net.IP) error {
	for {
		found, err := lookNeighbour(netnsPath, ifName, ip)
		if err != nil {
			return err
		}
		if found {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer ARP on %s: %w", ip, ifName, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lookNeighbour sends the datagram and reads the neighbour table once.
func lookNeighbour(netnsPath, ifName string, ip net.IP) (bool, error) {
	found := false
	err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(ifName)
		if err != nil {
			return fmt.Errorf("finding %s: %w", ifName, err)
		}
		// An interrupted dump (the table changed while it was read) is read again at the next look.
		neighs, err := netlink.NeighList(link.Attrs().Index, netlink.FAMILY_V4)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return fmt.Errorf("listing the neighbours of %s: %w", ifName, err)
		}
		for _, n := range neighs {
			if n.IP.Equal(ip) && n.State&resolved != 0 && len(n.HardwareAddr) > 0 {
				found = true
				return nil
			}
		}
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: ip, Port: 9})
		if err != nil {
			return fmt.Errorf("asking for %s: %w", ip, err)
		}
		defer func() { _ = c.Close() }()
		_, _ = c.Write([]byte{0}) // unanswered, or refused: only the ARP exchange it causes matters
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("in network namespace %s: %w", netnsPath, err)
	}
	return found, nil
}
