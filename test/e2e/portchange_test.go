//go:build e2e

package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/pkg/annotations"
)

// A running pod whose port changes: its port deleted out of band, Raven makes it again with the same MAC and
// IP and raven-node points the pod's interface at it. Proved with TCP from another pod, against a deadline of
// 60 s from the deletion, with Raven on the shipped resync period (5 min, not the harness's 5 s): raven-node
// sees the interface lose its OVN binding and asks Raven to check the port (raven.io/port-check), so the 60 s
// hold with the defaults and do not depend on a resync coming by.
func TestPortDeletedInNeutronPodAnswersAgain(t *testing.T) {
	needDatapath(t)
	r := startRaven(t, ravenOpts{resync: config.Default().ResyncPeriod.Duration})
	t.Cleanup(r.stop) // the next tests run with the harness's short resync
	// The start-up listing is over: the next listing is 5 minutes away.
	r.waitResyncs(t, 0, 1, time.Minute)
	resyncs := r.resyncs(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ports := createServingPods(t, ns, "victim", "client")
	before := ports["victim"]
	ip := before.FixedIPs[0].IPAddress
	from, addr := podNetns(ns, "client"), net.JoinHostPort(ip, "80")
	expectAnswer(t, from, "tcp", addr, "victim")

	deleted := time.Now()
	if err := env.os.Networking.DeletePort(ctx, before.ID); err != nil {
		t.Fatal(err)
	}
	took, failed := answersAgain(t, ns, "victim", from, addr, before.ID, deleted, 2*time.Minute)
	t.Logf("the pod answered again %.1f s after its port was deleted (%d probes failed meanwhile)", took.Seconds(), failed)
	if took > 60*time.Second {
		t.Errorf("the pod answered again %.1f s after its port was deleted, want 60 s at most", took.Seconds())
	}
	pod, after := portAnnotation(t, ns, "victim")
	if after.MACAddress != before.MACAddress || after.FixedIPs[0].IPAddress != ip {
		t.Errorf("the new port %s has MAC %s IP %s, want the deleted port's %s %s", after.ID, after.MACAddress, after.FixedIPs[0].IPAddress, before.MACAddress, ip)
	}
	if pod.Status.PodIP != ip {
		t.Errorf("status.podIP %q, want %s", pod.Status.PodIP, ip)
	}
	waitPodEvent(t, ns, "victim", "NetworkPortUnbound", before.ID)
	waitPodEvent(t, ns, "victim", "PortRemade", before.ID, after.ID)
	waitPodEvent(t, ns, "victim", "NetworkPortChanged", before.ID, after.ID)
	expectAnswer(t, from, "tcp", addr, "victim") // through the interface raven-node pointed at the new port
	checkOnePortPerPod(t, ns)
	if got := r.resyncs(t); got != resyncs {
		t.Errorf("%v resyncs ran meanwhile (%v before the deletion, %v after): the port was not made again by the check alone", got-resyncs, resyncs, got)
	}
	if p, _ := portAnnotation(t, ns, "victim"); p.Annotations[annotations.PodPortCheck] != "" {
		t.Errorf("the check request %q is still on the pod", p.Annotations[annotations.PodPortCheck])
	}
}

// A running pod whose port is deleted out of band while Raven is down, and whose IP another port takes
// meanwhile: it gets a port with another address, raven-node gives its eth0 that address, it answers there,
// and a Warning says that status.podIP is stale.
func TestRunningPodWhoseAddressIsTakenAnswersOnItsNewAddress(t *testing.T) {
	needDatapath(t)
	ensureRaven(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ports := createServingPods(t, ns, "victim", "client")
	before := ports["victim"]
	oldIP := before.FixedIPs[0].IPAddress
	from := podNetns(ns, "client")
	expectAnswer(t, from, "tcp", net.JoinHostPort(oldIP, "80"), "victim")

	// Raven is down while the address changes hands, so that it cannot make the port again first.
	env.raven.stop()
	if err := env.os.Networking.DeletePort(ctx, before.ID); err != nil {
		t.Fatal(err)
	}
	squatter, err := env.os.Networking.CreatePort(ctx, openstack.PortSpec{
		Name: "squatter", NetworkID: before.NetworkID, SubnetID: before.FixedIPs[0].SubnetID, IPAddress: oldIP,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.os.Networking.DeletePort(context.Background(), squatter.ID) })
	started := time.Now()
	startRaven(t, ravenOpts{})

	var after *annotations.Port
	eventually(t, time.Minute, "an annotation naming another port", func() (bool, error) {
		_, after = portAnnotation(t, ns, "victim")
		return after != nil && after.ID != before.ID, nil
	})
	newIP := after.FixedIPs[0].IPAddress
	if newIP == oldIP {
		t.Fatalf("the new port %s has the squatter's address %s", after.ID, oldIP)
	}
	expectAnswerWithin(t, time.Minute, from, "tcp", net.JoinHostPort(newIP, "80"), "victim")
	t.Logf("the pod answered on its new address %s (was %s) %.1f s after Raven started", newIP, oldIP, time.Since(started).Seconds())
	checkPodEnd(t, podNetns(ns, "victim"), after.MACAddress, newIP, oldIP)
	waitPodEvent(t, ns, "victim", "PodAddressChanged", oldIP, newIP, "status.podIP")
	waitPodEvent(t, ns, "victim", "NetworkPortChanged", before.ID, after.ID, newIP)
	checkOnePortPerPod(t, ns)
}

// answersAgain probes addr over TCP from the namespace from until the pod answers with its name through
// another port than gone (its annotation names a new one), and returns how long after since that was, and how
// many probes failed meanwhile. It fails the test after limit.
func answersAgain(t *testing.T, ns, pod, from, addr, gone string, since time.Time, limit time.Duration) (took time.Duration, failed int) {
	t.Helper()
	for deadline := since.Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, ann := portAnnotation(t, ns, pod)
		got, err := exchangeWithin(from, "tcp", addr, time.Second) // to the second
		switch {
		case err != nil || got != pod:
			failed++
		case ann != nil && ann.ID != gone:
			return time.Since(since), failed
		}
	}
	_, ann := portAnnotation(t, ns, pod)
	t.Fatalf("pod %s/%s did not answer on %s through a new port within %s (annotation %+v, %d probes failed)", ns, pod, addr, limit, ann, failed)
	return 0, failed
}

// checkPodEnd: eth0 in the pod's namespace has mac, and ip without the former address.
func checkPodEnd(t *testing.T, netns, mac, ip, former string) {
	t.Helper()
	err := inNetns(netns, func() error {
		link, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if got := link.Attrs().HardwareAddr.String(); got != mac {
			t.Errorf("eth0 MAC %s, want the new port's %s", got, mac)
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		var have []string
		for _, a := range addrs {
			have = append(have, a.IP.String())
		}
		if len(have) != 1 || have[0] != ip {
			t.Errorf("eth0 addresses %v, want only %s (not the former %s)", have, ip, former)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitPodEvent waits for an event of this reason on the pod whose note has every one of words.
func waitPodEvent(t *testing.T, ns, pod, reason string, words ...string) {
	t.Helper()
	var seen []string
	eventually(t, 20*time.Second, "a "+reason+" event on pod "+pod+" naming "+strings.Join(words, ", "), func() (bool, error) {
		evs, err := env.kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range evs.Items {
			if e.Regarding.Name != pod || e.Reason != reason {
				continue
			}
			seen = append(seen, e.Note)
			if containsAll(e.Note, words) {
				t.Logf("event %s %s: %s", e.Type, e.Reason, e.Note)
				return true, nil
			}
		}
		return false, nil
	})
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
