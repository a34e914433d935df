package ovs

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// monitorLines are ovsdb-client monitor --format=json --data=json updates, as it prints them.
const (
	initialLine = `{"data":[["u1","initial","br-int",["map",[]]],["u2","initial","tapA",["map",[["iface-id","a"],["ovn-installed","true"]]]]],"headings":["row","action","name","external_ids"]}`
	insertLine  = `{"data":[["u3","insert","tapB",["map",[["iface-id","b"]]]]],"headings":["row","action","name","external_ids"]}`
	installLine = `{"data":[["u3","old",null,["map",[["iface-id","b"]]]],["","new","tapB",["map",[["iface-id","b"],["ovn-installed","true"]]]]],"headings":["row","action","name","external_ids"]}`
	deleteLine  = `{"data":[["u2","delete","tapA",["map",[["iface-id","a"],["ovn-installed","true"]]]]],"headings":["row","action","name","external_ids"]}`
)

// fakeMonitor is a monitor whose output the test writes, a line at a time, with write.
func fakeMonitor(t *testing.T) (w *Watch, write func(line string)) {
	t.Helper()
	r, wr := io.Pipe()
	w = &Watch{Start: func(context.Context, string) (io.ReadCloser, func() error, error) {
		return r, func() error { return nil }, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.follow(ctx) }()
	t.Cleanup(func() { cancel(); _ = wr.Close(); <-done })
	return w, func(line string) {
		t.Helper()
		if _, err := io.WriteString(wr, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWatchWaitInstalled(t *testing.T) {
	w, write := fakeMonitor(t)
	write(initialLine)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.WaitInstalled(ctx, "tapA"); err != nil {
		t.Fatalf("tapA is installed in the initial rows: %v", err)
	}

	// tapB is inserted without the key, then ovn-controller sets it: the waiter returns only then.
	got := make(chan error, 1)
	go func() { got <- w.WaitInstalled(ctx, "tapB") }()
	write(insertLine)
	select {
	case err := <-got:
		t.Fatalf("WaitInstalled returned %v before ovn-installed was set", err)
	case <-time.After(100 * time.Millisecond):
	}
	write(installLine)
	if err := <-got; err != nil {
		t.Fatalf("after ovn-installed: %v", err)
	}

	// A deleted interface is not installed any more: the wait ends with ErrNotInstalled at the deadline.
	write(deleteLine)
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	for {
		w.mu.Lock()
		gone, changed := !w.installed["tapA"], w.changed
		w.mu.Unlock()
		if gone {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the monitor never showed tapA's delete")
		}
	}
	if err := w.WaitInstalled(short, "tapA"); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("deleted tapA: WaitInstalled = %v, want ErrNotInstalled", err)
	}
}

// An interface made again under its name shows its former row's key until the monitor shows the new row:
// the wait is for the new row's key.
func TestWatchWaitsForTheNewRow(t *testing.T) {
	w, write := fakeMonitor(t)
	write(initialLine) // tapA installed
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.WaitInstalled(ctx, "tapA"); err != nil {
		t.Fatal(err)
	}
	w.expect("tapA") // AddPort replaces it
	got := make(chan error, 1)
	go func() { got <- w.WaitInstalled(ctx, "tapA") }()
	select {
	case err := <-got:
		t.Fatalf("WaitInstalled returned %v on the former row's key", err)
	case <-time.After(100 * time.Millisecond):
	}
	// The replacement: the former row deleted and a new one inserted without the key, then the key set.
	write(`{"data":[["u2","delete","tapA",["map",[["ovn-installed","true"]]]],["u9","insert","tapA",["map",[["iface-id","a"]]]]],"headings":["row","action","name","external_ids"]}`)
	select {
	case err := <-got:
		t.Fatalf("WaitInstalled returned %v before the new row was installed", err)
	case <-time.After(100 * time.Millisecond):
	}
	write(`{"data":[["u9","old",null,["map",[["iface-id","a"]]]],["","new","tapA",["map",[["iface-id","a"],["ovn-installed","true"]]]]],"headings":["row","action","name","external_ids"]}`)
	if err := <-got; err != nil {
		t.Fatalf("after the new row's ovn-installed: %v", err)
	}
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
		{"monitor exits", initialLine + "\n", errors.New("ovsdb-client monitor: exit status 1: database went away"), "database went away", false},
		{"monitor ends cleanly", initialLine + "\n", nil, "ovsdb-client monitor ended", false},
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
