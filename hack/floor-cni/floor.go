package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/server"
	"github.com/raven-net/raven/internal/cni/wire"
)

// Conf is the plugin's entry in the conflist.
type Conf struct {
	types.PluginConf
	// Ports is the file of Ports, by namespace/name.
	Ports string `json:"ports"`
	// OVSDB is the node's Open vSwitch database (unix:PATH); Bridge its integration bridge.
	OVSDB  string `json:"ovsDB"`
	Bridge string `json:"bridge"`
	MTU    int    `json:"mtu"`
}

// Port is one port bound in advance, as the benchmark writes it.
type Port struct {
	ID  string `json:"id"`
	MAC string `json:"mac"`
	// Address is the port's IP with the subnet's prefix length; Gateway the subnet's.
	Address string `json:"address"`
	Gateway string `json:"gateway"`
}

// HostIfName is the host end's name: raven-node's, so that OVS holds the same names.
func (p Port) HostIfName() string { return server.HostIfName(p.ID) }

// plugger is what plugging needs from Open vSwitch; ovs.VSCtl outside tests.
type plugger interface {
	AddPort(ctx context.Context, name string, externalIDs map[string]string) error
	DelPort(ctx context.Context, name string) error
	WaitInstalled(ctx context.Context, name string, plugged map[string]string) error
}

// timeout bounds one verb.
const timeout = 2 * time.Minute

func funcs(ctx context.Context, out io.Writer) skel.CNIFuncs {
	if out == nil {
		out = os.Stdout
	}
	return skel.CNIFuncs{
		Add: func(a *skel.CmdArgs) error {
			c, port, err := lookup(a)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res, err := add(ctx, &ovs.VSCtl{DB: c.OVSDB, Bridge: c.Bridge}, a, c, port)
			if err != nil {
				return err
			}
			return res.PrintTo(out)
		},
		Del: func(a *skel.CmdArgs) error {
			_, port, err := lookup(a)
			if errors.Is(err, errUnknownPod) {
				return nil // nothing of ours
			}
			if err != nil {
				return err
			}
			c, _ := parseConf(a.StdinData)
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return del(ctx, &ovs.VSCtl{DB: c.OVSDB, Bridge: c.Bridge}, a, port)
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
	if c.MTU == 0 {
		c.MTU = server.DefaultMTU
	}
	return c, nil
}

// lookup finds the invocation's pod in the ports file.
func lookup(a *skel.CmdArgs) (*Conf, Port, error) {
	c, err := parseConf(a.StdinData)
	if err != nil {
		return nil, Port{}, err
	}
	pod, err := wire.ParsePod(a.Args)
	if err != nil {
		return nil, Port{}, types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	b, err := os.ReadFile(c.Ports)
	if err != nil {
		return nil, Port{}, types.NewError(types.ErrIOFailure, "floor-cni: reading the ports file", err.Error())
	}
	var ports map[string]Port
	if err := json.Unmarshal(b, &ports); err != nil {
		return nil, Port{}, types.NewError(types.ErrDecodingFailure, "floor-cni: the ports file is not JSON", err.Error())
	}
	p, ok := ports[pod.String()]
	if !ok {
		return c, Port{}, fmt.Errorf("pod %s: %w", pod, errUnknownPod)
	}
	return c, p, nil
}

// spec is what the pod's namespace gets for port p.
func spec(a *skel.CmdArgs, c *Conf, p Port) (plug.Spec, error) {
	mac, err := net.ParseMAC(p.MAC)
	if err != nil {
		return plug.Spec{}, fmt.Errorf("port %s: MAC %q: %w", p.ID, p.MAC, err)
	}
	ip, cidr, err := net.ParseCIDR(p.Address)
	if err != nil {
		return plug.Spec{}, fmt.Errorf("port %s: address %q: %w", p.ID, p.Address, err)
	}
	gw := net.ParseIP(p.Gateway)
	if gw == nil {
		return plug.Spec{}, fmt.Errorf("port %s: gateway %q is not an IP", p.ID, p.Gateway)
	}
	return plug.Spec{Netns: a.Netns, IfName: a.IfName, HostIfName: p.HostIfName(), MAC: mac, MTU: c.MTU,
		Address: &net.IPNet{IP: ip, Mask: cidr.Mask}, Routes: []plug.Route{{Dst: plug.DefaultRoute(gw), GW: gw}}}, nil
}

// add plugs the port and waits until ovn-controller has installed its flows, as raven-node does before it
// answers.
func add(ctx context.Context, vs plugger, a *skel.CmdArgs, c *Conf, p Port) (types.Result, error) {
	s, err := spec(a, c, p)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	res, err := plug.Setup(s)
	if err != nil {
		return nil, fmt.Errorf("plugging port %s: %w", p.ID, err)
	}
	ids := map[string]string{ovs.KeyIfaceID: p.ID, ovs.KeyAttachedMAC: s.MAC.String(), ovs.KeyIfaceStatus: "active"}
	if err := vs.AddPort(ctx, s.HostIfName, ids); err != nil {
		return nil, fmt.Errorf("adding %s to the bridge: %w", s.HostIfName, err)
	}
	if err := vs.WaitInstalled(ctx, s.HostIfName, map[string]string{ovs.KeyIfaceID: p.ID}); err != nil {
		return nil, fmt.Errorf("port %s: %w", p.ID, err)
	}
	r := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: res.Host.Name, Mac: res.Host.HardwareAddr.String()},
			{Name: res.Pod.Name, Mac: s.MAC.String(), Mtu: s.MTU, Sandbox: s.Netns},
		},
		IPs: []*current.IPConfig{{Interface: current.Int(1), Address: *s.Address, Gateway: s.Routes[0].GW}},
	}
	return r.GetAsVersion(c.CNIVersion)
}

// del unplugs the port; the port itself stays in Neutron (the benchmark deletes it).
func del(ctx context.Context, vs plugger, a *skel.CmdArgs, p Port) error {
	if err := vs.DelPort(ctx, p.HostIfName()); err != nil {
		return fmt.Errorf("removing %s from the bridge: %w", p.HostIfName(), err)
	}
	return plug.Teardown("", a.Netns, a.IfName, p.HostIfName())
}
