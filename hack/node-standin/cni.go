package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// podIfName is the pod's interface, as a kubelet names it.
const podIfName = "eth0"

// cniRuntime calls the node's CNI plugins as a container runtime does, through libcni.
type cniRuntime struct {
	confDir string
	cni     *libcni.CNIConfig
}

func newCNIRuntime(confDir, binDir, cacheDir string) *cniRuntime {
	return &cniRuntime{confDir: confDir, cni: libcni.NewCNIConfigWithCacheDir(filepath.SplitList(binDir), cacheDir, nil)}
}

// network loads the first conflist of the configuration directory, as the kubelet's runtimes do; it is
// read at every call, so a conflist that raven-node installs later is found.
func (r *cniRuntime) network() (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(r.confDir, []string{".conflist"})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", r.confDir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no .conflist in %s yet: is raven-node running?", r.confDir)
	}
	return libcni.ConfListFromFile(files[0])
}

func (r *cniRuntime) runtimeConf(sb *sandbox, netnsPath string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: sb.ID, NetNS: netnsPath, IfName: sb.IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", sb.Namespace},
			{"K8S_POD_NAME", sb.Name},
			{"K8S_POD_UID", sb.UID},
			{"K8S_POD_INFRA_CONTAINER_ID", sb.ID},
		},
	}
}

// add runs ADD and returns the pod's first IP.
func (r *cniRuntime) add(ctx context.Context, sb *sandbox, netnsPath string) (string, error) {
	list, err := r.network()
	if err != nil {
		return "", err
	}
	res, err := r.cni.AddNetworkList(ctx, list, r.runtimeConf(sb, netnsPath))
	if err != nil {
		return "", err
	}
	cur, err := current.NewResultFromResult(res)
	if err != nil {
		return "", fmt.Errorf("reading the CNI result: %w", err)
	}
	if len(cur.IPs) == 0 {
		return "", fmt.Errorf("the CNI result has no IP")
	}
	return cur.IPs[0].Address.IP.String(), nil
}

// del runs DEL; the network namespace may be gone.
func (r *cniRuntime) del(ctx context.Context, sb *sandbox, netnsPath string) error {
	list, err := r.network()
	if err != nil {
		return err
	}
	return r.cni.DelNetworkList(ctx, list, r.runtimeConf(sb, netnsPath))
}

// gc runs GC with the attachments that are still valid.
func (r *cniRuntime) gc(ctx context.Context, valid []types.GCAttachment) error {
	list, err := r.network()
	if err != nil {
		return err
	}
	return r.cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: valid})
}

// newSandboxID is a fresh 64-hex-digit ID, the form container runtimes use.
func newSandboxID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
