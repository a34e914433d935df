package ovs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

type recorder struct {
	calls   [][]string
	answers map[string][]byte
	err     error
}

func (r *recorder) run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, append([]string{name}, args...))
	for k, v := range r.answers {
		if strings.Contains(strings.Join(args, " "), k) {
			return v, nil
		}
	}
	return nil, r.err
}

const listOutput = `{"data":[["tap7d7cc334-bc",["map",[["attached-mac","fa:16:3e:84:88:2a"],["iface-id","7d7cc334-bcde"],["ovn-installed","true"],["raven-sandbox","abc"]]]],["br-int",["map",[]]],["other",["map",[]]]],"headings":["name","external_ids"]}`

func TestVSCtlCalls(t *testing.T) {
	tests := []struct {
		name string
		do   func(ctx context.Context, v *VSCtl) error
		want []string
	}{
		{
			name: "add-port keeps an existing port and quotes every external id",
			do: func(ctx context.Context, v *VSCtl) error {
				return v.AddPort(ctx, "tapX", 0, map[string]string{"iface-id": "p1", "raven-pod": "ns/a b"})
			},
			want: []string{"ovs-vsctl", "--timeout=10", "--db=unix:/tmp/db.sock", "--no-wait", "--", "--if-exists", "del-port", "br-int", "tapX", "--", "add-port", "br-int", "tapX",
				"--", "set", "Interface", "tapX", `external_ids:iface-id="p1"`, `external_ids:raven-pod="ns/a b"`},
		},
		{
			name: "a nested pod's port is an access port of its VLAN",
			do: func(ctx context.Context, v *VSCtl) error {
				return v.AddPort(ctx, "tapX", 42, map[string]string{"iface-id": "p1"})
			},
			want: []string{"ovs-vsctl", "--timeout=10", "--db=unix:/tmp/db.sock", "--no-wait", "--", "--if-exists", "del-port", "br-int", "tapX", "--", "add-port", "br-int", "tapX", "tag=42",
				"--", "set", "Interface", "tapX", `external_ids:iface-id="p1"`},
		},
		{
			name: "del-port is idempotent",
			do:   func(ctx context.Context, v *VSCtl) error { return v.DelPort(ctx, "tapX") },
			want: []string{"ovs-vsctl", "--timeout=10", "--db=unix:/tmp/db.sock", "--if-exists", "del-port", "br-int", "tapX"},
		},
		{
			name: "wait-until waits for ovn-installed",
			do:   func(ctx context.Context, v *VSCtl) error { return v.WaitInstalled(ctx, "tapX", nil) },
			want: []string{"ovs-vsctl", "--timeout=10", "--db=unix:/tmp/db.sock", "wait-until", "Interface", "tapX", "external_ids:ovn-installed=true"},
		},
		{
			name: "wait-until waits for ovn-installed on the row of the plug",
			do: func(ctx context.Context, v *VSCtl) error {
				return v.WaitInstalled(ctx, "tapX", map[string]string{"raven-plug": "p1", "iface-id": "a b"})
			},
			want: []string{"ovs-vsctl", "--timeout=10", "--db=unix:/tmp/db.sock", "wait-until", "Interface", "tapX", "external_ids:ovn-installed=true",
				`external_ids:iface-id="a b"`, `external_ids:raven-plug="p1"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			v := &VSCtl{DB: "unix:/tmp/db.sock", Bridge: "br-int", Run: r.run}
			if err := tt.do(t.Context(), v); err != nil {
				t.Fatal(err)
			}
			if len(r.calls) != 1 || !reflect.DeepEqual(r.calls[0], tt.want) {
				t.Errorf("calls = %q, want one call %q", r.calls, tt.want)
			}
		})
	}
}

func TestInterfacesKeepsOnlyTheBridgesInterfaces(t *testing.T) {
	r := &recorder{answers: map[string][]byte{
		"list-ifaces":    []byte("tap7d7cc334-bc\n"),
		"list Interface": []byte(listOutput),
	}}
	v := &VSCtl{Bridge: "br-int", Run: r.run}
	got, err := v.Interfaces(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "tap7d7cc334-bc" || got[0].ExternalIDs["raven-sandbox"] != "abc" || !got[0].Installed() {
		t.Errorf("Interfaces = %+v", got)
	}
}

func TestParseInterfaces(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr bool
	}{
		{name: "rows with maps", in: listOutput, want: 3},
		{name: "columns in another order", in: `{"data":[[["map",[["a","b"]]],"x"]],"headings":["external_ids","name"]}`, want: 1},
		{name: "no rows", in: `{"data":[],"headings":["name","external_ids"]}`, want: 0},
		{name: "missing column", in: `{"data":[],"headings":["name"]}`, wantErr: true},
		{name: "not a map", in: `{"data":[["x",["set",[]]]],"headings":["name","external_ids"]}`, wantErr: true},
		{name: "not JSON", in: `name : x`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseInterfaces([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(got) != tt.want {
				t.Errorf("got %d interfaces, want %d", len(got), tt.want)
			}
		})
	}
}

// Health is STATUS's check, what an ADD needs of Open vSwitch: the database answers and has the bridge. The
// daemons' control sockets are not among it (their run directories differ between packagings).
func TestHealth(t *testing.T) {
	dir := t.TempDir() // no control socket in it
	tests := []struct {
		name    string
		err     error
		wantErr string
	}{
		{name: "the database answers"},
		{name: "the database does not answer", err: errors.New("unix:/x: database connection failed"), wantErr: "database does not answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{err: tt.err}
			v := &VSCtl{Bridge: "br-int", OVSRunDir: dir, OVNRunDir: dir, Run: r.run}
			err := v.Health(t.Context())
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Health = %v, want error containing %q", err, tt.wantErr)
			}
			for _, c := range r.calls {
				if c[0] == "ovs-appctl" {
					t.Errorf("Health called %q", c)
				}
			}
		})
	}
}

// Daemons is /healthz's further check: ovs-vswitchd and ovn-controller answer on their control sockets.
func TestDaemons(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ovn-controller.pid"), []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		rundir  string
		ctl     bool
		err     error
		wantErr string
	}{
		{name: "no run directory is given", rundir: ""},
		{name: "ovn-controller answers on its pid-named socket", rundir: dir, ctl: true},
		{name: "ovn-controller's socket is missing", rundir: dir, wantErr: "ovn-controller is not running"},
		{name: "ovn-controller does not answer", rundir: dir, ctl: true, err: errors.New("connection refused"), wantErr: "ovn-controller does not answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctl := filepath.Join(dir, "ovn-controller.42.ctl")
			_ = os.Remove(ctl)
			if tt.ctl {
				if err := os.WriteFile(ctl, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := &recorder{err: tt.err}
			v := &VSCtl{Bridge: "br-int", OVNRunDir: tt.rundir, Run: r.run}
			err := v.Daemons(t.Context())
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Daemons = %v, want error containing %q", err, tt.wantErr)
			}
			if tt.ctl {
				last := r.calls[len(r.calls)-1]
				if want := []string{"ovs-appctl", "-t", ctl, "version"}; !reflect.DeepEqual(last, want) {
					t.Errorf("last call %q, want %q", last, want)
				}
			}
		})
	}
}

// A burst of calls never runs more than MaxProcs ovs-vsctl processes at once (100 at once got raven-node
// killed by its memory limit), and a call whose context ends while it waits for a turn fails without running.
func TestVSCtlBoundsProcesses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxProcs int
		want     int
	}{
		{name: "the default", maxProcs: 0, want: DefaultMaxProcs},
		{name: "configured", maxProcs: 3, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			running, peak := 0, 0
			gate := make(chan struct{})
			v := &VSCtl{Bridge: "br-int", MaxProcs: tc.maxProcs, Run: func(context.Context, string, ...string) ([]byte, error) {
				mu.Lock()
				running++
				peak = max(peak, running)
				mu.Unlock()
				<-gate
				mu.Lock()
				running--
				mu.Unlock()
				return nil, nil
			}}
			var wg sync.WaitGroup
			for i := range 40 {
				wg.Go(func() { _ = v.DelPort(context.Background(), fmt.Sprintf("tap%d", i)) })
			}
			// Every slot taken: a call with an ended context gets no turn.
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				r := running
				mu.Unlock()
				if r == tc.want || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			late := make(chan error, 1)
			go func() { late <- v.DelPort(ctx, "late") }()
			select {
			case err := <-late:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("a call whose context ended while waiting: err = %v, want context.Canceled", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("a call whose context had ended still waited to run")
			}
			close(gate)
			wg.Wait()
			if peak != tc.want {
				t.Errorf("at most %d ovs-vsctl at once, want %d", peak, tc.want)
			}
		})
	}
}
