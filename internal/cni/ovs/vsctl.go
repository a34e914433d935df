package ovs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Runner runs one command and returns its standard output; VSCtl's seam for tests.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// ExecRunner runs the command with os/exec; stderr is part of the error.
func ExecRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// VSCtl is the Client over ovs-vsctl (and ovs-appctl for Daemons).
type VSCtl struct {
	// DB is passed as --db= to every ovs-vsctl call; empty means ovs-vsctl's default.
	DB string
	// Bridge is the integration bridge, br-int.
	Bridge string
	// OVSRunDir, when set, is where Daemons finds ovs-vswitchd's control socket.
	OVSRunDir string
	// OVNRunDir, when set, is where Daemons finds ovn-controller's control socket.
	OVNRunDir string
	// Timeout bounds each call that has no deadline of its own.
	Timeout time.Duration
	// Run runs the commands; ExecRunner when nil.
	Run Runner
	// Watch, when set and running, is what WaitInstalled waits on; without it, each wait is an ovs-vsctl
	// wait-until of its own.
	Watch *Watch
	// MaxProcs bounds the ovs-vsctl processes running at once (DefaultMaxProcs when 0); the others wait
	// their turn. Each is a few MiB of memory in raven-node's container: a burst of 100 pods plugged or
	// unplugged at once ran 100 of them and got raven-node killed by its memory limit.
	MaxProcs int

	semOnce sync.Once
	sem     chan struct{}
}

// DefaultMaxProcs is VSCtl's bound on concurrent ovs-vsctl processes when MaxProcs is 0: ovsdb-server
// serves one transaction at a time, so more would only wait there.
const DefaultMaxProcs = 8

// acquire takes a process slot, or fails when ctx ends first; release gives it back.
func (v *VSCtl) acquire(ctx context.Context) (release func(), err error) {
	v.semOnce.Do(func() {
		n := v.MaxProcs
		if n <= 0 {
			n = DefaultMaxProcs
		}
		v.sem = make(chan struct{}, n)
	})
	select {
	case v.sem <- struct{}{}:
		return func() { <-v.sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a turn to run ovs-vsctl: %w", ctx.Err())
	}
}

var _ Client = (*VSCtl)(nil)

func (v *VSCtl) vsctl(ctx context.Context, args ...string) ([]byte, error) {
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	secs := max(1, int(math.Ceil(timeout.Seconds())))
	full := []string{fmt.Sprintf("--timeout=%d", secs)}
	if v.DB != "" {
		full = append(full, "--db="+v.DB)
	}
	full = append(full, args...)
	run := v.Run
	if run == nil {
		run = ExecRunner
	}
	release, err := v.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	klog.FromContext(ctx).V(5).Info("ovs-vsctl", "args", full)
	return run(ctx, "ovs-vsctl", full...)
}

// AddPort implements Client. A port of that name is replaced, in the same transaction, so that the Interface
// row is always new: no ovn-installed of a former plug stays on it. It does not wait for ovs-vswitchd to
// apply the change (--no-wait): the caller waits for ovn-installed, which ovn-controller sets only once the
// interface is in the datapath with its flows. Waiting for each reconfiguration as well serialised a burst
// of plugs behind ovs-vswitchd.
func (v *VSCtl) AddPort(ctx context.Context, name string, tag int, externalIDs map[string]string) error {
	args := []string{"--no-wait", "--", "--if-exists", "del-port", v.Bridge, name, "--", "add-port", v.Bridge, name}
	if tag > 0 {
		args = append(args, fmt.Sprintf("tag=%d", tag))
	}
	args = append(args, "--", "set", "Interface", name)
	for _, k := range slices.Sorted(maps.Keys(externalIDs)) {
		args = append(args, fmt.Sprintf("external_ids:%s=%s", k, quote(externalIDs[k])))
	}
	if _, err := v.vsctl(ctx, args...); err != nil {
		return fmt.Errorf("adding port %s to bridge %s: %w", name, v.Bridge, err)
	}
	return nil
}

// DelPort implements Client.
func (v *VSCtl) DelPort(ctx context.Context, name string) error {
	if _, err := v.vsctl(ctx, "--if-exists", "del-port", v.Bridge, name); err != nil {
		return fmt.Errorf("deleting port %s from bridge %s: %w", name, v.Bridge, err)
	}
	return nil
}

// Interface implements Client.
func (v *VSCtl) Interface(ctx context.Context, name string) (Interface, bool, error) {
	out, err := v.vsctl(ctx, "--format=json", "--data=json", "--columns=name,external_ids",
		"find", "Interface", "name="+quote(name))
	if err != nil {
		return Interface{}, false, fmt.Errorf("reading interface %s: %w", name, err)
	}
	ifaces, err := parseInterfaces(out)
	if err != nil {
		return Interface{}, false, fmt.Errorf("reading interface %s: %w", name, err)
	}
	if len(ifaces) == 0 {
		return Interface{}, false, nil
	}
	return ifaces[0], true, nil
}

// Interfaces implements Client.
func (v *VSCtl) Interfaces(ctx context.Context) ([]Interface, error) {
	names, err := v.vsctl(ctx, "list-ifaces", v.Bridge)
	if err != nil {
		return nil, fmt.Errorf("listing the interfaces of bridge %s: %w", v.Bridge, err)
	}
	onBridge := map[string]bool{}
	for _, n := range strings.Fields(string(names)) {
		onBridge[n] = true
	}
	out, err := v.vsctl(ctx, "--format=json", "--data=json", "--columns=name,external_ids", "list", "Interface")
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	all, err := parseInterfaces(out)
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	return slices.DeleteFunc(all, func(i Interface) bool { return !onBridge[i.Name] }), nil
}

// WaitInstalled implements Client: through Watch when there is one, else with an ovs-vsctl wait-until, which
// blocks on the database until the interface exists with the key and plugged's external_ids: no polling
// either way.
func (v *VSCtl) WaitInstalled(ctx context.Context, name string, plugged map[string]string) error {
	if v.Watch != nil {
		return v.Watch.WaitInstalled(ctx, name, plugged)
	}
	args := []string{"wait-until", "Interface", name, KeyOVNInstalledCondition}
	for _, k := range slices.Sorted(maps.Keys(plugged)) {
		args = append(args, fmt.Sprintf("external_ids:%s=%s", k, quote(plugged[k])))
	}
	_, err := v.vsctl(ctx, args...)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil || isTimeout(err) {
		return fmt.Errorf("interface %s: %w", name, ErrNotInstalled)
	}
	return fmt.Errorf("waiting for ovn-installed on interface %s: %w", name, err)
}

// KeyOVNInstalledCondition is the wait-until condition of WaitInstalled.
const KeyOVNInstalledCondition = "external_ids:" + KeyOVNInstalled + "=true"

// isTimeout recognises ovs-vsctl's own --timeout (it exits on SIGALRM) and a killed process.
func isTimeout(err error) bool {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return !exitErr.Exited() || strings.Contains(err.Error(), "timeout")
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// quote renders s as an OVSDB string atom, so that any value (a netns path, a pod name) is taken as is.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
