package policy

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// Spare groups are policy groups made before a policy needs them: empty (Neutron's default rules deleted)
// and tagged under a slot key. A new policy takes one with a tag request that runs beside its rules and port
// updates, where a group made on demand costs three requests in a row before its rules can go in.

// sparePrefix begins the key of a spare group's slot.
const sparePrefix = "spare-"

// SpareKey is the key of spare slot i.
func SpareKey(i int) string { return sparePrefix + strconv.Itoa(i) }

// IsSpare says whether key is a spare slot's.
func IsSpare(key string) bool { return strings.HasPrefix(key, sparePrefix) }

// spareName is the name of spare slot i's group; a group taken for a policy is renamed after its key.
func spareName(cluster string, i int) string { return "raven-" + cluster + "-" + SpareKey(i) }

// spareDescription describes a spare group.
const spareDescription = "spare NetworkPolicy group"

// groupName is the name of the group of key.
func groupName(cluster, key string) string { return "raven-" + cluster + "-" + key }

// Clean says whether spare sg can be handed out: it has no rule (a take that failed halfway leaves rules)
// and inUse does not hold it.
func Clean(sg openstack.SecurityGroup, inUse map[string]bool) bool {
	return len(sg.Rules) == 0 && !inUse[sg.ID]
}

// CreateSpare makes the group of spare slot i. Its default rules are deleted before it is tagged, so that a
// group tagged as a spare is always empty, even to a reader that sees it while it is being made. A group of
// the slot's name without tags (a create whose tag request never happened) is finished, not made again.
func CreateSpare(ctx context.Context, n openstack.Networking, cluster string, i int) (openstack.SecurityGroup, error) {
	name := spareName(cluster, i)
	// By name in Raven's project: another project's group of the same name (names are no secret) is not the slot's.
	found, err := n.ListSecurityGroups(ctx, openstack.Filter{Name: name, ProjectID: n.ProjectID()})
	if err != nil {
		return openstack.SecurityGroup{}, err
	}
	// A group of that name with tags is one taken for a policy and not yet renamed: not the slot's.
	idx := slices.IndexFunc(found, func(g openstack.SecurityGroup) bool { return len(g.Tags) == 0 })
	var sg *openstack.SecurityGroup
	if idx >= 0 {
		sg = &found[idx]
	} else if sg, err = n.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: name, Description: spareDescription}); err != nil {
		return openstack.SecurityGroup{}, err
	}
	err = makeSpare(ctx, n, cluster, sg, i)
	return *sg, err
}

// makeSpare deletes the rules of sg, then tags it as the spare of slot i (in sg too): a group tagged as a spare
// never has rules, even to a reader that sees it in between.
func makeSpare(ctx context.Context, n openstack.Networking, cluster string, sg *openstack.SecurityGroup, i int) error {
	errs := make([]error, len(sg.Rules))
	var wg sync.WaitGroup
	for j, r := range sg.Rules {
		wg.Go(func() { errs[j] = openstack.IgnoreNotFound(n.DeleteSecurityGroupRule(ctx, r.ID)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	sg.Rules = nil
	tags := ownership.Owner{Cluster: cluster, Kind: ownership.KindPolicy, UID: SpareKey(i)}.Tags()
	if err := n.ReplaceTags(ctx, openstack.ResourceSecurityGroups, sg.ID, tags); err != nil {
		return err
	}
	sg.Tags = tags
	return nil
}

// Take makes spare sg the group of g with one tag request: from then on Read finds it under g's key.
func Take(ctx context.Context, n openstack.Networking, cluster string, sg openstack.SecurityGroup, g Group) error {
	tags := ownership.Owner{Cluster: cluster, Kind: ownership.KindPolicy, UID: g.Key}.Tags()
	return n.ReplaceTags(ctx, openstack.ResourceSecurityGroups, sg.ID, tags)
}

// Rename gives a taken spare the name and description of g's group, which only people read.
func Rename(ctx context.Context, n openstack.Networking, cluster string, sg openstack.SecurityGroup, g Group) error {
	return n.UpdateSecurityGroup(ctx, sg.ID, openstack.SecurityGroupSpec{Name: groupName(cluster, g.Key), Description: g.Description})
}

// Recycle makes sg, a group no policy wants any more and no port carries, the spare of slot i: its rules are
// deleted before it is tagged as the spare, then it takes the spare's name. Cheaper than deleting it and
// making a spare: one request per rule and two, where a new spare costs five.
func Recycle(ctx context.Context, n openstack.Networking, cluster string, sg openstack.SecurityGroup, i int) error {
	if err := makeSpare(ctx, n, cluster, &sg, i); err != nil {
		return err
	}
	return n.UpdateSecurityGroup(ctx, sg.ID, openstack.SecurityGroupSpec{Name: spareName(cluster, i), Description: spareDescription})
}
