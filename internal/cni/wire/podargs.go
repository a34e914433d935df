package wire

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// PodArgs are the Kubernetes keys a runtime puts into CNI_ARGS; the field names are the keys.
type PodArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString
	K8S_POD_NAME               types.UnmarshallableString
	K8S_POD_UID                types.UnmarshallableString
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString
}

// Pod names the pod of one invocation.
type Pod struct {
	Namespace string
	Name      string
	// UID is empty when the runtime did not pass K8S_POD_UID.
	UID string
}

// String is namespace/name.
func (p Pod) String() string { return p.Namespace + "/" + p.Name }

// ParsePod reads the pod out of CNI_ARGS; unknown keys are ignored.
func ParsePod(cniArgs string) (Pod, error) {
	a := PodArgs{}
	a.IgnoreUnknown = true
	if err := types.LoadArgs(cniArgs, &a); err != nil {
		return Pod{}, fmt.Errorf("parsing CNI_ARGS: %w", err)
	}
	p := Pod{Namespace: string(a.K8S_POD_NAMESPACE), Name: string(a.K8S_POD_NAME), UID: string(a.K8S_POD_UID)}
	if p.Namespace == "" || p.Name == "" {
		return Pod{}, fmt.Errorf("CNI_ARGS %q lacks K8S_POD_NAMESPACE or K8S_POD_NAME", cniArgs)
	}
	return p, nil
}
