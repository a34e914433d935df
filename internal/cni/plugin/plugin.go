package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/raven-net/raven/internal/cni/wire"
)

// About is the plugin's line in VERSION output.
const About = "raven-cni: plugs a pod's Neutron port through raven-node (OVS + OVN)"

// Timeout bounds one request; the runtime usually gives up earlier (the kubelet after 2 minutes).
const Timeout = 4 * time.Minute

// Plugin forwards CNI verbs to raven-node.
type Plugin struct {
	// Stdout receives ADD's result; os.Stdout when nil.
	Stdout io.Writer
}

// Funcs are the plugin's verbs for skel.PluginMainFuncs; ctx bounds them all.
func (p *Plugin) Funcs(ctx context.Context) skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    func(a *skel.CmdArgs) error { return p.run(ctx, "ADD", a) },
		Del:    func(a *skel.CmdArgs) error { return p.run(ctx, "DEL", a) },
		Check:  func(a *skel.CmdArgs) error { return p.run(ctx, "CHECK", a) },
		GC:     func(a *skel.CmdArgs) error { return p.run(ctx, "GC", a) },
		Status: func(a *skel.CmdArgs) error { return p.run(ctx, "STATUS", a) },
	}
}

// Main runs the plugin as a CNI binary.
func Main(ctx context.Context) {
	p := &Plugin{}
	skel.PluginMainFuncs(p.Funcs(ctx), version.All, About)
}

func (p *Plugin) run(ctx context.Context, command string, args *skel.CmdArgs) error {
	conf, err := wire.ParseNetConf(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	resp, err := send(ctx, conf.Socket, wire.Request{
		Command: command, ContainerID: args.ContainerID, Netns: args.Netns, IfName: args.IfName, Args: args.Args,
		Config: args.StdinData,
	})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	if command != "ADD" {
		return nil
	}
	result, err := version.NewResult(conf.CNIVersion, resp.Result)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("raven-node's result is not a CNI %s result", conf.CNIVersion), err.Error())
	}
	out := p.Stdout
	if out == nil {
		out = os.Stdout
	}
	return result.PrintTo(out)
}
