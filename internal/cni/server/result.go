package server

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/pkg/annotations"
)

// BuildResult is ADD's answer, in the configuration's CNI version.
func BuildResult(spec plug.Spec, res plug.Result, subnet annotations.Subnet, cniVersion string) (json.RawMessage, error) {
	r := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: res.Host.Name, Mac: res.Host.HardwareAddr.String()},
			{Name: res.Pod.Name, Mac: spec.MAC.String(), Mtu: spec.MTU, Sandbox: spec.Netns},
		},
		IPs: []*current.IPConfig{{Interface: current.Int(1), Address: *spec.Address}},
		DNS: types.DNS{Nameservers: subnet.DNSNameservers},
	}
	for _, rt := range spec.Routes {
		if rt.Dst.IP.IsUnspecified() {
			r.IPs[0].Gateway = rt.GW
		}
		r.Routes = append(r.Routes, &types.Route{Dst: *rt.Dst, GW: rt.GW})
	}
	if cniVersion == "" {
		cniVersion = current.ImplementedSpecVersion
	}
	converted, err := r.GetAsVersion(cniVersion)
	if err != nil {
		return nil, fmt.Errorf("converting the result to CNI version %s: %w", cniVersion, err)
	}
	return json.Marshal(converted)
}
