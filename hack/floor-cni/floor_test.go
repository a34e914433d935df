package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/raven-net/raven/pkg/annotations"
)

func TestLookup(t *testing.T) {
	dir := t.TempDir()
	ports := filepath.Join(dir, "ports.json")
	b, _ := json.Marshal(map[string]Entry{
		"ns/a":          {Port: annotations.Port{ID: "0123456789abcdef", FixedIPs: []annotations.FixedIP{{SubnetID: "s", IPAddress: "10.1.0.5"}}}, Subnet: annotations.Subnet{ID: "s", CIDR: "10.1.0.0/24"}},
		"ns/no-address": {Port: annotations.Port{ID: "fedcba9876543210"}},
	})
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
		{name: "port without an address", conf: good, args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=no-address", unknown: true},
		{name: "no pod in CNI_ARGS", conf: good, args: "IgnoreUnknown=1", wantErr: "K8S_POD_NAME"},
		{name: "no ports file named", conf: []byte(`{"cniVersion":"1.0.0","name":"floor","type":"floor-cni","ovsDB":"unix:/db.sock","bridge":"br-int"}`), args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a", wantErr: "needs ports"},
		{name: "ports file missing", conf: conf(`{"cniVersion":"1.0.0","name":"floor","type":"floor-cni","ports":"PORTS.gone","ovsDB":"unix:/db.sock","bridge":"br-int"}`), args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a", wantErr: "reading the ports file"},
		{name: "not JSON", conf: []byte(`{`), args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a", wantErr: "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, e, err := lookup(&skel.CmdArgs{StdinData: tc.conf, Args: tc.args})
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
			case e.Port.ID != tc.wantID || e.Subnet.CIDR != "10.1.0.0/24" || c.Bridge != "br-int":
				t.Fatalf("entry %+v, conf %+v; want port %s on subnet 10.1.0.0/24, bridge br-int", e, c, tc.wantID)
			}
		})
	}
}
