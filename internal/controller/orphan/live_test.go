package orphan

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// claimAt makes a pool port at t0 and has it claimed at claimed by the pod ns/name (uid) as an unbound pool's
// take does: one update (name, device_id, node), then the pod's tags.
func (c *cloud) claimAt(t *testing.T, claimed time.Time, name, uid string) string {
	t.Helper()
	ctx := context.Background()
	c.n.Now = func() time.Time { return t0 }
	pool := ownership.Owner{Cluster: "c1", Kind: ownership.KindPool, Name: "ns"}
	p, err := c.n.CreatePort(ctx, openstack.PortSpec{Name: neutron.PoolPortName, NetworkID: c.net.ID, SubnetID: c.subnet.ID,
		DeviceOwner: neutron.DeviceOwner, Tags: pool.Tags()})
	if err != nil {
		t.Fatal(err)
	}
	c.n.Now = func() time.Time { return claimed }
	if _, err := c.n.UpdatePort(ctx, p.ID, openstack.PortUpdate{Name: &name, DeviceID: &uid}); err != nil {
		t.Fatal(err)
	}
	owner := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: uid, Name: "ns/" + name}
	if err := c.n.ReplaceTags(ctx, openstack.ResourcePorts, p.ID, owner.Tags()); err != nil {
		t.Fatal(err)
	}
	return p.ID
}

// holding is the pod ns/name whose port annotation names portID.
func holding(name, uid, portID string) *corev1.Pod {
	p := podObj(name, uid)
	p.Annotations = map[string]string{annotations.PodPort: `{"id":"` + portID + `"}`}
	return p
}

func TestTheSweepNeverTakesALivePodsPort(t *testing.T) {
	claimed := t0.Add(time.Hour)
	cases := []struct {
		name string
		// port makes the port under test and returns its ID.
		port func(t *testing.T, c *cloud) string
		// cache are the pods the sweeper's cache shows (besides the namespace and the pod "live"); api are the
		// pods the API server holds, read uncached (nil: no uncached reader).
		cache, api []client.Object
		after      time.Duration
		wantKept   bool
	}{
		{name: "a pool port claimed by a pod the new leader's cache does not show yet stays for the grace period counted from the claim",
			port:  func(t *testing.T, c *cloud) string { return c.claimAt(t, claimed, "new", "new-uid") },
			after: time.Hour + grace/2, wantKept: true},
		{name: "a claimed pool port whose pod is gone is released once the grace period from the claim has passed",
			port:  func(t *testing.T, c *cloud) string { return c.claimAt(t, claimed, "new", "new-uid") },
			after: time.Hour + grace},
		{name: "a port a live pod's annotation names stays, whatever its owner tags and its age",
			port:  func(t *testing.T, c *cloud) string { return c.ports["gone-uid"] },
			cache: []client.Object{holding("holder", "holder-uid", "PORT")}, after: time.Hour, wantKept: true},
		{name: "a gone pod's port that only a finished pod's annotation names is released",
			port: func(t *testing.T, c *cloud) string { return c.ports["gone-uid"] },
			cache: []client.Object{func() client.Object {
				p := holding("holder", "holder-uid", "PORT")
				p.Status.Phase = corev1.PodSucceeded
				return p
			}()}, after: time.Hour},
		{name: "a port whose pod the API server holds but the cache does not show yet stays, whatever its age",
			port: func(t *testing.T, c *cloud) string { return c.ports["gone-uid"] },
			api:  []client.Object{podObj("gone", "gone-uid")}, after: time.Hour, wantKept: true},
		{name: "a gone pod's port is released when the API server holds another pod of its name",
			port: func(t *testing.T, c *cloud) string { return c.ports["gone-uid"] },
			api:  []client.Object{podObj("gone", "other-uid")}, after: time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCloud(t)
			id := tc.port(t, c)
			objs := []client.Object{namespaceObj(), podObj("live", "live-uid")}
			for _, o := range tc.cache {
				if p, ok := o.(*corev1.Pod); ok && p.Annotations[annotations.PodPort] == `{"id":"PORT"}` {
					p.Annotations[annotations.PodPort] = `{"id":"` + id + `"}`
				}
				objs = append(objs, o)
			}
			s, _, _ := c.sweeper(objs...)
			if tc.api != nil {
				s.APIReader = crfake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(tc.api...).Build()
			}
			if err := s.Resync(context.Background(), t0.Add(tc.after), true); err != nil {
				t.Fatal(err)
			}
			if c.exists(id) != tc.wantKept {
				t.Errorf("port %s exists: %v, want %v", id, c.exists(id), tc.wantKept)
			}
			if !c.exists(c.ports["live-uid"]) {
				t.Error("the live pod's port was deleted")
			}
		})
	}
}
