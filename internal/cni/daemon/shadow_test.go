package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"
)

// Runtimes take the first configuration file of the directory in lexical order (containerd's go-cni sorts
// .conf, .conflist and .json files and loads the first): Raven's name sorts before the usual ones.
func TestConflistNameSortsFirst(t *testing.T) {
	for _, other := range []string{"05-cilium.conflist", "10-calico.conflist", "10-containerd-net.conflist",
		"10-flannel.conflist", "10-kindnet.conflist", "10-ovn-kubernetes.conf", "87-podman-bridge.conflist", "99-loopback.conf"} {
		names := []string{other, ConflistName}
		sort.Strings(names)
		if names[0] != ConflistName {
			t.Errorf("%s sorts before %s: a runtime would use it instead", other, ConflistName)
		}
	}
}

func TestShadowingConfigs(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  []string
	}{
		{name: "Raven's alone wins"},
		{name: "files after Raven's lose", files: []string{"10-containerd-net.conflist", "99-loopback.conf"}},
		{name: "a conflist sorting first wins", files: []string{"00-bench-floor.conflist", "10-calico.conflist"},
			want: []string{"00-bench-floor.conflist"}},
		{name: ".conf and .json files count too", files: []string{"00-a.conf", "00-b.json"}, want: []string{"00-a.conf", "00-b.json"}},
		{name: "other extensions, hidden temporaries and directories do not count",
			files: []string{"00-a.conflist.bak", "00-notes.txt", "00-dir.conflist/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range append([]string{ConflistName}, tt.files...) {
				if strings.HasSuffix(f, "/") {
					if err := os.Mkdir(filepath.Join(dir, f), 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := shadowingConfigs(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("shadowing %q, want %q", got, tt.want)
			}
		})
	}
}

// A configuration that would win over Raven's is a Warning event on the Node, naming the files; none, none.
func TestWarnShadowingConfigs(t *testing.T) {
	tests := []struct {
		name      string
		files     []string
		wantEvent string
	}{
		{name: "nothing sorts first"},
		{name: "another network sorts first", files: []string{"00-bench-floor.conflist"},
			wantEvent: "Warning CNIConfigShadowed " + filepath.Join("DIR", "00-bench-floor.conflist")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range append([]string{ConflistName}, tt.files...) {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rec := record.NewFakeRecorder(5)
			rec.IncludeObject = true
			warnShadowingConfigs(t.Context(), rec, "node-a", dir)
			close(rec.Events)
			var got []string
			for ev := range rec.Events {
				got = append(got, ev)
			}
			if tt.wantEvent == "" {
				if len(got) != 0 {
					t.Errorf("events %q, want none", got)
				}
				return
			}
			want := strings.ReplaceAll(tt.wantEvent, "DIR", dir)
			if len(got) != 1 || !strings.HasPrefix(got[0], "Warning CNIConfigShadowed ") || !strings.Contains(got[0], want[len("Warning CNIConfigShadowed "):]) ||
				!strings.Contains(got[0], ConflistName) || !strings.HasSuffix(got[0], "involvedObject{kind=Node,apiVersion=v1}") {
				t.Errorf("events %q, want one on the Node naming %q and %s", got, want, ConflistName)
			}
		})
	}
}
