//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The suite runs in two phases. Tests that stop, kill, restart or reconfigure a component every test shares
// (Raven, raven-node, a daemon of the stack), change a quota, or count something cluster-wide run one at a time,
// first. The others call shared: go test holds them until every serial test has ended, then runs them
// together (its -parallel flag, E2E_PARALLEL in the Makefile says how many at once), each in namespaces of its
// own, on one Raven with the suite's configuration that none of them restarts. A test that waits on OpenStack or
// the datapath then leaves the machine to the others instead of holding it idle.

// sharedRaven guards the start of the shared phase's Raven: the first shared test starts it (when the last
// serial test left another configuration, or none), the others find it running.
var sharedRaven sync.Mutex

// shared marks t as a test of the shared phase and returns the Raven it runs against. It must be the test's
// first call: what comes before it runs in the serial phase.
func shared(t *testing.T) *Raven {
	t.Helper()
	t.Parallel()
	sharedRaven.Lock()
	defer sharedRaven.Unlock()
	keystoneDown() // no shared test uses the Keystone stack
	if r := env.raven; r != nil && r.suite && r.running() && (r.installed || !realNodes()) {
		return r
	}
	harnessLog("the shared phase begins: Raven with the suite's configuration, tests run together")
	return startRaven(t, ravenOpts{})
}

// waits holds, by test name, what the test waited on and how long, for the summary at its end.
var waits sync.Map

type waitLog struct {
	mu    sync.Mutex
	began time.Time
	spent map[string]time.Duration
	count map[string]int
}

// waited records that t spent d waiting on what. The first record of a test registers the summary its end
// logs: how long the test waited on each thing, against how long it ran.
func waited(t testing.TB, what string, d time.Duration) {
	v, loaded := waits.LoadOrStore(t.Name(), &waitLog{began: time.Now().Add(-d), spent: map[string]time.Duration{}, count: map[string]int{}})
	w := v.(*waitLog)
	if !loaded {
		t.Cleanup(func() { t.Log(w.summary()) })
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spent[what] += d
	w.count[what]++
}

// summary is one line: the total waited, the test's time so far, then each wait, longest first.
func (w *waitLog) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var total time.Duration
	whats := make([]string, 0, len(w.spent))
	for what, d := range w.spent {
		total += d
		whats = append(whats, what)
	}
	slices.SortFunc(whats, func(a, b string) int { return int(w.spent[b] - w.spent[a]) })
	parts := make([]string, 0, len(whats))
	for _, what := range whats {
		part := fmt.Sprintf("%.1f s on %s", w.spent[what].Seconds(), what)
		if n := w.count[what]; n > 1 {
			part += fmt.Sprintf(" (%d×)", n)
		}
		parts = append(parts, part)
	}
	return fmt.Sprintf("waits: %.1f s of %.1f s since the first: %s", total.Seconds(), time.Since(w.began).Seconds(), strings.Join(parts, "; "))
}
