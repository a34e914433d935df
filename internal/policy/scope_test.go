package policy

import (
	"context"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// A group whose tag call never happened is found again by its name. Names are no secret: with credentials
// that see every project, another project's untagged group of the same name (with rules of its own) must not
// be finished and handed out as the cluster's. Both lookups are by name in Raven's project.
func TestGroupsAreLookedUpByNameInRavensProject(t *testing.T) {
	ctx := context.Background()
	g := Group{Key: "np-uid1", Description: "NetworkPolicy ns/web"}
	cases := []struct {
		name    string
		planted string
		create  func(n *fake.Neutron) (openstack.SecurityGroup, error)
	}{
		{"a policy's group", groupName("c1", g.Key), func(n *fake.Neutron) (openstack.SecurityGroup, error) {
			return Create(ctx, n, "c1", g)
		}},
		{"a spare group", spareName("c1", 0), func(n *fake.Neutron) (openstack.SecurityGroup, error) {
			return CreateSpare(ctx, n, "c1", 0)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := fake.NewNeutron()
			n.Project = "p-raven"
			rule := openstack.SecurityGroupRule{ID: "other-rule", SecurityGroupID: "other-sg", Direction: "ingress", EtherType: "IPv4", Protocol: "tcp", PortRangeMin: 22, PortRangeMax: 22}
			n.SGs["other-sg"] = &openstack.SecurityGroup{ID: "other-sg", ProjectID: "p-other", Name: tc.planted, Rules: []openstack.SecurityGroupRule{rule}}
			sg, err := tc.create(n)
			if err != nil {
				t.Fatal(err)
			}
			if sg.ID == "other-sg" {
				t.Fatal("another project's group of the same name was taken for the cluster's")
			}
			if other := n.SGs["other-sg"]; len(other.Tags) > 0 || len(other.Rules) != 1 {
				t.Fatalf("another project's group was changed: tags %v, rules %+v", other.Tags, other.Rules)
			}
			for _, l := range n.Unscoped("c1") {
				t.Errorf("%s by %+v is not scoped to the cluster or Raven's project", l.Method, l.Filter)
			}
		})
	}
}
