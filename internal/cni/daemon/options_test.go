package daemon

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/server"
)

// The kernel-VLAN path's flags: --vlan-uplink needs --nested, names an interface, and plugs into no Open
// vSwitch, so the flags of plugging into one are refused beside it rather than ignored.
func TestValidateVLANUplink(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr []string // what the error says; none means valid
	}{
		{name: "a nested node on its NIC", args: []string{"--nested", "--vlan-uplink=eth0"}},
		{name: "a nested node on its bridge, as before", args: []string{"--nested", "--bridge=br-vm", "--ovs-db=unix:/run/openvswitch/db.sock"}},
		{name: "without --nested", args: []string{"--vlan-uplink=eth0"}, wantErr: []string{"--vlan-uplink is the kernel-VLAN path of nested nodes: it needs --nested"}},
		{name: "with a bridge", args: []string{"--nested", "--vlan-uplink=eth0", "--bridge=br-int"},
			wantErr: []string{"--vlan-uplink plugs pods as kernel VLAN links, without Open vSwitch: remove --bridge, or remove --vlan-uplink"}},
		{name: "with every flag of Open vSwitch", args: []string{"--nested", "--vlan-uplink=eth0", "--ovs-db=unix:/x", "--ovs-rundir=/run/openvswitch",
			"--ovn-rundir=/run/ovn", "--datapath-netns=/run/netns/ovs"},
			wantErr: []string{"remove --datapath-netns, --ovn-rundir, --ovs-db, --ovs-rundir,", "--nested and --ovn-rundir"}},
		{name: "a name no interface can have", args: []string{"--nested", "--vlan-uplink=eth0/1"}, wantErr: []string{`--vlan-uplink="eth0/1" is not an interface name`}},
		{name: "a name too long", args: []string{"--nested", "--vlan-uplink=enp0s31f6abcdefgh"}, wantErr: []string{"is not an interface name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("raven-node", flag.ContinueOnError)
			o := BindFlags(fs)
			if err := fs.Parse(append([]string{"--node-name=vm-1"}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			for _, want := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Validate = %v, want an error saying %q", err, want)
				}
			}
		})
	}
}

// --vlan-uplink wires the server to the VLAN plumber of that NIC, with no OVS client, no OVS monitor, the
// uplink's health, and the sweep of links a killed ADD left.
func TestNewDatapath(t *testing.T) {
	dp := newDatapath(t.Context(), &Options{Nested: true, VLANUplink: "eth0"})
	if dp.ovs != nil || dp.monitor != nil {
		t.Errorf("the kernel-VLAN path has OVS %v and monitor %v, want none", dp.ovs, dp.monitor)
	}
	if p, ok := dp.plumber.(server.VLAN); !ok || p.Uplink != "eth0" {
		t.Errorf("plumber %#v, want the VLAN plumber of eth0", dp.plumber)
	}
	if dp.health == nil || dp.sweep == nil {
		t.Error("the kernel-VLAN path has no health check or no sweep")
	}
}

// On the bridge, STATUS asks what an ADD needs (the database answers and has the bridge), so that a node is not
// NotReady for an ovn-controller whose control socket is elsewhere; /healthz (raven-node's readiness) asks the
// daemons too.
func TestNewDatapathOnTheBridge(t *testing.T) {
	dir := t.TempDir() // neither daemon's socket is in it
	dp := newDatapath(t.Context(), &Options{Bridge: "br-int", OVSRunDir: dir, OVNRunDir: dir})
	v, ok := dp.ovs.(*ovs.VSCtl)
	if !ok {
		t.Fatalf("OVS client %T, want *ovs.VSCtl", dp.ovs)
	}
	v.Run = func(context.Context, string, ...string) ([]byte, error) { return nil, nil } // the database answers
	if err := dp.status(t.Context()); err != nil {
		t.Errorf("STATUS's check = %v, want nil: an ADD can be served", err)
	}
	if err := dp.health(t.Context()); err == nil || !strings.Contains(err.Error(), "is not running") {
		t.Errorf("/healthz's check = %v, want the daemons not running", err)
	}
}
