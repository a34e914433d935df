package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sandbox is what the stand-in made for one pod, kept as a file in the state directory. The files are
// also the list of namespaces that are the stand-in's: it never touches a namespace without one.
type sandbox struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Netns is the namespace's name under /var/run/netns: <namespace>_<name>.
	Netns string `json:"netns"`
	// ID is the sandbox ID of the last ADD, empty before the first.
	ID     string `json:"id,omitempty"`
	IfName string `json:"ifname"`
	// Ready is set once ADD succeeded.
	Ready bool   `json:"ready,omitempty"`
	IP    string `json:"ip,omitempty"`
	// PID is the pod's server process, 0 when none runs.
	PID int `json:"pid,omitempty"`
}

// netnsName is <namespace>_<name>: neither part can hold an underscore, so it is unambiguous.
func netnsName(namespace, name string) string { return namespace + "_" + name }

// store keeps sandboxes as <netns>.json in dir.
type store struct{ dir string }

func (s store) path(netns string) string { return filepath.Join(s.dir, netns+".json") }

func (s store) load(netns string) (*sandbox, error) {
	b, err := os.ReadFile(s.path(netns))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var sb sandbox
	if err := json.Unmarshal(b, &sb); err != nil {
		return nil, fmt.Errorf("reading sandbox state %s: %w", s.path(netns), err)
	}
	return &sb, nil
}

func (s store) save(sb *sandbox) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(sb)
	if err != nil {
		return err
	}
	tmp := s.path(sb.Netns) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path(sb.Netns))
}

func (s store) remove(netns string) error {
	if err := os.Remove(s.path(netns)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	_ = os.Remove(filepath.Join(s.dir, netns+".log"))
	return nil
}

func (s store) list() ([]*sandbox, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*sandbox
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		sb, err := s.load(name)
		if err != nil {
			return nil, err
		}
		if sb != nil {
			out = append(out, sb)
		}
	}
	return out, nil
}
