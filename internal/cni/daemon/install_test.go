package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "built-raven-cni")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	bin, conf := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d")
	for range 2 { // a restart installs over the former files
		if err := Install(plugin, bin, conf, "/run/raven/cni.sock", ""); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(filepath.Join(bin, "raven-cni"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("installed plugin: %v %v", st, err)
	}
	list, err := libcni.ConfListFromFile(filepath.Join(conf, ConflistName))
	if err != nil {
		t.Fatalf("the conflist does not load with libcni: %v", err)
	}
	if list.Name != "raven" || list.CNIVersion != "1.1.0" || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "raven-cni" {
		t.Errorf("conflist %s", list.Bytes)
	}
	var p struct{ Socket string }
	if err := json.Unmarshal(list.Plugins[0].Bytes, &p); err != nil || p.Socket != "/run/raven/cni.sock" {
		t.Errorf("plugin entry %s", list.Plugins[0].Bytes)
	}
	entries, _ := os.ReadDir(conf)
	if len(entries) != 1 {
		t.Errorf("conf dir holds %d files, want only the conflist", len(entries))
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(o *Options)
		wantErr bool
	}{
		{name: "defaults are valid", edit: func(*Options) {}},
		{name: "no node name", edit: func(o *Options) { o.NodeName = "" }, wantErr: true},
		{name: "install without directories", edit: func(o *Options) { o.InstallPlugin = "/x"; o.CNIBinDir = "" }, wantErr: true},
		{name: "a zero ready timeout", edit: func(o *Options) { o.ReadyTimeout = 0 }, wantErr: true},
		{name: "a nested node", edit: func(o *Options) { o.Nested = true; o.Bridge = "br-vm" }},
		{name: "a nested node with ovn-controller", edit: func(o *Options) { o.Nested = true; o.OVNRunDir = "/run/ovn" }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &Options{NodeName: "n", Socket: "/s", Bridge: "br-int", ReadyTimeout: 1, CNIBinDir: "/b", CNIConfDir: "/c"}
			tt.edit(o)
			if err := o.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestInstallAGivenConflist(t *testing.T) {
	tests := []struct {
		name    string
		list    string
		wantErr string
	}{
		{name: "raven-cni chained with another plugin", list: `{"cniVersion":"1.1.0","name":"raven","plugins":[{"type":"raven-cni","socket":"/run/raven/cni.sock"},{"type":"bandwidth"}]}`},
		{name: "the default socket when none is named", list: `{"cniVersion":"1.1.0","name":"raven","plugins":[{"type":"raven-cni"}]}`},
		{name: "another socket", list: `{"cniVersion":"1.1.0","name":"raven","plugins":[{"type":"raven-cni","socket":"/x.sock"}]}`, wantErr: "raven-node listens on"},
		{name: "no raven-cni", list: `{"cniVersion":"1.1.0","name":"raven","plugins":[{"type":"bridge"}]}`, wantErr: "has no raven-cni plugin"},
		{name: "not a conflist", list: `{`, wantErr: "conflist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			plugin, given := filepath.Join(dir, "p"), filepath.Join(dir, "given.conflist")
			_ = os.WriteFile(plugin, []byte("x"), 0o700)
			_ = os.WriteFile(given, []byte(tt.list), 0o600)
			err := Install(plugin, filepath.Join(dir, "bin"), filepath.Join(dir, "net.d"), "/run/raven/cni.sock", given)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Install = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "net.d", ConflistName)); string(b) != tt.list {
				t.Errorf("installed %s", b)
			}
		})
	}
}

// An upgrade from the release that installed 10-raven.conflist removes that file when it is Raven's, and only then.
func TestInstallRemovesTheFormerConflist(t *testing.T) {
	tests := []struct {
		name     string
		former   string
		wantKept bool
	}{
		{name: "Raven's former conflist goes",
			former: `{"cniVersion":"1.1.0","name":"raven","plugins":[{"type":"raven-cni","socket":"/run/raven/cni.sock"}]}`},
		{name: "another network's file of that name stays", wantKept: true,
			former: `{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"bridge"}]}`},
		{name: "a file that is no conflist stays", former: `{`, wantKept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			plugin, conf := filepath.Join(dir, "p"), filepath.Join(dir, "net.d")
			if err := os.WriteFile(plugin, []byte("#!/bin/sh\n"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(conf, 0o755); err != nil {
				t.Fatal(err)
			}
			former := filepath.Join(conf, "10-raven.conflist")
			if err := os.WriteFile(former, []byte(tt.former), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := Install(plugin, filepath.Join(dir, "bin"), conf, "/run/raven/cni.sock", ""); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(former)
			if kept := err == nil; kept != tt.wantKept {
				t.Errorf("10-raven.conflist kept %v, want %v", kept, tt.wantKept)
			}
			if _, err := os.Stat(filepath.Join(conf, ConflistName)); err != nil {
				t.Errorf("%s not installed: %v", ConflistName, err)
			}
		})
	}
}
