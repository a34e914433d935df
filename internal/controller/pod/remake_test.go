package pod

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

func running(p *corev1.Pod) {
	p.Spec.NodeName = "node-a"
	p.Status.Phase = corev1.PodRunning
}

// A running pod whose port vanishes (deleted out of band, or given to another owner) is given a port with the
// same MAC and IP when Neutron has them free, and says on the pod what happened either way.
func TestRunningPodWhosePortVanishes(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// vanish takes the pod's port away, as an operator or another writer would.
		vanish func(t *testing.T, w *world, port *annotations.Port)
		// wantSame says the new port has the MAC and IP of the one the annotation named.
		wantSame  bool
		wantEvent []string
	}{
		{
			name: "deleted out of band, its address free: same MAC and IP, a Normal event",
			vanish: func(t *testing.T, w *world, port *annotations.Port) {
				if err := w.n.DeletePort(ctx, port.ID); err != nil {
					t.Fatal(err)
				}
			},
			wantSame:  true,
			wantEvent: []string{"Normal PortRemade", "deleted from Neutron", "same MAC"},
		},
		{
			name: "deleted out of band, its IP taken meanwhile: a new address, a Warning event that says status.podIP is stale",
			vanish: func(t *testing.T, w *world, port *annotations.Port) {
				if err := w.n.DeletePort(ctx, port.ID); err != nil {
					t.Fatal(err)
				}
				if _, err := w.n.CreatePort(ctx, openstack.PortSpec{Name: "user", NetworkID: port.NetworkID, IPAddress: port.FixedIPs[0].IPAddress}); err != nil {
					t.Fatal(err)
				}
			},
			wantEvent: []string{"Warning PodAddressChanged", "deleted from Neutron", port0IP, "status.podIP"},
		},
		{
			name: "given to another pod: a new address, a Warning event",
			vanish: func(t *testing.T, w *world, port *annotations.Port) {
				other := ownership.Owner{Cluster: "c1", Kind: ownership.KindPod, UID: "u-other", Name: "ns/other"}
				if err := w.n.ReplaceTags(ctx, openstack.ResourcePorts, port.ID, other.Tags()); err != nil {
					t.Fatal(err)
				}
				if _, err := w.n.UpdatePort(ctx, port.ID, openstack.PortUpdate{DeviceID: &other.UID}); err != nil {
					t.Fatal(err)
				}
			},
			wantEvent: []string{"Warning PodAddressChanged", "another owner", port0IP, "status.podIP"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, before := withARunningPod(t)
			if before == nil || before.FixedIPs[0].IPAddress != port0IP {
				t.Fatalf("first annotation %+v, want the subnet's first address %s", before, port0IP)
			}
			tc.vanish(t, w, before)
			// The resync's listing shows the change to the index, and sends the pod back.
			w.list(t, "")
			if err := w.reconcile(t, "web"); err != nil {
				t.Fatal(err)
			}
			after := checkThePodHasOneNewPort(t, w, before)
			checkTheAddressIsKeptOnlyIf(t, before, after, tc.wantSame)
			checkEventHas(t, nextEvent(t, w), append(tc.wantEvent, before.ID, after.ID))
			checkNoSecondEventInSync(t, w)
		})
	}
}

// withARunningPod is a world with the running pod web, reconciled once, and the port its annotation names then.
func withARunningPod(t *testing.T) (*world, *annotations.Port) {
	t.Helper()
	w := newWorld(t, pod("web", "u1", running))
	if err := w.reconcile(t, "web"); err != nil {
		t.Fatal(err)
	}
	return w, w.annotation(t, "web")
}

// checkThePodHasOneNewPort: web's annotation names a port other than before, and it is the pod's only one in
// Neutron. It returns that annotation.
func checkThePodHasOneNewPort(t *testing.T, w *world, before *annotations.Port) *annotations.Port {
	t.Helper()
	after := w.annotation(t, "web")
	ports := w.ports("u1")
	if after == nil || after.ID == before.ID || len(ports) != 1 || ports[0].ID != after.ID {
		t.Fatalf("annotation %+v, ports %+v: want the annotation to name the pod's one new port", after, ports)
	}
	return after
}

// checkTheAddressIsKeptOnlyIf: the port after has the MAC and IP of the port before exactly when wantSame.
func checkTheAddressIsKeptOnlyIf(t *testing.T, before, after *annotations.Port, wantSame bool) {
	t.Helper()
	same := after.MACAddress == before.MACAddress && after.FixedIPs[0].IPAddress == before.FixedIPs[0].IPAddress
	if same != wantSame {
		t.Errorf("new port MAC %s IP %s, former MAC %s IP %s: want the same %v",
			after.MACAddress, after.FixedIPs[0].IPAddress, before.MACAddress, before.FixedIPs[0].IPAddress, wantSame)
	}
}

// nextEvent is the next event recorded on the pod; the test fails at once when there is none.
func nextEvent(t *testing.T, w *world) string {
	t.Helper()
	select {
	case ev := <-w.recorder.Events:
		return ev
	default:
		t.Fatal("no event on the pod")
		return ""
	}
}

// checkEventHas fails the test for each of words that event ev lacks.
func checkEventHas(t *testing.T, ev string, words []string) {
	t.Helper()
	for _, want := range words {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q lacks %q", ev, want)
		}
	}
}

// checkNoSecondEventInSync: web, in sync now, is reconciled again without error and without an event.
func checkNoSecondEventInSync(t *testing.T, w *world) {
	t.Helper()
	if err := w.reconcile(t, "web"); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.recorder.Events:
		t.Errorf("a second event %q for a pod in sync", ev)
	default:
	}
}

// port0IP is the first address the fake Neutron gives on a namespace's subnet.
const port0IP = "10.244.0.2"

// fixedGroups gives every pod the same policy groups.
type fixedGroups []string

func (g fixedGroups) GroupsFor(context.Context, client.Reader, *corev1.Pod, string, []string) ([]string, []string, []string, error) {
	return g, nil, nil, nil
}

// The port made for a running pod whose port vanished carries the groups of the pod's NetworkPolicies from its
// creation, as a new pod's port does: not the cluster's pod groups until the policy controller comes by.
func TestThePortMadeAgainCarriesThePodsPolicyGroups(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, pod("web", "u1", running))
	if err := w.reconcile(t, "web"); err != nil {
		t.Fatal(err)
	}
	before := w.annotation(t, "web")
	policyGroup, err := w.n.CreateSecurityGroup(ctx, openstack.SecurityGroupSpec{Name: "np-policy"})
	if err != nil {
		t.Fatal(err)
	}
	w.r.Policies = fixedGroups{policyGroup.ID}
	if err := w.n.DeletePort(ctx, before.ID); err != nil {
		t.Fatal(err)
	}
	snap, err := neutron.List(ctx, w.n, w.r.Neutron.C)
	if err != nil {
		t.Fatal(err)
	}
	w.r.Neutron.X.Replace("c1", snap)
	if err := w.reconcile(t, "web"); err != nil {
		t.Fatal(err)
	}
	ports := w.ports("u1")
	if len(ports) != 1 || !slices.Equal(ports[0].SecurityGroups, []string{policyGroup.ID}) {
		t.Fatalf("ports %+v: want one, with the policy group %s only", ports, policyGroup.ID)
	}
	// A pod whose port is there is the policy controller's: its reconcile asks for no groups.
	w.r.Policies = fixedGroups{"sg-not-asked"}
	if err := w.reconcile(t, "web"); err != nil {
		t.Fatal(err)
	}
	if got := w.ports("u1"); len(got) != 1 || !slices.Equal(got[0].SecurityGroups, []string{policyGroup.ID}) {
		t.Fatalf("ports %+v after a reconcile in sync: the groups changed", got)
	}
}
