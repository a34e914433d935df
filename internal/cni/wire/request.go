package wire

import (
	"encoding/json"

	"github.com/containernetworking/cni/pkg/types"
)

// Path is the HTTP path raven-node serves CNI requests on.
const Path = "/cni"

// Request is one CNI invocation as the runtime made it: the CNI_* variables and the configuration.
type Request struct {
	Command     string          `json:"command"`
	ContainerID string          `json:"containerID,omitempty"`
	Netns       string          `json:"netns,omitempty"`
	IfName      string          `json:"ifName,omitempty"`
	Args        string          `json:"args,omitempty"`
	Config      json.RawMessage `json:"config"`
}

// Response is raven-node's answer: a result in the configuration's CNI version (ADD), or an error.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *types.Error    `json:"error,omitempty"`
}
