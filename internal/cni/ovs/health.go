package ovs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Health implements Client: the database answers and has the bridge, what every ADD writes to. The daemons'
// control sockets are Daemons' business: their run directories differ between packagings, and a check at the
// wrong path must not make the node NotReady.
func (v *VSCtl) Health(ctx context.Context) error {
	if _, err := v.vsctl(ctx, "br-exists", v.Bridge); err != nil {
		if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) && exitErr.ExitCode() == 2 {
			return fmt.Errorf("bridge %s does not exist in the Open vSwitch database", v.Bridge)
		}
		return fmt.Errorf("the Open vSwitch database does not answer: %w", err)
	}
	return nil
}

// Daemons says whether ovs-vswitchd and ovn-controller answer on their control sockets, for each whose run
// directory is known (OVSRunDir, OVNRunDir).
func (v *VSCtl) Daemons(ctx context.Context) error {
	for _, d := range []struct{ dir, daemon string }{{v.OVSRunDir, "ovs-vswitchd"}, {v.OVNRunDir, "ovn-controller"}} {
		if d.dir == "" {
			continue
		}
		if err := v.appctlVersion(ctx, d.dir, d.daemon); err != nil {
			return err
		}
	}
	return nil
}

func (v *VSCtl) appctlVersion(ctx context.Context, dir, daemon string) error {
	ctl, err := ControlSocket(dir, daemon)
	if err != nil {
		return fmt.Errorf("%s is not running: %w", daemon, err)
	}
	run := v.Run
	if run == nil {
		run = ExecRunner
	}
	if _, err := run(ctx, "ovs-appctl", "-t", ctl, "version"); err != nil {
		return fmt.Errorf("%s does not answer on %s: %w", daemon, ctl, err)
	}
	return nil
}

// ControlSocket finds a daemon's unixctl socket in dir: <daemon>.ctl when it was started with
// --unixctl, otherwise <daemon>.<pid>.ctl with the pid from <daemon>.pid (ovn-controller's only form).
func ControlSocket(dir, daemon string) (string, error) {
	plain := filepath.Join(dir, daemon+".ctl")
	if _, err := os.Stat(plain); err == nil {
		return plain, nil
	}
	pidfile := filepath.Join(dir, daemon+".pid")
	b, err := os.ReadFile(pidfile)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("neither %s nor %s exists", plain, pidfile)
	}
	if err != nil {
		return "", err
	}
	ctl := filepath.Join(dir, fmt.Sprintf("%s.%s.ctl", daemon, strings.TrimSpace(string(b))))
	if _, err := os.Stat(ctl); err != nil {
		return "", fmt.Errorf("pidfile %s names a process without control socket: %w", pidfile, err)
	}
	return ctl, nil
}
