package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// ReasonCNIConfigShadowed is the reason of the Warning event on the Node when another CNI configuration sorts
// before Raven's.
const ReasonCNIConfigShadowed = "CNIConfigShadowed"

// configExtensions are the files a runtime reads as CNI configurations (containerd's go-cni and CRI-O: .conf,
// .conflist and .json); of these it uses the first in lexical order.
var configExtensions = []string{".conf", ".conflist", ".json"}

// shadowingConfigs are the names of the configuration files of dir that sort before Raven's: a runtime that
// takes the first would use one of them instead.
func shadowingConfigs(dir string) ([]string, error) {
	files, err := libcni.ConfFiles(dir, configExtensions)
	if err != nil {
		return nil, fmt.Errorf("listing the CNI configurations in %s: %w", dir, err)
	}
	var before []string
	for _, f := range files {
		if name := filepath.Base(f); name < ConflistName {
			before = append(before, name)
		}
	}
	return before, nil
}

// warnShadowingConfigs logs, and posts as a Warning event on the node, the configurations of dir that a runtime
// would use instead of Raven's.
func warnShadowingConfigs(ctx context.Context, rec record.EventRecorder, node, dir string) {
	logger := klog.FromContext(ctx)
	names, err := shadowingConfigs(dir)
	if err != nil {
		logger.Error(err, "Cannot tell whether another CNI configuration sorts before Raven's", "confDir", dir)
		return
	}
	if len(names) == 0 {
		return
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
	}
	msg := fmt.Sprintf("%s sort(s) before %s: container runtimes use the first CNI configuration in lexical order, so "+
		"this node's pods get that network, not Raven's; remove it, or move it out of %s", strings.Join(paths, ", "),
		filepath.Join(dir, ConflistName), dir)
	logger.Error(nil, "Another CNI configuration sorts before Raven's", "files", paths, "conflist", ConflistName)
	rec.Event(&corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: k8stypes.UID(node)},
		corev1.EventTypeWarning, ReasonCNIConfigShadowed, msg)
}
