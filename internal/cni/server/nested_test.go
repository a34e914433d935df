package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raven-net/raven/pkg/annotations"
)

// nestedPort makes testPod's port a subport of a trunk for node, on vlan, unbound as Raven leaves it.
func nestedPort(node string, vlan int) portOpts {
	return func(p *annotations.Port, _ *annotations.Subnet) {
		p.HostID = ""
		p.Nested = &annotations.Nested{Node: node, VLAN: vlan, TrunkID: "trunk-1", ParentPortID: "vmport"}
	}
}

// On a nested node, a pod's port is plugged as an access port of its subport's VLAN, and the ADD ends when
// the gateway answers ARP, with no ovn-controller in the VM; the ports that do not fit the node fail with a
// Warning event a person can act on.
func TestAddNested(t *testing.T) {
	tests := []struct {
		name        string
		nestedNode  bool
		opts        portOpts
		gatewayDown bool
		wantTag     int
		wantErr     string
		wantEvent   string
	}{
		{name: "a subport is plugged on its VLAN", nestedNode: true, opts: nestedPort(testNode, 42), wantTag: 42},
		{name: "a subport on a node whose raven-node is not nested", opts: nestedPort(testNode, 42),
			wantErr: "was not started with --nested", wantEvent: ReasonNotNested},
		{name: "a chassis port on a nested node", nestedNode: true, opts: annotated,
			wantErr: "raven-node runs with --nested", wantEvent: ReasonNotNested},
		{name: "a subport of another node's trunk", nestedNode: true, opts: nestedPort("vm-2", 42),
			wantErr: "vm-2", wantEvent: ReasonPortBoundElsewhere},
		{name: "a VLAN out of range", nestedNode: true, opts: nestedPort(testNode, 4095),
			wantErr: "outside 1-4094", wantEvent: ReasonNotNested},
		{name: "a gateway that does not answer", nestedNode: true, opts: nestedPort(testNode, 42), gatewayDown: true,
			wantErr: "did not answer ARP", wantEvent: ReasonNetworkNotReady},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2*time.Second, testPod(t, tc.opts))
			e.srv.cfg.Nested = tc.nestedNode
			e.ovs.NoOVNController = true // inside a VM nothing sets ovn-installed
			if tc.gatewayDown {
				e.plumber.gatewayErr = errors.New("no answer")
			}
			resp := e.srv.Handle(t.Context(), request("ADD", "sandbox-1"))
			if tc.wantErr == "" {
				if resp.Error != nil {
					t.Fatalf("ADD failed: %+v", resp.Error)
				}
				if got := e.ovs.TagOf(HostIfName(testPort)); got != tc.wantTag {
					t.Fatalf("the port's tag is %d, want %d", got, tc.wantTag)
				}
				return
			}
			if resp.Error == nil || !strings.Contains(resp.Error.Msg+resp.Error.Details, tc.wantErr) {
				t.Fatalf("ADD answered %+v, want an error saying %q", resp.Error, tc.wantErr)
			}
			if ev := strings.Join(e.events(), "\n"); !strings.Contains(ev, tc.wantEvent) {
				t.Errorf("events %q, want a %s Warning", ev, tc.wantEvent)
			}
			if links := e.plumber.hostLinks(); len(links) != 0 {
				t.Errorf("a failed ADD left %v", links)
			}
		})
	}
}
