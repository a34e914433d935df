package manager

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/raven-net/raven/internal/openstack"
	openstackfake "github.com/raven-net/raven/internal/openstack/fake"
	"github.com/raven-net/raven/internal/ownership"
)

func TestClusterID(t *testing.T) {
	kubeSystem := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "5b0c2f1e-0d7a-4c55-9a43-2f0e8f1d7c11"}}
	cases := []struct {
		name       string
		objects    []corev1.Namespace
		configured string
		want       string
		wantErr    string
	}{
		{"a configured ID is kept", []corev1.Namespace{*kubeSystem}, "prod-east", "prod-east", ""},
		{"without one, the kube-system namespace's UID", []corev1.Namespace{*kubeSystem}, "", string(kubeSystem.UID), ""},
		{"without one and without kube-system, an error that says why", nil, "", "", "kube-system"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := fake.NewClientset()
			for i := range c.objects {
				if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &c.objects[i], metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := clusterID(context.Background(), cs.CoreV1().Namespaces(), c.configured)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("clusterID = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// A Raven without a configured cluster ID, on a Neutron that holds what a Raven of the earlier default
// ("kubernetes") made, refuses to start rather than make everything again under the kube-system UID.
func TestRefuseEarlierDefault(t *testing.T) {
	const uid = "5b0c2f1e-0d7a-4c55-9a43-2f0e8f1d7c11"
	earlier := ownership.Owner{Cluster: "kubernetes", Kind: ownership.KindNamespace, UID: "ns-uid", Name: "default"}.Tags()
	other := ownership.Owner{Cluster: "prod-east", Kind: ownership.KindNamespace, UID: "ns-uid", Name: "default"}.Tags()
	cases := []struct {
		name       string
		netTags    []string // a network's tags, nil for none
		router     bool     // a router of the earlier default
		configured string
		wantErr    bool
	}{
		{"no ID and a network of the earlier default: refused", earlier, false, "", true},
		{"no ID and a router of the earlier default: refused", nil, true, "", true},
		{"no ID and only another cluster's objects: started", other, false, "", false},
		{"no ID on an empty Neutron: started", nil, false, "", false},
		{"the earlier default pinned: started", earlier, true, "kubernetes", false},
		{"another ID pinned: started", earlier, true, uid, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			n := openstackfake.NewNeutron()
			if c.netTags != nil {
				net, err := n.CreateNetwork(ctx, openstack.NetworkSpec{Name: "ns"})
				if err != nil {
					t.Fatal(err)
				}
				if err := n.ReplaceTags(ctx, openstack.ResourceNetworks, net.ID, c.netTags); err != nil {
					t.Fatal(err)
				}
			}
			if c.router {
				r, err := n.CreateRouter(ctx, openstack.RouterSpec{Name: "raven-kubernetes"})
				if err != nil {
					t.Fatal(err)
				}
				if err := n.ReplaceTags(ctx, openstack.ResourceRouters, r.ID, ownership.Owner{Cluster: "kubernetes", Kind: ownership.KindCluster}.Tags()); err != nil {
					t.Fatal(err)
				}
			}
			defaulted := c.configured
			if defaulted == "" {
				defaulted = uid
			}
			err := refuseEarlierDefault(ctx, n, c.configured, defaulted)
			if !c.wantErr {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			for _, want := range []string{"clusterID: kubernetes", "--cluster-id=kubernetes", "clusterID: " + uid} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want one that says %q", err, want)
				}
			}
		})
	}
}
