package ovs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Watch follows which interfaces carry ovn-installed through one `ovsdb-client monitor` of the Interface
// table, so that any number of plugs waiting at once cost one database client, where an `ovs-vsctl
// wait-until` per plug made ovsdb-server feed every change to every waiter.
type Watch struct {
	// DB is the database server, as ovs-vsctl's --db (empty: ovsdb-client's default).
	DB string
	// Start starts the monitor and returns its output; execMonitor when nil (the seam for tests).
	Start func(ctx context.Context, db string) (io.ReadCloser, func() error, error)

	mu sync.Mutex
	// rows holds the external_ids of each interface, by name, as the current monitor shows them. A row
	// shown there may be a former row of the name (the monitor lags, or it started again and its first
	// update is older than a plug): WaitInstalled tells the rows apart by what the plug wrote into them.
	rows    map[string]map[string]string
	changed chan struct{} // closed and replaced on every update
}

// execMonitor runs ovsdb-client monitor on the Interface table's name and external_ids, one JSON update
// per line.
func execMonitor(ctx context.Context, db string) (io.ReadCloser, func() error, error) {
	args := []string{"monitor", "--format=json", "--data=json"}
	if db != "" {
		args = append(args, db)
	}
	cmd := exec.CommandContext(ctx, "ovsdb-client", append(args, "Open_vSwitch", "Interface", "name,external_ids")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting ovsdb-client monitor: %w", err)
	}
	wait := func() error {
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("ovsdb-client monitor: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
	return out, wait, nil
}

// Run keeps the monitor running until ctx ends, starting it again (after a second) when it stops, for
// example when ovsdb-server restarts.
func (w *Watch) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		if err := w.follow(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Following the OVS Interface table; starting again in 1 s")
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// follow runs one monitor to its end: its first update is the whole table. The monitor is stopped when
// follow returns early (output it cannot read).
func (w *Watch) follow(ctx context.Context) error {
	start := w.Start
	if start == nil {
		start = execMonitor
	}
	ctx, cancel := context.WithCancel(ctx)
	out, wait, err := start(ctx, w.DB)
	if err != nil {
		cancel()
		return err
	}
	waited := false
	defer func() {
		cancel()
		_ = out.Close()
		if !waited {
			_ = wait()
		}
	}()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	first := true
	for sc.Scan() {
		if err := w.apply(sc.Bytes(), first); err != nil {
			return err
		}
		first = false
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading ovsdb-client monitor: %w", err)
	}
	waited = true
	if err := wait(); err != nil {
		return err
	}
	return errors.New("ovsdb-client monitor ended")
}

// apply takes one update: rows of name and external_ids, each with its action. initial, insert and new
// rows carry the whole row; old rows only what changed, and are skipped; delete rows name what went. The
// first update replaces everything known.
func (w *Watch) apply(line []byte, first bool) error {
	var t table
	if err := json.Unmarshal(line, &t); err != nil {
		return fmt.Errorf("parsing ovsdb-client monitor output: %w", err)
	}
	cols, err := monitorColumns(t.Headings)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if first || w.rows == nil {
		w.rows = map[string]map[string]string{}
	}
	for _, row := range t.Data {
		if err := w.applyRow(cols, row); err != nil {
			return fmt.Errorf("parsing ovsdb-client monitor output: %w", err)
		}
	}
	w.notify()
	return nil
}

// monitorColumns finds the action, name and external_ids columns.
func monitorColumns(headings []string) ([3]int, error) {
	cols := [3]int{-1, -1, -1}
	for i, h := range headings {
		switch h {
		case "action":
			cols[0] = i
		case "name":
			cols[1] = i
		case "external_ids":
			cols[2] = i
		}
	}
	if slices.Contains(cols[:], -1) {
		return cols, fmt.Errorf("parsing ovsdb-client monitor output: columns action, name and external_ids missing in %v", headings)
	}
	return cols, nil
}

// applyRow takes one row; the caller holds mu.
func (w *Watch) applyRow(cols [3]int, row []json.RawMessage) error {
	if len(row) <= slices.Max(cols[:]) {
		return fmt.Errorf("short row %d", len(row))
	}
	var act, n string
	if err := json.Unmarshal(row[cols[0]], &act); err != nil {
		return fmt.Errorf("action: %w", err)
	}
	if act == "old" {
		return nil
	}
	if err := json.Unmarshal(row[cols[1]], &n); err != nil {
		return fmt.Errorf("interface name: %w", err)
	}
	if act == "delete" {
		delete(w.rows, n)
		return nil
	}
	m, err := parseMap(row[cols[2]])
	if err != nil {
		return fmt.Errorf("external_ids of %s: %w", n, err)
	}
	w.rows[n] = m
	return nil
}

// notify wakes every waiter; the caller holds mu.
func (w *Watch) notify() {
	if w.changed != nil {
		close(w.changed)
	}
	w.changed = make(chan struct{})
}

// WaitInstalled returns when the monitor shows the named interface with ovn-installed=true on a row that
// carries every one of plugged's external_ids (Client.WaitInstalled), or an error wrapping ErrNotInstalled
// when ctx ends first.
func (w *Watch) WaitInstalled(ctx context.Context, name string, plugged map[string]string) error {
	for {
		w.mu.Lock()
		ids, shown := w.rows[name]
		iface := Interface{Name: name, ExternalIDs: ids}
		ok := shown && iface.Installed() && iface.Carries(plugged)
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		changed := w.changed
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interface %s: %w", name, ErrNotInstalled)
		case <-changed:
		}
	}
}
