package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/server"
	"github.com/raven-net/raven/internal/cni/wire"
	"github.com/raven-net/raven/pkg/annotations"
)

// Conf is the plugin's entry in the conflist.
type Conf struct {
	types.PluginConf
	// Ports is the file of Entries, by namespace/name.
	Ports string `json:"ports"`
	// OVSDB is the node's Open vSwitch database (unix:PATH); Bridge its integration bridge.
	OVSDB  string `json:"ovsDB"`
	Bridge string `json:"bridge"`
	// DatapathNetns is the path of the network namespace the node's Open vSwitch runs in, which gets the host
	// ends (raven-node's --datapath-netns); empty: the plugin's own.
	DatapathNetns string `json:"datapathNetns"`
}

// Entry is one pod's port, bound in advance, and its subnet: what Raven would annotate the pod with.
type Entry struct {
	Port   annotations.Port   `json:"port"`
	Subnet annotations.Subnet `json:"subnet"`
}

// timeout bounds one verb.
const timeout = 2 * time.Minute

func funcs(ctx context.Context, out io.Writer) skel.CNIFuncs {
	if out == nil {
		out = os.Stdout
	}
	return skel.CNIFuncs{
		Add: func(a *skel.CmdArgs) error {
			c, e, err := lookup(a)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res, err := add(ctx, &ovs.VSCtl{DB: c.OVSDB, Bridge: c.Bridge}, a, c, e)
			if err != nil {
				return err
			}
			return res.PrintTo(out)
		},
		Del: func(a *skel.CmdArgs) error {
			c, e, err := lookup(a)
			if errors.Is(err, errUnknownPod) {
				return nil // nothing of ours
			}
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return del(ctx, &ovs.VSCtl{DB: c.OVSDB, Bridge: c.Bridge}, a, c, e)
		},
		Check:  func(*skel.CmdArgs) error { return nil },
		Status: func(*skel.CmdArgs) error { return nil },
		GC:     func(*skel.CmdArgs) error { return nil },
	}
}

var errUnknownPod = errors.New("no port bound in advance for this pod")

func parseConf(stdin []byte) (*Conf, error) {
	c := &Conf{}
	if err := json.Unmarshal(stdin, c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "floor-cni: the configuration is not JSON", err.Error())
	}
	if c.Ports == "" || c.OVSDB == "" || c.Bridge == "" {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "floor-cni: the configuration needs ports, ovsDB and bridge", "")
	}
	return c, nil
}

// lookup finds the invocation's pod in the ports file.
func lookup(a *skel.CmdArgs) (*Conf, Entry, error) {
	c, err := parseConf(a.StdinData)
	if err != nil {
		return nil, Entry{}, err
	}
	pod, err := wire.ParsePod(a.Args)
	if err != nil {
		return nil, Entry{}, types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	b, err := os.ReadFile(c.Ports)
	if err != nil {
		return nil, Entry{}, types.NewError(types.ErrIOFailure, "floor-cni: reading the ports file", err.Error())
	}
	var entries map[string]Entry
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, Entry{}, types.NewError(types.ErrDecodingFailure, "floor-cni: the ports file is not JSON", err.Error())
	}
	e, ok := entries[pod.String()]
	if !ok || len(e.Port.FixedIPs) == 0 {
		return c, Entry{}, fmt.Errorf("pod %s: %w", pod, errUnknownPod)
	}
	return c, e, nil
}

// add plugs the port as raven-node does (the same spec and the same result, from the same code) and waits
// until it is ready, as raven-node does before it answers (see ready).
func add(ctx context.Context, vs ovs.Client, a *skel.CmdArgs, c *Conf, e Entry) (types.Result, error) {
	s, err := server.BuildSpec(e.Port, e.Subnet, a.Netns, a.IfName)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	s.HostNetns = c.DatapathNetns
	res, err := plug.Setup(s)
	if err != nil {
		return nil, fmt.Errorf("plugging port %s: %w", e.Port.ID, err)
	}
	ids := map[string]string{ovs.KeyIfaceID: e.Port.ID, ovs.KeyAttachedMAC: s.MAC.String(), ovs.KeyIfaceStatus: "active"}
	if err := vs.AddPort(ctx, s.HostIfName, vlanOf(e.Port), ids); err != nil {
		return nil, fmt.Errorf("adding %s to the bridge: %w", s.HostIfName, err)
	}
	if err := ready(ctx, vs, s, e.Port); err != nil {
		return nil, fmt.Errorf("port %s: %w", e.Port.ID, err)
	}
	raw, err := server.BuildResult(s, res, e.Subnet, c.CNIVersion)
	if err != nil {
		return nil, err
	}
	return version.NewResult(c.CNIVersion, raw)
}

// vlanOf is the VLAN a port is plugged on: its subport's on a nested node (an access port of the VM's bridge),
// none on a chassis.
func vlanOf(p annotations.Port) int {
	if p.Nested != nil {
		return p.Nested.VLAN
	}
	return 0
}

// ready waits, as raven-node does, until ovn-controller has installed the port's flows on a chassis, or, on a
// nested node (no ovn-controller in the VM), until the gateway answers ARP from the pod's namespace.
func ready(ctx context.Context, vs ovs.Client, s plug.Spec, p annotations.Port) error {
	if p.Nested == nil {
		return vs.WaitInstalled(ctx, s.HostIfName, map[string]string{ovs.KeyIfaceID: p.ID})
	}
	if len(s.Routes) == 0 || s.Routes[0].GW == nil {
		return errors.New("the subnet has no gateway to check the trunk with")
	}
	return plug.WaitNeighbour(ctx, s.Netns, s.IfName, s.Routes[0].GW)
}

// del unplugs the port; the port itself stays in Neutron (the benchmark deletes it).
func del(ctx context.Context, vs ovs.Client, a *skel.CmdArgs, c *Conf, e Entry) error {
	host := server.HostIfName(e.Port.ID)
	if err := vs.DelPort(ctx, host); err != nil {
		return fmt.Errorf("removing %s from the bridge: %w", host, err)
	}
	return plug.Teardown(c.DatapathNetns, a.Netns, a.IfName, host)
}
