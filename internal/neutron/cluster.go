package neutron

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// Cluster holds the cluster-wide Neutron objects every namespace and service builds on.
type Cluster struct {
	ID                string
	ExternalNetworkID string
	ExternalSubnet    netip.Prefix // zero when not configured
	SubnetPoolID      string
	// PodPrefixes are the pod subnet pool's prefixes.
	PodPrefixes      []string
	PrefixLength     int
	RouterID         string
	ServiceNetworkID string
	ServiceSubnet    *openstack.Subnet
	Caps             openstack.Capabilities
	// PodSecurityGroups are the groups every pod port gets (nil: Neutron's default group).
	PodSecurityGroups []string
}

// EnsureCluster finds or creates the subnet pool, router and service network, all tagged as this cluster's.
// Objects named by ID in the configuration are used as they are.
func EnsureCluster(ctx context.Context, n openstack.Networking, clusterID string, o config.Neutron, withServices bool) (*Cluster, error) {
	c := &Cluster{ID: clusterID, PrefixLength: o.PodSubnetPrefixLength}
	caps, err := n.Capabilities(ctx)
	if err != nil {
		return nil, err
	}
	switch o.TagPortsOnCreate {
	case "true":
		caps.TagsOnPortCreate = true // a create answered without the tags is tagged afterwards (KeepTags)
	case "false":
		caps.TagsOnPortCreate = false
	}
	c.Caps = caps
	if o.ExternalSubnetCIDR != "" {
		if c.ExternalSubnet, err = netip.ParsePrefix(o.ExternalSubnetCIDR); err != nil {
			return nil, fmt.Errorf("external subnet: %w", err)
		}
	}
	if o.ExternalNetwork != "" {
		if c.ExternalNetworkID, err = findNetwork(ctx, n, o.ExternalNetwork); err != nil {
			return nil, err
		}
	}
	clusterTags := ownership.Owner{Cluster: clusterID, Kind: ownership.KindCluster}.Tags()

	if err := c.ensureSubnetPool(ctx, n, o, clusterTags); err != nil {
		return nil, err
	}

	c.RouterID = o.RouterID
	if c.RouterID == "" {
		if err := c.ensureRouter(ctx, n, clusterTags); err != nil {
			return nil, err
		}
	}

	if withServices {
		if err := c.ensureServiceNetwork(ctx, n, o.ServiceSubnetCIDR, clusterTags); err != nil {
			return nil, err
		}
	}
	if err := c.ensurePodGroup(ctx, n, o, withServices); err != nil {
		return nil, err
	}
	return c, nil
}

// ensureSubnetPool sets c.SubnetPoolID and c.PodPrefixes: the configured pool, or the cluster's pod subnet
// pool found by its tags, or created.
func (c *Cluster) ensureSubnetPool(ctx context.Context, n openstack.Networking, o config.Neutron, clusterTags []string) error {
	if o.PodSubnetPoolID != "" {
		c.SubnetPoolID = o.PodSubnetPoolID
		return c.readPoolPrefixes(ctx, n)
	}
	pools, err := n.ListSubnetPools(ctx, openstack.Filter{Tags: clusterTags})
	if err != nil {
		return err
	}
	c.PodPrefixes = []string{o.PodSubnetPoolCIDR}
	if len(pools) > 0 {
		c.SubnetPoolID, c.PodPrefixes = pools[0].ID, pools[0].Prefixes
	} else {
		p, err := ensureTagged(ctx, n, subnetPoolKind, clusterTags, func(ctx context.Context, d string) (*openstack.SubnetPool, error) {
			return n.CreateSubnetPool(ctx, openstack.SubnetPoolSpec{Name: "raven-" + c.ID + "-pods", Description: d,
				Prefixes: []string{o.PodSubnetPoolCIDR}, PrefixLength: o.PodSubnetPrefixLength})
		})
		if err != nil {
			return fmt.Errorf("creating the pod subnet pool: %w", err)
		}
		c.SubnetPoolID = p.ID
	}
	return nil
}

// readPoolPrefixes sets c.PodPrefixes from the configured subnet pool c.SubnetPoolID.
func (c *Cluster) readPoolPrefixes(ctx context.Context, n openstack.Networking) error {
	pools, err := n.ListSubnetPools(ctx, openstack.Filter{ID: c.SubnetPoolID})
	if err != nil {
		return err
	}
	for _, p := range pools {
		if p.ID == c.SubnetPoolID {
			c.PodPrefixes = p.Prefixes
			return nil
		}
	}
	return fmt.Errorf("the configured pod subnet pool %s does not exist", c.SubnetPoolID)
}

// ensureRouter finds the cluster's router by its tags, or creates it with its gateway on the external network.
func (c *Cluster) ensureRouter(ctx context.Context, n openstack.Networking, clusterTags []string) error {
	routers, err := n.ListRouters(ctx, openstack.Filter{Tags: clusterTags})
	if err != nil {
		return err
	}
	if len(routers) > 0 {
		c.RouterID = routers[0].ID
	} else {
		r, err := ensureTagged(ctx, n, routerKind, clusterTags, func(ctx context.Context, d string) (*openstack.Router, error) {
			return n.CreateRouter(ctx, openstack.RouterSpec{Name: "raven-" + c.ID, Description: d, GatewayNetworkID: c.ExternalNetworkID})
		})
		if err != nil {
			return fmt.Errorf("creating the cluster router: %w", err)
		}
		c.RouterID = r.ID
	}
	return nil
}

// findNetwork returns the ID of the external network nameOrID: the network of that ID, or else the external
// network of that name. External networks are the operator's (an admin makes them) and every project sees
// them, so they are looked for by name among the external networks only: a project's own network of the
// same name is not taken for it. Two external networks of that name are refused, with their IDs.
func findNetwork(ctx context.Context, n openstack.Networking, nameOrID string) (string, error) {
	if net, err := n.GetNetwork(ctx, nameOrID); err == nil {
		return net.ID, nil
	} else if !openstack.IsNotFound(err) {
		return "", err
	}
	nets, err := n.ListNetworks(ctx, openstack.Filter{Name: nameOrID, External: true})
	if err != nil {
		return "", err
	}
	switch len(nets) {
	case 0:
		return "", fmt.Errorf("external network %q not found (no external network has that ID or name)", nameOrID)
	case 1:
		return nets[0].ID, nil
	}
	ids := make([]string, len(nets))
	for i, x := range nets {
		ids[i] = x.ID
	}
	slices.Sort(ids)
	return "", fmt.Errorf("external network name %q is ambiguous: external networks %s have it; set neutron.externalNetwork to the ID of one",
		nameOrID, strings.Join(ids, ", "))
}

// ensureServiceNetwork makes the VIP network. The gateway and Neutron's own allocation pool sit in the
// upper half of the CIDR, so the lower half stays free for clusterIPs, which Raven requests explicitly.
func (c *Cluster) ensureServiceNetwork(ctx context.Context, n openstack.Networking, cidr string, tags []string) error {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil || !prefix.Addr().Is4() {
		return fmt.Errorf("service subnet %q must be an IPv4 CIDR", cidr)
	}
	owner := ownership.Owner{Cluster: c.ID, Kind: ownership.KindCluster, Name: "services"}
	svcTags := owner.Tags()
	nets, err := n.ListNetworks(ctx, openstack.Filter{Tags: svcTags})
	if err != nil {
		return err
	}
	var netID string
	if len(nets) > 0 {
		netID = nets[0].ID
	} else {
		net, err := ensureTagged(ctx, n, networkKind, svcTags, func(ctx context.Context, d string) (*openstack.Network, error) {
			return n.CreateNetwork(ctx, openstack.NetworkSpec{Name: "raven-" + c.ID + "-services", Description: d})
		})
		if err != nil {
			return fmt.Errorf("creating the service network: %w", err)
		}
		netID = net.ID
	}
	c.ServiceNetworkID = netID
	subs, err := n.ListSubnets(ctx, openstack.Filter{NetworkID: netID, Tags: svcTags})
	if err != nil {
		return err
	}
	if len(subs) > 0 {
		c.ServiceSubnet = &subs[0]
		return nil
	}
	first, last := upperHalf(prefix)
	sub, err := ensureTagged(ctx, n, subnetKind, svcTags, func(ctx context.Context, d string) (*openstack.Subnet, error) {
		return n.CreateSubnet(ctx, openstack.SubnetSpec{
			Name: "raven-" + c.ID + "-services", NetworkID: netID, CIDR: prefix.Masked().String(), Description: d,
			GatewayIP:       last.String(),
			AllocationPools: []openstack.AllocationPool{{Start: first.String(), End: last.Prev().String()}},
		})
	})
	if err != nil {
		return fmt.Errorf("creating the service subnet: %w", err)
	}
	c.ServiceSubnet = sub
	if err := attach(ctx, n, c.RouterID, sub.ID); err != nil {
		return fmt.Errorf("attaching the service subnet to the router: %w", err)
	}
	return nil
}

// attach gives the router an interface on the subnet. Neutron answers 400 both when the router already
// has one and for real faults (no gateway on the subnet, overlapping CIDRs): only the first is success.
func attach(ctx context.Context, n openstack.Networking, routerID, subnetID string) error {
	err := n.AddRouterInterface(ctx, routerID, subnetID)
	// 400: Neutron's answer when the router has a port on the subnet. 409 (the gateway address is taken):
	// its answer when an earlier attach whose reply was lost went through.
	if err == nil || openstack.KindOf(err) != openstack.KindBadRequest && openstack.KindOf(err) != openstack.KindConflict {
		return err
	}
	ports, lerr := n.ListPorts(ctx, openstack.Filter{DeviceID: routerID})
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	for _, p := range ports {
		for _, ip := range p.FixedIPs {
			if ip.SubnetID == subnetID {
				return nil // attached already
			}
		}
	}
	return err
}

// upperHalf returns the first address of the upper half of an IPv4 prefix and its last usable address.
func upperHalf(p netip.Prefix) (first, last netip.Addr) {
	p = p.Masked()
	b := p.Addr().As4()
	base := binary.BigEndian.Uint32(b[:])
	size := uint32(1) << (32 - p.Bits())
	return v4(base + size/2), v4(base + size - 2)
}

func v4(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}
