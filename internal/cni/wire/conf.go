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

// CNIVersion is the spec version of the conflist raven-node installs.
const CNIVersion = "1.1.0"

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
		"cniVersion": CNIVersion,
		"name":       NetworkName,
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
