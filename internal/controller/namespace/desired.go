package namespace

import (
	"github.com/raven-net/raven/internal/controller/pod"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/pkg/annotations"
)

// Annotations returns the namespace annotations for its network.
func Annotations(nn *neutron.NamespaceNet, routerID string) (map[string]*string, error) {
	net, err := annotations.Encode(annotations.Network{
		ID: nn.Network.ID, Name: nn.Network.Name, TenantID: nn.Network.ProjectID, ProjectID: nn.Network.ProjectID,
		Status: nn.Network.Status, RouterID: routerID,
	})
	if err != nil {
		return nil, err
	}
	sub, err := annotations.Encode(pod.SubnetAnnotation(*nn.Subnet))
	if err != nil {
		return nil, err
	}
	return map[string]*string{annotations.NamespaceNetwork: &net, annotations.NamespaceSubnet: &sub}, nil
}
