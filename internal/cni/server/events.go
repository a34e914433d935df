package server

import (
	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/raven-net/raven/internal/cni/wire"
)

// podRef names the pod of a request for an event, whether or not the cache has it.
func podRef(pod wire.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: k8stypes.UID(pod.UID),
	}
}
