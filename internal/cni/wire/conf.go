package wire

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// DefaultSocket is where raven-node listens and raven-cni connects when the configuration says nothing.
const DefaultSocket = "/run/raven/cni.sock"

// PluginType is the plugin's binary name, the "type" of its entry in a conflist.
const PluginType = "raven-cni"

// NetworkName is the name of the network in the conflist raven-node installs.
const NetworkName = "raven"

// CNIVersion is the spec version of the conflist raven-node installs: 1.0.0, the newest a libcni that reads no
// cniVersions implements (CNI v1.1.x, containerd 1.7's), which cannot read a 1.1.0 result.
const CNIVersion = "1.0.0"

// CNIVersions are the versions the conflist offers a libcni that honours cniVersions (CNI v1.2 and later,
// containerd 2.x's): it picks the highest it implements. raven-cni answers each in its own version.
func CNIVersions() []string { return []string{"1.0.0", "1.1.0"} }

// NetConf is raven-cni's entry in the conflist.
type NetConf struct {
	types.PluginConf
	// Socket is the unix socket of raven-node on this node.
	Socket string `json:"socket,omitempty"`
}

// ParseNetConf reads the plugin's configuration from the bytes the runtime gave on stdin.
func ParseNetConf(stdin []byte) (*NetConf, error) {
	conf := &NetConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, fmt.Errorf("parsing the network configuration: %w", err)
	}
	if conf.Socket == "" {
		conf.Socket = DefaultSocket
	}
	return conf, nil
}

// Conflist renders the network configuration list raven-node installs into the CNI configuration directory.
func Conflist(socket string) ([]byte, error) {
	list := map[string]any{
		"cniVersion":  CNIVersion,
		"cniVersions": CNIVersions(),
		"name":        NetworkName,
		"plugins": []map[string]any{{
			"type":   PluginType,
			"socket": socket,
		}},
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
