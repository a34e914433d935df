//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// `raven uninstall`, the command operations.md gives, on the real Neutron and Octavia: a cluster of its own
// (a router with its gateway, a subnet pool, the service network, the pod group, a namespace network with a
// port, a floating IP and a load balancer with a member, all tagged as Raven tags them) is gone afterwards,
// while the stack's own cluster keeps every object; a namespace held by Raven's finalizer is deleted. A dry
// run before it removes nothing.
func TestUninstallRemovesEverythingTagged(t *testing.T) {
	if env.raven != nil {
		env.raven.stop() // it would put back the finalizers the uninstall takes off
	}
	ctx := context.Background()
	id := "e2e-uninstall-" + randSuffix()
	made := makeCluster(t, id)
	local := taggedCounts(t, env.cluster)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "uninstall-" + randSuffix(), Finalizers: []string{annotations.NamespaceFinalizer}}}
	if _, err := env.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	uninstall := func(extra ...string) string {
		args := append([]string{"uninstall", "--config=" + env.vars["RAVEN_CONFIG"], "--cluster-id=" + id, "--timeout=5m"}, extra...)
		out, err := exec.Command(env.ravenBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("raven %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := uninstall("--dry-run")
	if got := taggedCounts(t, id); got.total() != made.total() {
		t.Fatalf("a dry run changed the cluster's objects: %v, were %v\n%s", got, made, out)
	}
	started := time.Now()
	out = uninstall()
	t.Logf("raven uninstall took %.1f s for %v:\n%s", time.Since(started).Seconds(), made, grepLines(out, "objects="))
	if got := taggedCounts(t, id); got.total() != 0 {
		t.Errorf("after raven uninstall the cluster still has %v", got)
	}
	// Its load balancers apart: Octavia may still be finishing an earlier test's deletes.
	if got := taggedCounts(t, env.cluster); !slices.Equal(got.counts()[1:], local.counts()[1:]) {
		t.Errorf("the stack's own cluster had %v, now %v", local, got)
	}
	eventually(t, time.Minute, "the namespace held by Raven's finalizer to go", func() (bool, error) {
		_, err := env.kube.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// counted is how many objects of each kind carry a cluster's tag.
type counted map[string]int

func (c counted) total() (n int) {
	for _, v := range c {
		n += v
	}
	return n
}

// counts are c's counts in a fixed order, load balancers first.
func (c counted) counts() []int {
	var out []int
	for _, k := range []string{"loadbalancers", "floatingips", "ports", "securitygroups", "subnets", "networks", "routers", "subnetpools"} {
		out = append(out, c[k])
	}
	return out
}

// taggedCounts lists every kind of object Raven makes by the cluster's tag.
func taggedCounts(t *testing.T, cluster string) counted {
	t.Helper()
	ctx := context.Background()
	sel := ownership.ClusterSelector(cluster)
	f := openstack.Filter{Tags: sel}
	n, lbc := env.os.Networking, env.os.LoadBalancing
	c := counted{}
	add := func(kind string, l int, err error) {
		if err != nil {
			t.Fatal(err)
		}
		c[kind] = l
	}
	lbs, err := lbc.ListLoadBalancers(ctx, sel)
	add("loadbalancers", len(lbs), err)
	fips, err := n.ListFloatingIPs(ctx, f)
	add("floatingips", len(fips), err)
	ports, err := n.ListPorts(ctx, f)
	add("ports", len(ports), err)
	sgs, err := n.ListSecurityGroups(ctx, f)
	add("securitygroups", len(sgs), err)
	subnets, err := n.ListSubnets(ctx, f)
	add("subnets", len(subnets), err)
	nets, err := n.ListNetworks(ctx, f)
	add("networks", len(nets), err)
	routers, err := n.ListRouters(ctx, f)
	add("routers", len(routers), err)
	pools, err := n.ListSubnetPools(ctx, f)
	add("subnetpools", len(pools), err)
	return c
}

// makeCluster makes in Neutron and Octavia what Raven makes for a cluster with one namespace, one pod and one
// Service with an external IP, through Raven's own domain code, tagged with id.
func makeCluster(t *testing.T, id string) counted {
	t.Helper()
	ctx := context.Background()
	n := env.os.Networking
	c, err := neutron.EnsureCluster(ctx, n, id, config.Neutron{ExternalNetwork: "public", PodSubnetPoolCIDR: "10.250.0.0/16",
		PodSubnetPrefixLength: 24, ServiceSubnetCIDR: "10.251.0.0/24"}, true)
	if err != nil {
		t.Fatal(err)
	}
	m := &neutron.Manager{N: n, C: c, X: neutron.NewIndex()}
	nn, err := m.EnsureNamespace(ctx, "uid-"+id, "uninstall")
	if err != nil {
		t.Fatal(err)
	}
	pod := ownership.Owner{Cluster: id, Kind: ownership.KindPod, UID: "pod-" + id, Name: "uninstall/pod"}
	port, err := n.CreatePort(ctx, openstack.PortSpec{Name: "uninstall/pod", NetworkID: nn.Network.ID, SubnetID: nn.Subnet.ID, Tags: pod.Tags()})
	if err != nil {
		t.Fatal(err)
	}
	if err := neutron.KeepTags(ctx, n, port, pod.Tags()); err != nil {
		t.Fatal(err)
	}
	svc := ownership.Owner{Cluster: id, Kind: ownership.KindService, UID: "svc-" + id, Name: "uninstall/svc"}
	if _, err := m.CreateFloatingIP(ctx, openstack.FloatingIPSpec{FloatingNetworkID: c.ExternalNetworkID}, svc.Tags()); err != nil {
		t.Fatal(err)
	}
	lb, err := env.os.LoadBalancing.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: "uninstall/svc", VipSubnetID: c.ServiceSubnet.ID,
		VipAddress: "10.251.0.10", Provider: env.vars["STACK_LB_PROVIDER"], Tags: svc.Tags(), Listeners: []openstack.ListenerGraph{{
			Listener: openstack.ListenerSpec{Protocol: "TCP", ProtocolPort: 80},
			Pool:     openstack.PoolSpec{Name: "uninstall/svc:80", Protocol: "TCP", LBAlgorithm: "SOURCE_IP_PORT"},
			Members:  []openstack.MemberSpec{{Address: port.FixedIPs[0].IPAddress, ProtocolPort: 80, SubnetID: nn.Subnet.ID}},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the load balancer to be ACTIVE", func() (bool, error) {
		got, err := env.os.LoadBalancing.GetLoadBalancer(ctx, lb.ID)
		return err == nil && got.ProvisioningStatus == "ACTIVE", err
	})
	return taggedCounts(t, id)
}
