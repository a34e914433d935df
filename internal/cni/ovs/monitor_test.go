package ovs

import (
	"testing"
	"testing/synctest"
)

// uninstalled is ovn-controller releasing tapA's port (its logical port deleted): ovn-installed goes.
var uninstalled = monitorLine(row("u2", "old", "", newInstalled...), row("", "new", "tapA", newRow...))

// Snapshot shows each interface as the monitor's last update left it, and its channel closes at the next update.
func TestWatchSnapshot(t *testing.T) {
	tests := []struct {
		name          string
		script        []string
		wantInstalled bool
		wantShown     bool
	}{
		{name: "before any update: nothing"},
		{
			name:      "installed",
			script:    []string{monitorLine(bridgeRow, row("u2", "initial", "tapA", newInstalled...))},
			wantShown: true, wantInstalled: true,
		},
		{
			name:      "ovn-installed removed (the logical port released)",
			script:    []string{monitorLine(bridgeRow, row("u2", "initial", "tapA", newInstalled...)), uninstalled},
			wantShown: true,
		},
		{
			name:   "the interface deleted",
			script: []string{monitorLine(bridgeRow, row("u2", "initial", "tapA", newInstalled...)), monitorLine(row("u2", "delete", "tapA", newInstalled...))},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, s := newScript(t)
				_, changed := w.Snapshot()
				for _, line := range tc.script {
					s.send(line)
				}
				select {
				case <-changed:
					if len(tc.script) == 0 {
						t.Error("the channel closed without an update")
					}
				default:
					if len(tc.script) > 0 {
						t.Error("the channel did not close at the update")
					}
				}
				ifaces, _ := w.Snapshot()
				shown, installed := false, false
				for _, i := range ifaces {
					if i.Name == "tapA" {
						shown, installed = true, i.Installed()
					}
				}
				if shown != tc.wantShown || installed != tc.wantInstalled {
					t.Errorf("tapA shown %v installed %v, want %v %v", shown, installed, tc.wantShown, tc.wantInstalled)
				}
			})
		})
	}
}
