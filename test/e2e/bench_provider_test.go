//go:build e2e && bench

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

var (
	benchProviderSizes = flag.String("bench.provider-sizes", "10,50", "pool sizes (members) the provider benchmark measures, comma-separated")
	benchProviderReps  = flag.Int("bench.provider-reps", 2, "times each member change is measured per pool size and monitor setting")
	benchProviderOut   = flag.String("bench.provider-out", "bench/results/provider", "where the provider benchmark writes latest.json and latest.md")
)

// providerStep is how long one member change took to reach each stage, from the moment it was sent: Octavia's
// API answered; the provider driver wrote it to OVN's northbound Load_Balancer; ovn-northd copied it to the
// southbound Load_Balancer; Octavia lists it (the provider reported its status back through the driver agent)
// with the load balancer ACTIVE again; and the provider idle again (see idle).
type providerStep struct {
	answered, nb, sb, octavia time.Duration
	// idle: a member create sent once the change is through every other stage has reached OVN NB. The provider
	// works through one queue in order: what the change left in it (a batch's updates of the members that stay)
	// is done by then.
	idle time.Duration
}

// TestBenchmarkProvider measures the OVN provider alone, without Raven: where the time of a member change goes.
// A load balancer built by hand holds a pool of N members (addresses of Neutron ports on a network of its own);
// then, N at each size, with and without a health monitor like Raven's:
//   - a batch member update that keeps the N members and adds one (a rolling update's step, as a batch);
//   - a batch member update that keeps the N members and removes that one;
//   - one member created on its own, and deleted on its own.
//
// Each is timed from the request to each stage of providerStep.
func TestBenchmarkProvider(t *testing.T) {
	if env.vars["STACK_LB_PROVIDER"] != "ovn" {
		t.Fatalf("the stack's Octavia runs the %q provider: this benchmark measures the ovn provider (STACK_LB_PROVIDER=ovn)", env.vars["STACK_LB_PROVIDER"])
	}
	ctx := context.Background()
	res := map[string]any{}
	put := func(k string, v float64) { res[k] = float64(int64(v*100)) / 100 }
	res["stack"] = fmt.Sprintf("ML2/OVN Neutron, Octavia with the ovn provider, STACK_CNI=%s; Raven not involved", env.vars["STACK_CNI"])
	putRun(res)
	res["health_monitor"] = "TCP, delay 2 s, timeout 1 s, 2 failures down (as Raven's); the members' ports are not plugged: they probe OFFLINE"
	out := outDir(*benchProviderOut)

	floor := newFloorNetwork(t, "bench-provider", "192.168.16.0/22")
	sub := floor.subnet

	for _, size := range providerSizes(t) {
		_, ports := floor.bulk(size + *benchProviderReps + 1)
		var addrs []string
		for _, p := range ports {
			addrs = append(addrs, p.FixedIPs[0].IPAddress)
		}
		lb := providerLB(t, sub, addrs[:size])
		probe := openstack.MemberSpec{Address: addrs[len(addrs)-1], ProtocolPort: 80, SubnetID: sub}
		for _, monitored := range []bool{false, true} {
			label := fmt.Sprintf("n%d.%s.", size, map[bool]string{false: "unmonitored", true: "monitored"}[monitored])
			if monitored {
				addProviderMonitor(t, lb)
			}
			steps := map[string][]providerStep{}
			for rep := range *benchProviderReps {
				extra := addrs[size+rep]
				kept := providerSpecs(providerMembers(t, lb), sub)
				add := openstack.MemberSpec{Address: extra, ProtocolPort: 80, SubnetID: sub}
				measure := func(what string, present bool, send func() error) {
					t.Logf("%s%s %d: %s", label, what, rep+1, extra)
					start := time.Now()
					s := measureProviderStep(t, lb, extra, present, send)
					s.idle = providerIdle(t, lb, probe, start)
					logProviderStep(t, label+what, s)
					steps[what] = append(steps[what], s)
				}
				measure("batch_add_one", true, func() error {
					return env.os.LoadBalancing.ReplaceMembers(ctx, lb.pool, append(slices.Clone(kept), add))
				})
				measure("batch_remove_one", false, func() error { return env.os.LoadBalancing.ReplaceMembers(ctx, lb.pool, kept) })
				measure("create_one", true, func() error { return env.os.LoadBalancing.CreateMember(ctx, lb.pool, add) })
				members := providerMembers(t, lb)
				i := slices.IndexFunc(members, func(m openstack.Member) bool { return m.Address == extra })
				if i < 0 {
					t.Fatalf("%s was created, but Octavia does not list it", extra)
				}
				gone := members[i]
				measure("delete_one", false, func() error { return env.os.LoadBalancing.DeleteMember(ctx, lb.pool, gone.ID) })
			}
			for what, s := range steps {
				putProviderSteps(put, label+what+".", s)
			}
			// Octavia hands a batch's new members to the provider first, then those that stay, then asks for the
			// removals: a removal waits for one update per member that stays.
			put(label+"batch_remove_one.nb_per_member_kept_ms", medianStep(steps["batch_remove_one"], func(s providerStep) time.Duration { return s.nb }).Seconds()*1000/float64(size))
			writeResultsTo(t, out, res, nil) // each size's figures are kept even if a later one fails
		}
		deleteLoadBalancerAndWait(t, lb.id)
		floor.deletePorts(ports)
	}
	writeResultsTo(t, out, res, nil)
}

// providerLBRef is a load balancer of the provider benchmark and its one pool.
type providerLBRef struct{ id, pool string }

// providerLB is a load balancer built by hand for the provider benchmark: one TCP listener whose pool holds a
// member at each of addrs (one create), returned once Octavia and OVN's northbound both have every member.
func providerLB(t testing.TB, subnet string, addrs []string) providerLBRef {
	t.Helper()
	ctx := context.Background()
	var members []openstack.MemberSpec
	for _, a := range addrs {
		members = append(members, openstack.MemberSpec{Address: a, ProtocolPort: 80, SubnetID: subnet})
	}
	start := time.Now()
	lb, err := env.os.LoadBalancing.CreateLoadBalancer(ctx, openstack.LoadBalancerSpec{Name: "bench-provider-" + randSuffix(), VipSubnetID: subnet,
		Provider: "ovn", Listeners: tcp80("provider", members)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteLoadBalancerAndWait(t, lb.ID) })
	ref := providerLBRef{id: lb.ID}
	eventually(t, svcPhaseTimeout, fmt.Sprintf("the provider benchmark's load balancer with %d members settled", len(addrs)), func() (bool, error) {
		pools, err := env.os.LoadBalancing.ListPools(ctx, lb.ID)
		if err != nil || len(pools) != 1 {
			return false, err
		}
		ref.pool = pools[0].ID
		return providerSettled(t, ref, len(addrs)), nil
	})
	t.Logf("load balancer %s with %d members settled after %.1f s", lb.ID, len(addrs), time.Since(start).Seconds())
	return ref
}

// addProviderMonitor gives the pool a health monitor like Raven's, once Octavia takes it, and waits until the
// provider has settled.
func addProviderMonitor(t testing.TB, lb providerLBRef) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	addMonitorLikeRavens(t, lb.pool, "provider")
	n := len(providerMembers(t, lb))
	eventually(t, svcPhaseTimeout, "the provider benchmark's load balancer settled with its monitor", func() (bool, error) {
		tree, err := env.os.LoadBalancing.LoadBalancerStatus(ctx, lb.id)
		if err != nil {
			return false, err
		}
		m, ok := tree.Monitors[lb.pool]
		return ok && m.ProvisioningStatus == "ACTIVE" && providerSettled(t, lb, n), nil
	})
	t.Logf("health monitor on %s settled after %.1f s", lb.id, time.Since(start).Seconds())
}

// providerSettled reports that the load balancer is ACTIVE with n members, none pending, all of them in OVN's
// northbound Load_Balancer.
func providerSettled(t testing.TB, lb providerLBRef, n int) bool {
	ctx := context.Background()
	got, err := env.os.LoadBalancing.GetLoadBalancer(ctx, lb.id)
	if err != nil || got.ProvisioningStatus != "ACTIVE" {
		return false
	}
	members := providerMembers(t, lb)
	if len(members) != n || slices.ContainsFunc(members, func(m openstack.Member) bool { return m.ProvisioningStatus != "ACTIVE" }) {
		return false
	}
	vips := ovnVIPs(t, "ovn-nbctl", "STACK_OVN_NB_TCP", lb.id)
	for _, m := range members {
		if !strings.Contains(vips, m.Address+":80") {
			return false
		}
	}
	return true
}

// providerSpecs are the specs of members, on subnet.
func providerSpecs(members []openstack.Member, subnet string) []openstack.MemberSpec {
	out := make([]openstack.MemberSpec, 0, len(members))
	for _, m := range members {
		out = append(out, openstack.MemberSpec{Address: m.Address, ProtocolPort: 80, SubnetID: subnet})
	}
	return out
}

func providerMembers(t testing.TB, lb providerLBRef) []openstack.Member {
	t.Helper()
	ms, err := env.os.LoadBalancing.ListMembers(context.Background(), lb.pool)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// ovnVIPs is the vips column of the OVN Load_Balancer rows the provider made for the load balancer id (it names
// them by it), from the northbound or southbound database.
func ovnVIPs(t testing.TB, ctl, db, id string) string {
	t.Helper()
	out, err := exec.Command(ctl, "--db="+env.vars[db], "--timeout=10", "--bare", "--columns=vips", "find", "Load_Balancer", "name="+id).CombinedOutput()
	if err != nil {
		t.Fatalf("%s find Load_Balancer: %v: %s", ctl, err, out)
	}
	return string(out)
}

// measureProviderStep sends a member change with send and times, from the request, each stage of providerStep:
// addr:80 shown (present true) or gone (present false) in each place.
func measureProviderStep(t testing.TB, lb providerLBRef, addr string, present bool, send func() error) providerStep {
	t.Helper()
	var s providerStep
	start := time.Now()
	done := make(chan struct{})
	var sendErr error
	go func() {
		sendErr = send()
		s.answered = time.Since(start)
		close(done)
	}()
	for time.Since(start) < svcPhaseTimeout {
		sent := false
		select {
		case <-done:
			if sendErr != nil {
				t.Fatal(sendErr)
			}
			sent = true
		default:
		}
		if s.look(t, lb, addr, present, start, sent) {
			return s
		}
		time.Sleep(100 * time.Millisecond) // the polling interval: each stage is timed to within it
	}
	t.Fatalf("member change of %s not through every stage after %s: %+v", addr, svcPhaseTimeout, s)
	return s
}

// look times each stage that shows the change now (Octavia's only once it has answered), and reports whether
// every stage has.
func (s *providerStep) look(t testing.TB, lb providerLBRef, addr string, present bool, start time.Time, sent bool) bool {
	shows := func(ctl, db string) bool { return strings.Contains(ovnVIPs(t, ctl, db, lb.id), addr+":80") == present }
	if s.nb == 0 && shows("ovn-nbctl", "STACK_OVN_NB_TCP") {
		s.nb = time.Since(start)
	}
	// SB is looked at once NB has the change: northd copies it from there, and a look at SB between two looks at
	// NB would time SB before NB.
	if s.nb > 0 && s.sb == 0 && shows("ovn-sbctl", "STACK_OVN_SB_TCP") {
		s.sb = time.Since(start)
	}
	if s.octavia == 0 && sent && octaviaShows(t, lb, addr, present) {
		s.octavia = time.Since(start)
	}
	return sent && s.nb > 0 && s.sb > 0 && s.octavia > 0
}

// providerIdle sends a member create for probe and waits until OVN NB has it, then deletes it and waits until
// Octavia no longer lists it; it returns the time from start until NB had the probe.
func providerIdle(t testing.TB, lb providerLBRef, probe openstack.MemberSpec, start time.Time) time.Duration {
	t.Helper()
	ctx := context.Background()
	var idle time.Duration
	eventually(t, svcPhaseTimeout, "the provider benchmark's probe member in OVN NB", func() (bool, error) {
		if !slices.ContainsFunc(providerMembers(t, lb), func(m openstack.Member) bool { return m.Address == probe.Address }) {
			err := env.os.LoadBalancing.CreateMember(ctx, lb.pool, probe)
			if openstack.KindOf(err) == openstack.KindImmutable {
				return false, nil
			}
			if err != nil {
				return false, err
			}
		}
		if strings.Contains(ovnVIPs(t, "ovn-nbctl", "STACK_OVN_NB_TCP", lb.id), probe.Address+":80") {
			idle = time.Since(start)
			return true, nil
		}
		return false, nil
	})
	eventually(t, svcPhaseTimeout, "the provider benchmark's probe member deleted", func() (bool, error) {
		got, err := env.os.LoadBalancing.GetLoadBalancer(ctx, lb.id)
		if err != nil {
			return false, err
		}
		members := providerMembers(t, lb)
		i := slices.IndexFunc(members, func(m openstack.Member) bool { return m.Address == probe.Address })
		if i < 0 {
			return got.ProvisioningStatus == "ACTIVE", nil
		}
		if got.ProvisioningStatus != "ACTIVE" || members[i].ProvisioningStatus != "ACTIVE" {
			return false, nil
		}
		err = env.os.LoadBalancing.DeleteMember(ctx, lb.pool, members[i].ID)
		if openstack.KindOf(err) == openstack.KindImmutable {
			return false, nil
		}
		return false, err
	})
	return idle
}

// octaviaShows reports that Octavia lists the load balancer ACTIVE with a member at addr ACTIVE (present), or
// none at addr.
func octaviaShows(t testing.TB, lb providerLBRef, addr string, present bool) bool {
	t.Helper()
	got, err := env.os.LoadBalancing.GetLoadBalancer(context.Background(), lb.id)
	if err != nil {
		t.Fatal(err)
	}
	members := providerMembers(t, lb)
	i := slices.IndexFunc(members, func(m openstack.Member) bool { return m.Address == addr })
	if present {
		return got.ProvisioningStatus == "ACTIVE" && i >= 0 && members[i].ProvisioningStatus == "ACTIVE"
	}
	return got.ProvisioningStatus == "ACTIVE" && i < 0
}

func logProviderStep(t testing.TB, what string, s providerStep) {
	t.Logf("%s: Octavia answered after %.2f s, OVN NB after %.2f s, OVN SB after %.2f s, Octavia lists it after %.2f s, the provider idle after %.2f s",
		what, s.answered.Seconds(), s.nb.Seconds(), s.sb.Seconds(), s.octavia.Seconds(), s.idle.Seconds())
}

func putProviderSteps(put func(string, float64), prefix string, steps []providerStep) {
	for stage, get := range map[string]func(providerStep) time.Duration{
		"answered": func(s providerStep) time.Duration { return s.answered },
		"nb":       func(s providerStep) time.Duration { return s.nb },
		"sb":       func(s providerStep) time.Duration { return s.sb },
		"octavia":  func(s providerStep) time.Duration { return s.octavia },
		"idle":     func(s providerStep) time.Duration { return s.idle },
	} {
		put(prefix+stage+"_s", medianStep(steps, get).Seconds())
	}
}

// medianStep is the median of get over steps (the lower middle one for an even count).
func medianStep(steps []providerStep, get func(providerStep) time.Duration) time.Duration {
	ds := make([]time.Duration, 0, len(steps))
	for _, s := range steps {
		ds = append(ds, get(s))
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)/2]
}

func providerSizes(t testing.TB) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Split(*benchProviderSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("-bench.provider-sizes: %q is not a pool size", f)
		}
		out = append(out, n)
	}
	return out
}
