package policy

import (
	"context"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// A group is the cluster's (tagged, and so read by every reconcile and handed out) only once Neutron's default
// rules, egress to anywhere, are gone from it: a create that meets a failed delete leaves an untagged group,
// which the next create finishes instead of making another.
func TestAGroupIsTaggedOnlyWithoutItsDefaultRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"a rule delete fails with a 503", openstack.NewError("neutron security_group_rule delete", openstack.KindServer, 503, "503 Service Unavailable")},
		{"a rule delete times out", openstack.NewError("neutron security_group_rule delete", openstack.KindUnavailable, 0, "context deadline exceeded")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			n := fake.NewNeutron()
			g := Group{Key: "np-uid1", Description: "NetworkPolicy ns/web"}
			n.Fail("DeleteSecurityGroupRule", 1, tc.err)
			if _, err := Create(ctx, n, "c1", g); err == nil {
				t.Fatal("Create reported success although a default rule stayed")
			}
			byKey, _, err := Read(ctx, n, "c1")
			if err != nil {
				t.Fatal(err)
			}
			if sg, ok := byKey[g.Key]; ok {
				t.Fatalf("the group is the cluster's with rules %+v after a failed delete", sg.Rules)
			}

			sg, err := Create(ctx, n, "c1", g)
			if err != nil {
				t.Fatal(err)
			}
			if len(n.SGs) != 1 {
				t.Fatalf("%d groups in Neutron; want the one group, finished", len(n.SGs))
			}
			if rules := n.SGs[sg.ID].Rules; len(rules) != 0 {
				t.Fatalf("the group has rules %+v; want none", rules)
			}
			if byKey, _, err = Read(ctx, n, "c1"); err != nil || byKey[g.Key].ID != sg.ID {
				t.Fatalf("Read = %v, %v; want the group under its key", byKey, err)
			}
		})
	}
}
