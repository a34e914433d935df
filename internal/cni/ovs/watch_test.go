package ovs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// monitorLine is one update as ovsdb-client monitor --format=json --data=json prints it, of these rows.
func monitorLine(rows ...string) string {
	return `{"data":[` + strings.Join(rows, ",") + `],"headings":["row","action","name","external_ids"]}`
}

// row is one row of an update: its UUID, its action, the interface name and external_ids as key, value, ...
func row(uuid, action, name string, kvs ...string) string {
	pairs := make([]string, 0, len(kvs)/2)
	for i := 0; i+1 < len(kvs); i += 2 {
		pairs = append(pairs, fmt.Sprintf("[%q,%q]", kvs[i], kvs[i+1]))
	}
	n := fmt.Sprintf("%q", name)
	if action == "old" {
		n = "null" // an old row carries only what changed
	}
	return fmt.Sprintf(`[%q,%q,%s,["map",[%s]]]`, uuid, action, n, strings.Join(pairs, ","))
}

// The rows of the tests: tapA plugged twice, its former plug installed; br-int, which is not plugged.
var (
	bridgeRow    = row("u0", "initial", "br-int")
	formerRow    = []string{"iface-id", "a", "raven-plug", "former", "ovn-installed", "true"}
	newRow       = []string{"iface-id", "a", "raven-plug", "new"}
	newInstalled = []string{"iface-id", "a", "raven-plug", "new", "ovn-installed", "true"}
	// newPlug is what the second plug wrote, and waits for.
	newPlug = map[string]string{"iface-id": "a", "raven-plug": "new"}
	// replaced is the update of the second plug's transaction: the former row deleted, a new one inserted.
	replaced = monitorLine(row("u1", "delete", "tapA", formerRow...), row("u2", "insert", "tapA", newRow...))
	// installed is ovn-controller setting the key on the new row.
	installed = monitorLine(row("u2", "old", "", newRow...), row("", "new", "tapA", newInstalled...))
)

// restart stands for the monitor ending and starting again (ovsdb-server restarted) in a script.
const restart = "restart"

// script runs a Watch over monitors whose output the test writes; each run of the monitor is a pipe.
type script struct {
	t      *testing.T
	starts chan *io.PipeWriter
	cur    *io.PipeWriter
}

// newScript starts w.Run in the test's bubble and returns once the first monitor has started.
func newScript(t *testing.T) (*Watch, *script) {
	t.Helper()
	s := &script{t: t, starts: make(chan *io.PipeWriter)}
	w := &Watch{Start: func(ctx context.Context, _ string) (io.ReadCloser, func() error, error) {
		r, wr := io.Pipe()
		select {
		case s.starts <- wr:
			return r, func() error { return nil }, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	s.cur = <-s.starts
	t.Cleanup(func() { cancel(); _ = s.cur.Close(); <-done })
	return w, s
}

// send writes one update, or ends the monitor and waits for the next (restart), and returns once the watch
// has taken it and everything in the bubble waits again.
func (s *script) send(line string) {
	s.t.Helper()
	if line == restart {
		_ = s.cur.Close()
		s.cur = <-s.starts // Run starts the monitor again after its second, of the bubble's clock
		return
	}
	if _, err := io.WriteString(s.cur, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
	synctest.Wait()
}

// installedNow tells whether WaitInstalled returns at once: its context is done before it starts, so it
// returns nil only for a row that is installed now.
func installedNow(t *testing.T, w *Watch, name string, plugged map[string]string) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := w.WaitInstalled(ctx, name, plugged)
	if err != nil && !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("WaitInstalled = %v, want nil or ErrNotInstalled", err)
	}
	return err == nil
}

// What ends the wait of a plug of tapA (newPlug), after each script of monitor output.
func TestWatchWaitInstalled(t *testing.T) {
	tests := []struct {
		name    string
		script  []string
		plugged map[string]string
		want    bool
	}{
		{
			name:   "the new row with ovn-installed ends the wait",
			script: []string{monitorLine(bridgeRow, row("u1", "initial", "tapA", formerRow...)), replaced, installed},
			want:   true,
		},
		{
			name:   "the new row without ovn-installed does not",
			script: []string{monitorLine(bridgeRow, row("u1", "initial", "tapA", formerRow...)), replaced},
		},
		{
			name:   "the former row's ovn-installed does not, before the monitor shows the replacement",
			script: []string{monitorLine(bridgeRow, row("u1", "initial", "tapA", formerRow...))},
		},
		{
			name: "the former row in the first update of a restarted monitor does not",
			script: []string{monitorLine(bridgeRow, row("u1", "initial", "tapA", formerRow...)),
				restart, monitorLine(bridgeRow, row("u1", "initial", "tapA", formerRow...))},
		},
		{
			name: "the new row with ovn-installed in the first update of a restarted monitor ends the wait",
			script: []string{monitorLine(bridgeRow, row("u1", "initial", "tapA", formerRow...)),
				restart, monitorLine(bridgeRow, row("u2", "initial", "tapA", newInstalled...))},
			want: true,
		},
		{
			name: "a row the first update of a restarted monitor does not show is gone",
			script: []string{monitorLine(bridgeRow, row("u2", "initial", "tapA", newInstalled...)),
				restart, monitorLine(bridgeRow)},
		},
		{
			name:   "a deleted interface is not installed",
			script: []string{monitorLine(bridgeRow, row("u2", "initial", "tapA", newInstalled...)), monitorLine(row("u2", "delete", "tapA", newInstalled...))},
		},
		{
			name:    "without external_ids to match, any row with ovn-installed ends the wait",
			script:  []string{monitorLine(bridgeRow, row("u1", "initial", "tapA", formerRow...))},
			plugged: map[string]string{},
			want:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, mon := newScript(t)
				for _, line := range tt.script {
					mon.send(line)
				}
				plugged := newPlug
				if tt.plugged != nil {
					plugged = tt.plugged
				}
				if got := installedNow(t, w, "tapA", plugged); got != tt.want {
					t.Errorf("the wait for tapA has ended: %v, want %v", got, tt.want)
				}
			})
		})
	}
}

// A waiter is woken by the update that installs its row, and only by it; one whose row is never installed
// gets ErrNotInstalled when its context ends.
func TestWatchWakesTheWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, mon := newScript(t)
		mon.send(monitorLine(bridgeRow, row("u1", "initial", "tapA", formerRow...)))
		got := make(chan error, 1)
		go func() { got <- w.WaitInstalled(t.Context(), "tapA", newPlug) }()
		stillWaiting := func(after string) {
			t.Helper()
			synctest.Wait() // the waiter has looked at the rows and is blocked again, or has returned
			select {
			case err := <-got:
				t.Fatalf("WaitInstalled returned %v %s", err, after)
			default:
			}
		}
		stillWaiting("on the former row")
		mon.send(replaced)
		stillWaiting("on the new row without ovn-installed")
		mon.send(installed)
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("after the new row's ovn-installed: %v", err)
			}
		default:
			t.Fatal("the waiter was not woken by the update that installed its row")
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := w.WaitInstalled(ctx, "tapB", nil); !errors.Is(err, ErrNotInstalled) {
			t.Fatalf("tapB, never shown: WaitInstalled = %v, want ErrNotInstalled", err)
		}
	})
}

func TestWatchRejectsBadOutput(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"not JSON", `monitor: connection refused`},
		{"no action column", `{"data":[],"headings":["row","name","external_ids"]}`},
		{"bad map", `{"data":[["u1","initial","tapA","nope"]],"headings":["row","action","name","external_ids"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := (&Watch{}).apply([]byte(tc.line), true); err == nil {
				t.Fatalf("apply(%s) = nil, want an error", tc.line)
			}
		})
	}
}

// A monitor whose output cannot be read is stopped; one that ends says how, with what it printed.
func TestWatchFollowEnds(t *testing.T) {
	for _, tc := range []struct {
		name, output string
		waitErr      error
		want         string
		stopped      bool // follow stops the monitor before it waits for it
	}{
		{"unreadable output", "monitor: connection refused\n", nil, "parsing ovsdb-client monitor output", true},
		{"monitor exits", monitorLine(bridgeRow) + "\n", errors.New("ovsdb-client monitor: exit status 1: database went away"), "database went away", false},
		{"monitor ends cleanly", monitorLine(bridgeRow) + "\n", nil, "ovsdb-client monitor ended", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stopped bool
			w := &Watch{Start: func(ctx context.Context, _ string) (io.ReadCloser, func() error, error) {
				return io.NopCloser(strings.NewReader(tc.output)), func() error {
					stopped = ctx.Err() != nil
					return tc.waitErr
				}, nil
			}}
			err := w.follow(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("follow = %v, want an error containing %q", err, tc.want)
			}
			if stopped != tc.stopped {
				t.Fatalf("monitor stopped before the wait: %v, want %v", stopped, tc.stopped)
			}
		})
	}
}
