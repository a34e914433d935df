//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
)

// neutronSGQuota sets the security group quota of project in Neutron (-1: no limit). The stack runs
// without Keystone, as the admin; its quota driver keeps per-project limits.
func neutronSGQuota(t testing.TB, project string, n int) {
	t.Helper()
	body := fmt.Sprintf(`{"quota":{"security_group":%d}}`, n)
	req, err := http.NewRequest(http.MethodPut, env.vars["NEUTRON_URL"]+"/v2.0/quotas/"+project, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("setting the security group quota of %s to %d: %s", project, n, resp.Status)
	}
}

// A pod that a policy selects is never more open than the policy says, even when Neutron refuses the
// policy's security group (the project's group quota is reached): it is isolated with the groups that exist,
// a Warning says so, and the group follows once the quota allows it.
func TestNetworkPolicyFailsClosedWhenItsGroupCannotBeMade(t *testing.T) {
	needDatapath(t)
	ensureRaven(t)
	ctx := context.Background()
	ns := newNamespace(t)
	names := []string{"p1", "p2", "p3", "p4", "p5", "p6"}
	ports := createServingPods(t, ns, append([]string{"client"}, names...)...)
	client := podNetns(ns, "client")
	addr := map[string]string{}
	for _, n := range names {
		addr[n] = net.JoinHostPort(ports[n].FixedIPs[0].IPAddress, "80")
		expectAnswer(t, client, "tcp", addr[n], n)
	}
	project := ports["client"].ProjectID
	// No group can be made from now on: the policies get only the spare groups Raven already holds (at most 4,
	// and 2 or more of the 6 policies then get none).
	neutronSGQuota(t, project, projectGroups(t, project))
	defer neutronSGQuota(t, project, -1)
	port := intstr.FromInt32(80)
	for _, n := range names {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "only-" + n}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": n}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.1/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		}}
		if _, err := env.kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var refused []string
	eventually(t, time.Minute, "a PolicyGroupsMissing Warning on a pod whose policy's group Neutron refused", func() (bool, error) {
		refused = refused[:0]
		for _, n := range names {
			if hasWarning(t, ns, n, "PolicyGroupsMissing") {
				refused = append(refused, n)
			}
		}
		return len(refused) > 0, nil
	})
	t.Logf("pods whose policy group was refused: %v", refused)
	// Every selected pod is closed to the client: those with their group by the policy, the others because
	// they left the cluster pod group all the same.
	eventually(t, time.Minute, "every selected pod refusing the client", func() (bool, error) {
		for _, n := range names {
			if probe(client, "tcp", addr[n], n) {
				return false, nil
			}
		}
		return true, nil
	})
	for _, n := range refused {
		if !closedFor(client, path{"a pod without its policy's group", "tcp", addr[n]}, n, 5*time.Second) {
			t.Fatalf("%s, whose policy group Neutron refused, admits the client", n)
		}
	}
	// Once the quota allows it, every pod carries its own policy's group.
	neutronSGQuota(t, project, -1)
	eventually(t, time.Minute, "every pod carrying its policy's group", func() (bool, error) {
		for _, n := range names {
			if len(ownGroups(t, ns, n, ports[n].ID)) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	// With its policies gone, and no other test running beside this one, no group of Raven's policies is left
	// in Neutron: neither theirs nor the base groups, which only isolated pods need.
	for _, n := range names {
		if err := env.kube.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "only-"+n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	noPolicyGroupLeft(t)
}

// noPolicyGroupLeft waits for Neutron to hold no group of Raven's policies, and names those left when it times
// out.
func noPolicyGroupLeft(t *testing.T) {
	t.Helper()
	eventually(t, 2*time.Minute, "no policy group left in Neutron", func() (bool, error) {
		groups, err := env.os.Networking.ListSecurityGroups(context.Background(), openstack.Filter{Tags: ownership.Selector(env.cluster, ownership.KindPolicy)})
		if err != nil || len(groups) == 0 {
			return err == nil, err
		}
		left := make([]string, len(groups))
		for i, g := range groups {
			left[i] = g.Name + " (" + g.Description + ")"
		}
		return false, fmt.Errorf("left: %s", strings.Join(left, "; "))
	})
}

// ownGroups are the groups of a pod's port that belong to a NetworkPolicy of namespace ns selecting the pod
// (by their description, which names the policy).
func ownGroups(t testing.TB, ns, pod, portID string) []string {
	t.Helper()
	ctx := context.Background()
	p, err := env.os.Networking.GetPort(ctx, portID)
	if err != nil {
		t.Fatal(err)
	}
	sgs, err := env.os.Networking.ListSecurityGroups(ctx, openstack.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sg := range sgs {
		if slices.Contains(p.SecurityGroups, sg.ID) && strings.HasPrefix(sg.Description, "NetworkPolicy "+ns+"/only-"+pod) {
			out = append(out, sg.ID)
		}
	}
	return out
}

// projectGroups counts the security groups of project in Neutron.
func projectGroups(t testing.TB, project string) int {
	t.Helper()
	resp, err := http.Get(env.vars["NEUTRON_URL"] + "/v2.0/security-groups?fields=id&project_id=" + project)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Groups []struct{} `json:"security_groups"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return len(out.Groups)
}
