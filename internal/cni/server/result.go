package server

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/pkg/annotations"
)

// BuildResult is ADD's answer, in the configuration's CNI version: the host end (none for a VLAN link) and the
// pod's interface, which has the address.
func BuildResult(spec plug.Spec, res plug.Result, subnet annotations.Subnet, cniVersion string) (json.RawMessage, error) {
	r := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		DNS:        types.DNS{Nameservers: subnet.DNSNameservers},
	}
	if res.Host.Name != "" {
		r.Interfaces = append(r.Interfaces, &current.Interface{Name: res.Host.Name, Mac: res.Host.HardwareAddr.String()})
	}
	r.Interfaces = append(r.Interfaces, &current.Interface{Name: res.Pod.Name, Mac: spec.MAC.String(), Mtu: spec.MTU, Sandbox: spec.Netns})
	r.IPs = []*current.IPConfig{{Interface: current.Int(len(r.Interfaces) - 1), Address: *spec.Address}}
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
