package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/raven-net/raven/internal/config"
)

// The uninstall refuses while a Raven of the cluster renews its Lease, and goes on once the Lease is released,
// stale or absent.
func TestUninstallRefusesWhileRavenRuns(t *testing.T) {
	now := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "raven-system", Name: "raven-c1"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}}
	}
	cases := []struct {
		name    string
		lease   *coordinationv1.Lease
		elect   bool
		wantErr string
	}{
		{"a Lease renewed 5 s ago", lease("node-a_1234", 5*time.Second), true, "node-a_1234 holds the Lease raven-system/raven-c1"},
		{"a Lease last renewed 10 min ago", lease("node-a_1234", 10*time.Minute), true, ""},
		{"a released Lease", lease("", 5*time.Second), true, ""},
		{"no Lease", nil, true, ""},
		{"no leader election", lease("node-a_1234", 5*time.Second), false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kube := fake.NewClientset()
			if c.lease != nil {
				if _, err := kube.CoordinationV1().Leases("raven-system").Create(context.Background(), c.lease, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			o := config.Default()
			o.ClusterID = "c1"
			o.LeaderElection.Enabled, o.LeaderElection.Namespace = c.elect, "raven-system"
			err := notRunning(context.Background(), kube, o, now)
			if (c.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
		})
	}
}
