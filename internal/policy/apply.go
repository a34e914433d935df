package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// Read returns the cluster's policy groups in Neutron by key (the UID tag); a key found twice (two creates
// that raced) keeps the first, and the others are returned as extra, to be deleted.
func Read(ctx context.Context, n openstack.Networking, cluster string) (byKey map[string]openstack.SecurityGroup, extra []openstack.SecurityGroup, err error) {
	groups, err := n.ListSecurityGroups(ctx, openstack.Filter{Tags: ownership.Selector(cluster, ownership.KindPolicy)})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(groups, func(a, b openstack.SecurityGroup) int { return strings.Compare(a.ID, b.ID) })
	byKey = map[string]openstack.SecurityGroup{}
	for _, g := range groups {
		o, ok := ownership.Parse(g.Tags)
		if !ok || o.Cluster != cluster || o.Kind != ownership.KindPolicy || o.UID == "" {
			continue
		}
		if _, dup := byKey[o.UID]; dup {
			extra = append(extra, g)
			continue
		}
		byKey[o.UID] = g
	}
	return byKey, extra, nil
}

// Create makes the group of g, tagged as the cluster's, without the egress rules Neutron gives a new group
// (a policy group admits only what its rules say). Its rules come with PlanRules and Plan.Apply.
// The group is created under a name that holds its marker (the hash of its tags), so that a group whose tag
// call never happened (a crash, a lost answer, a rule delete that failed) is found by name and finished, not
// made twice or leaked. Its rules are all deleted before it is tagged: Read, and so every reconcile after
// this one, never sees a group of the cluster that still holds Neutron's "egress anywhere" rules.
func Create(ctx context.Context, n openstack.Networking, cluster string, g Group) (openstack.SecurityGroup, error) {
	tags := ownership.Owner{Cluster: cluster, Kind: ownership.KindPolicy, UID: g.Key}.Tags()
	name := groupName(cluster, g.Key)
	// By name in Raven's project: another project's group of the same name (names are no secret) is not this one.
	found, err := n.ListSecurityGroups(ctx, openstack.Filter{Name: name, ProjectID: n.ProjectID()})
	if err != nil {
		return openstack.SecurityGroup{}, err
	}
	var sg *openstack.SecurityGroup
	if len(found) > 0 {
		sg = &found[0]
	} else if sg, err = n.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: name, Description: g.Description}); err != nil {
		return openstack.SecurityGroup{}, err
	}
	// The default rules' deletes are independent of one another: all at once. No port carries the group, and
	// without its tags no reconcile hands it out, until they are all gone.
	errs := make([]error, len(sg.Rules))
	var wg sync.WaitGroup
	for i, r := range sg.Rules {
		wg.Go(func() { errs[i] = openstack.IgnoreNotFound(n.DeleteSecurityGroupRule(ctx, r.ID)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return openstack.SecurityGroup{}, fmt.Errorf("deleting the default rules of security group %s: %w", sg.ID, err)
	}
	if err := n.ReplaceTags(ctx, openstack.ResourceSecurityGroups, sg.ID, tags); err != nil {
		return openstack.SecurityGroup{}, err
	}
	sg.Tags, sg.Rules = tags, nil
	return *sg, nil
}

// Plan is what bringing a group's rules in line takes: the rules to add and the IDs of the rules to delete.
type Plan struct {
	Group openstack.SecurityGroup
	Add   []openstack.SecurityGroupRule
	Stale []string
}

// PlanRules compares the rules of sg with want. ids resolves the peer keys of want's rules; a rule whose peer
// has no group yet waits for the next sync.
func PlanRules(sg openstack.SecurityGroup, want []Rule, ids map[string]string) Plan {
	wanted := map[string]openstack.SecurityGroupRule{}
	for _, r := range want {
		x := openstack.SecurityGroupRule{SecurityGroupID: sg.ID, Direction: r.Direction, EtherType: "IPv4", Protocol: r.Protocol,
			PortRangeMin: r.PortMin, PortRangeMax: r.PortMax, RemoteIPPrefix: r.RemoteIPPrefix}
		if r.RemoteGroup != "" {
			id, ok := ids[r.RemoteGroup]
			if !ok {
				continue
			}
			x.RemoteGroupID = id
		}
		wanted[ruleKey(x)] = x
	}
	p := Plan{Group: sg}
	for _, r := range sg.Rules {
		k := ruleKey(r)
		if _, ok := wanted[k]; ok {
			delete(wanted, k)
			continue
		}
		p.Stale = append(p.Stale, r.ID)
	}
	for _, r := range wanted {
		p.Add = append(p.Add, r)
	}
	slices.SortFunc(p.Add, func(a, b openstack.SecurityGroupRule) int { return strings.Compare(ruleKey(a), ruleKey(b)) })
	return p
}

// Apply deletes the stale rules one by one, then adds the missing ones in one bulk request. It returns how
// many rules it created and deleted.
func (p Plan) Apply(ctx context.Context, n openstack.Networking) (created, deleted int, err error) {
	// Stale rules go first and whatever the creates meet: a rule the policy no longer has must not stay
	// because a new one was refused.
	var errs []error
	for _, id := range p.Stale {
		if err := openstack.IgnoreNotFound(n.DeleteSecurityGroupRule(ctx, id)); err != nil {
			errs = append(errs, fmt.Errorf("deleting rule %s of security group %s: %w", id, p.Group.ID, err))
			continue
		}
		deleted++
	}
	if len(p.Add) > 0 {
		if _, err := n.CreateSecurityGroupRules(ctx, p.Add); err != nil {
			errs = append(errs, fmt.Errorf("adding %d rules to security group %s: %w", len(p.Add), p.Group.ID, err))
		} else {
			created = len(p.Add)
		}
	}
	return created, deleted, errors.Join(errs...)
}

// ruleKey identifies a rule by what it admits. Neutron may store "any address" as no prefix, and a port
// range only with a protocol.
func ruleKey(r openstack.SecurityGroupRule) string {
	prefix := r.RemoteIPPrefix
	if prefix == "0.0.0.0/0" && r.RemoteGroupID == "" {
		prefix = ""
	}
	min, max := r.PortRangeMin, r.PortRangeMax
	if r.Protocol == "" {
		min, max = 0, 0
	}
	return r.Direction + "|" + r.EtherType + "|" + r.Protocol + "|" + strconv.Itoa(min) + "-" + strconv.Itoa(max) + "|" + prefix + "|" + r.RemoteGroupID
}
