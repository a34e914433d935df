package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
)

func TestLookup(t *testing.T) {
	dir := t.TempDir()
	ports := filepath.Join(dir, "ports.json")
	b, _ := json.Marshal(map[string]Port{"ns/a": {ID: "0123456789abcdef", MAC: "fa:16:3e:00:00:01", Address: "10.1.0.5/24", Gateway: "10.1.0.1"}})
	if err := os.WriteFile(ports, b, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := func(c string) []byte { return []byte(strings.ReplaceAll(c, "PORTS", ports)) }
	good := conf(`{"cniVersion":"1.0.0","name":"floor","type":"floor-cni","ports":"PORTS","ovsDB":"unix:/db.sock","bridge":"br-int"}`)
	for _, tc := range []struct {
		name, args string
		conf       []byte
		wantID     string
		wantErr    string
		unknown    bool
	}{
		{name: "known pod", conf: good, args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a", wantID: "0123456789abcdef"},
		{name: "pod without a port", conf: good, args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=b", unknown: true},
		{name: "no pod in CNI_ARGS", conf: good, args: "IgnoreUnknown=1", wantErr: "K8S_POD_NAME"},
		{name: "no ports file named", conf: []byte(`{"cniVersion":"1.0.0","name":"floor","type":"floor-cni","ovsDB":"unix:/db.sock","bridge":"br-int"}`), args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a", wantErr: "needs ports"},
		{name: "ports file missing", conf: conf(`{"cniVersion":"1.0.0","name":"floor","type":"floor-cni","ports":"PORTS.gone","ovsDB":"unix:/db.sock","bridge":"br-int"}`), args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a", wantErr: "reading the ports file"},
		{name: "not JSON", conf: []byte(`{`), args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a", wantErr: "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, p, err := lookup(&skel.CmdArgs{StdinData: tc.conf, Args: tc.args})
			switch {
			case tc.unknown:
				if !errors.Is(err, errUnknownPod) {
					t.Fatalf("err = %v, want errUnknownPod", err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case p.ID != tc.wantID || c.MTU != 1442:
				t.Fatalf("port %+v, MTU %d; want port %s, MTU 1442", p, c.MTU, tc.wantID)
			}
		})
	}
}

func TestSpec(t *testing.T) {
	args := &skel.CmdArgs{Netns: "/run/netns/x", IfName: "eth0"}
	c := &Conf{MTU: 1400}
	ok := Port{ID: "0123456789abcdef", MAC: "fa:16:3e:00:00:01", Address: "10.1.0.5/24", Gateway: "10.1.0.1"}
	for _, tc := range []struct {
		name    string
		port    func(Port) Port
		wantErr string
	}{
		{name: "good", port: func(p Port) Port { return p }},
		{name: "bad MAC", port: func(p Port) Port { p.MAC = "x"; return p }, wantErr: "MAC"},
		{name: "address without prefix", port: func(p Port) Port { p.Address = "10.1.0.5"; return p }, wantErr: "address"},
		{name: "bad gateway", port: func(p Port) Port { p.Gateway = "gw"; return p }, wantErr: "gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := spec(args, c, tc.port(ok))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.HostIfName != "tap0123456789a" || s.MTU != 1400 || s.Address.String() != "10.1.0.5/24" ||
				s.Routes[0].GW.String() != "10.1.0.1" || s.Routes[0].Dst.String() != "0.0.0.0/0" || s.Netns != args.Netns {
				t.Fatalf("spec %+v", s)
			}
		})
	}
}
