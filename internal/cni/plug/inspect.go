package plug

import (
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Inspect reads the pod's interface back (a veth's pod end, or a VLAN link), for CHECK.
func Inspect(netnsPath, ifName string) (Observed, error) {
	var obs Observed
	err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(ifName)
		if err != nil {
			return fmt.Errorf("finding %s: %w", ifName, err)
		}
		a := link.Attrs()
		obs.MAC, obs.MTU, obs.Up = a.HardwareAddr, a.MTU, a.Flags&net.FlagUp != 0
		if v, ok := link.(*netlink.Vlan); ok {
			obs.VLAN = v.VlanId
		}
		addrs, err := netlinksafe.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("listing addresses of %s: %w", ifName, err)
		}
		for _, ad := range addrs {
			if ad.IPNet != nil && ad.IP.IsGlobalUnicast() {
				obs.Addrs = append(obs.Addrs, ad.IPNet)
			}
		}
		obs.TxChecksum, err = TxChecksum(ifName)
		return err
	})
	if err != nil {
		return Observed{}, fmt.Errorf("in network namespace %s: %w", netnsPath, err)
	}
	return obs, nil
}
