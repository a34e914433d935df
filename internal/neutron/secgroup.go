package neutron

import (
	"context"
	"fmt"
	"slices"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

var securityGroupKind = kind[openstack.SecurityGroup]{res: openstack.ResourceSecurityGroups,
	list: func(n openstack.Networking) func(context.Context, openstack.Filter) ([]openstack.SecurityGroup, error) {
		return n.ListSecurityGroups
	},
	del: func(n openstack.Networking) func(context.Context, string) error { return n.DeleteSecurityGroup },
	id:  func(x *openstack.SecurityGroup) string { return x.ID }, set: func(x *openstack.SecurityGroup, t []string) { x.Tags = t }}

// PodGroupRules are the rules of the cluster pod group. Egress to anywhere, IPv4 and IPv6, stated: Neutron gave
// every new group those two rules until 2023.2, since when a new group gets what the cloud's default security
// group rules say, which an admin may have emptied. Ingress from the group itself (pods reach pods), from the
// service subnet (load balancers, and hairpin traffic a load balancer sends from its VIP), and from each further
// source (the pod subnets: pods that NetworkPolicy isolates are not members of the group, and the OVN provider's
// health checks come from a network:distributed port of each pod network; the nodes).
func PodGroupRules(groupID, serviceCIDR string, sources []string) []openstack.SecurityGroupRule {
	in := func(r openstack.SecurityGroupRule) openstack.SecurityGroupRule {
		r.SecurityGroupID, r.Direction, r.EtherType = groupID, "ingress", "IPv4"
		return r
	}
	rules := []openstack.SecurityGroupRule{
		{SecurityGroupID: groupID, Direction: "egress", EtherType: "IPv4"},
		{SecurityGroupID: groupID, Direction: "egress", EtherType: "IPv6"},
		in(openstack.SecurityGroupRule{RemoteGroupID: groupID}),
	}
	if serviceCIDR != "" {
		rules = append(rules, in(openstack.SecurityGroupRule{RemoteIPPrefix: serviceCIDR}))
	}
	for _, s := range sources {
		rules = append(rules, in(openstack.SecurityGroupRule{RemoteIPPrefix: s}))
	}
	return rules
}

// ensurePodGroup sets c.PodSecurityGroups: the configured groups as they are, or the cluster pod group,
// found by its tags or made, with every rule of PodGroupRules (rules someone added stay).
func (c *Cluster) ensurePodGroup(ctx context.Context, n openstack.Networking, o config.Neutron, withServices bool) error {
	if len(o.PodSecurityGroups) > 0 {
		c.PodSecurityGroups = o.PodSecurityGroups
		return nil
	}
	tags := ownership.Owner{Cluster: c.ID, Kind: ownership.KindCluster, Name: "pods"}.Tags()
	groups, err := n.ListSecurityGroups(ctx, openstack.Filter{Tags: tags})
	if err != nil {
		return err
	}
	var g *openstack.SecurityGroup
	if len(groups) > 0 {
		g = &groups[0]
	} else if g, err = ensureTagged(ctx, n, securityGroupKind, tags, func(ctx context.Context, d string) (*openstack.SecurityGroup, error) {
		return n.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "raven-" + c.ID + "-pods", Description: d})
	}); err != nil {
		return fmt.Errorf("creating the cluster pod security group: %w", err)
	}
	serviceCIDR, sources := "", append(slices.Clone(c.PodPrefixes), o.PodIngressCIDRs...)
	if withServices {
		serviceCIDR = o.ServiceSubnetCIDR
	}
	for _, want := range PodGroupRules(g.ID, serviceCIDR, sources) {
		if hasRule(g.Rules, want) {
			continue
		}
		if _, err := n.CreateSecurityGroupRule(ctx, want); err != nil && openstack.KindOf(err) != openstack.KindConflict {
			return fmt.Errorf("adding a rule to the cluster pod security group %s: %w", g.ID, err)
		}
	}
	c.PodSecurityGroups = []string{g.ID}
	return nil
}

func hasRule(rules []openstack.SecurityGroupRule, want openstack.SecurityGroupRule) bool {
	for _, r := range rules {
		r.ID, r.Description = "", ""
		if r == want {
			return true
		}
	}
	return false
}
