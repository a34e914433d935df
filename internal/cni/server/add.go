package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/plug"
	"github.com/raven-net/raven/internal/cni/wire"
	"github.com/raven-net/raven/pkg/annotations"
)

// Event reasons of failed ADDs.
const (
	ReasonNetworkNotReady    = "NetworkNotReady"
	ReasonPortBoundElsewhere = "PortBoundElsewhere"
	ReasonInvalidPort        = "InvalidPortAnnotation"
	ReasonPlugFailed         = "NetworkPlugFailed"
	ReasonNotNested          = "NodeNotNested"
)

func (s *Server) add(ctx context.Context, req wire.Request, conf *wire.NetConf) (json.RawMessage, error) {
	pod, err := wire.ParsePod(req.Args)
	if err != nil {
		return nil, newError(types.ErrInvalidEnvironmentVariables, "ADD: %w", err)
	}
	if req.Netns == "" || req.IfName == "" || req.ContainerID == "" {
		return nil, newError(types.ErrInvalidEnvironmentVariables, "ADD for pod %s lacks CNI_NETNS, CNI_IFNAME or CNI_CONTAINERID", pod)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()

	start := time.Now()
	t, err := s.waitPort(ctx, pod)
	if err != nil {
		return nil, s.waitFailed(ctx, pod, err)
	}
	pod.UID = t.uid
	spec, err := buildSpec(t, req.Netns, req.IfName)
	if err != nil {
		return nil, s.fail(ctx, pod, ReasonInvalidPort, newError(types.ErrInvalidNetworkConfig, "pod %s: %w", pod, err))
	}
	tag, err := s.vlan(t)
	if err != nil {
		return nil, s.fail(ctx, pod, ReasonNotNested, newError(types.ErrInvalidNetworkConfig, "pod %s, port %s: %w", pod, t.port.ID, err))
	}
	spec.VLAN = tag
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("port", t.port.ID, "interface", spec.HostIfName))

	plugStart := time.Now()
	ids := plugIDs(req, conf.Name, pod, t, spec)
	res, err := s.plug(ctx, spec, ids)
	var inUse *portInUseError
	if errors.As(err, &inUse) {
		return nil, s.fail(ctx, pod, ReasonPortInUse, newError(types.ErrInternal,
			"pod %s: %w. Was the %s annotation of pod %s written by someone other than Raven's controller? The controller "+
				"writes the pod's own port over it, and the runtime's next ADD plugs that; if the annotation stays, look at "+
				"Raven's events on both pods", pod, err, annotations.PodPort, pod))
	}
	if err != nil {
		return nil, s.fail(ctx, pod, ReasonPlugFailed, newError(types.ErrInternal, "pod %s, port %s: %w", pod, t.port.ID, err))
	}
	waitStart := time.Now()
	if tag > 0 {
		return s.nestedReady(ctx, req, pod, t, spec, res, conf, waitStart)
	}
	if err := s.cfg.OVS.WaitInstalled(ctx, spec.HostIfName, ids); err != nil {
		s.undo(ctx, req.ContainerID, spec)
		if errors.Is(err, ovs.ErrNotInstalled) {
			return nil, s.fail(ctx, pod, ReasonNetworkNotReady, newError(types.ErrTryAgainLater,
				"pod %s, port %s: plugged as %s, but ovn-controller did not set external_ids:ovn-installed=true within %s: "+
					"is ovn-controller running on node %s, and is the port's logical switch port bound here?",
				pod, t.port.ID, spec.HostIfName, s.cfg.ReadyTimeout, s.cfg.Node))
		}
		return nil, s.fail(ctx, pod, ReasonPlugFailed, newError(types.ErrInternal, "pod %s, port %s: %w", pod, t.port.ID, err))
	}
	// Where an ADD spent its time: waiting for the port annotation, plugging, waiting for ovn-controller.
	klog.FromContext(ctx).Info("Pod plugged", "ip", spec.Address, "mac", spec.MAC, "mtu", spec.MTU,
		"portWait", plugStart.Sub(start), "plug", waitStart.Sub(plugStart), "ovnInstalledAfter", time.Since(waitStart))
	return BuildResult(spec, res, t.subnet, conf.CNIVersion)
}

// waitFailed reports an ADD that got no port it can plug: a port bound to another node, a pod scheduled to
// another node and an annotation without pod_uid fail at once; anything else is what the ADD waited for in vain.
func (s *Server) waitFailed(ctx context.Context, pod wire.Pod, err error) error {
	var elsewhere *boundElsewhereError
	var onOther *elsewhereError
	var noUID *noPodUIDError
	switch {
	case errors.As(err, &noUID):
		return s.fail(ctx, pod, ReasonInvalidPort, newError(types.ErrInvalidNetworkConfig, "pod %s: %w", pod, err))
	case errors.As(err, &elsewhere):
		return s.fail(ctx, pod, ReasonPortBoundElsewhere, newError(types.ErrInternal,
			"pod %s: %w: Raven bound it for another node; the pod must be recreated", pod, err))
	case errors.As(err, &onOther):
		return s.fail(ctx, pod, ReasonPortBoundElsewhere, newError(types.ErrInternal,
			"%w: its port is bound to that node, and only that node's raven-node can plug it", err))
	}
	return s.fail(ctx, pod, ReasonNetworkNotReady, newError(types.ErrTryAgainLater, "pod %s: %w", pod, err))
}

// waitPort waits in the pod cache for a port this node can plug for the pod.
func (s *Server) waitPort(ctx context.Context, want wire.Pod) (target, error) {
	logger := klog.FromContext(ctx)
	last := ""
	w := podWatch{want: want}
	for {
		changed := s.cfg.Pods.Changed(want.Namespace, want.Name)
		pod, err := s.cfg.Pods.Get(want.Namespace, want.Name)
		if err != nil {
			return target{}, err
		}
		if err := s.hopeless(ctx, &w, pod); err != nil {
			return target{}, err
		}
		t, waitingFor, err := evaluate(pod, want, s.cfg.Node)
		if err != nil || waitingFor == "" {
			return t, err
		}
		if waitingFor != last {
			logger.V(2).Info("Waiting", "for", waitingFor)
			last = waitingFor
		}
		select {
		case <-ctx.Done():
			return target{}, fmt.Errorf("still waiting for %s after %s", last, s.cfg.ReadyTimeout)
		case <-changed:
		}
	}
}

// podWatch is what waitPort remembers of the pod between looks.
type podWatch struct {
	want   wire.Pod
	seen   bool // the cache has held the pod
	looked bool // the API server was asked for it
}

// hopeless says when waiting for the pod's port cannot succeed: the pod was deleted (so that the runtime's DEL
// follows without waiting for the deadline), or it runs on another node. A pod not in the cache yet is waited for.
func (s *Server) hopeless(ctx context.Context, w *podWatch, pod *corev1.Pod) error {
	if pod == nil && !w.seen && !w.looked && s.cfg.Lookup != nil {
		w.looked = true
		if err := s.onAnotherNode(ctx, w.want); err != nil {
			return err
		}
	}
	switch {
	case pod != nil && pod.DeletionTimestamp != nil, pod == nil && w.seen:
		return fmt.Errorf("pod %s was deleted while its network was being set up", w.want)
	case pod != nil && (w.want.UID == "" || string(pod.UID) == w.want.UID):
		w.seen = true
	}
	return nil
}

// onAnotherNode asks the API server for a pod the node's cache lacks: a pod scheduled to another node is an
// error; a missing pod, or one not scheduled yet, is waited for.
func (s *Server) onAnotherNode(ctx context.Context, want wire.Pod) error {
	pod, err := s.cfg.Lookup(ctx, want.Namespace, want.Name)
	if err != nil || pod == nil {
		return nil //nolint:nilerr // the cache may still bring the pod; the deadline bounds the wait
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != s.cfg.Node && (want.UID == "" || string(pod.UID) == want.UID) {
		return &elsewhereError{pod: want.String(), host: pod.Spec.NodeName, node: s.cfg.Node}
	}
	return nil
}

// plugIDs are the external_ids of the interface of one plug for the network of that name: what
// ovn-controller reads, what DEL, CHECK and GC find it by, and a plug ID of its own, by which the ADD knows
// its row from any former row of the name.
func plugIDs(req wire.Request, network string, pod wire.Pod, t target, spec plug.Spec) map[string]string {
	return map[string]string{
		ovs.KeyIfaceID:     t.port.ID,
		ovs.KeyAttachedMAC: spec.MAC.String(),
		ovs.KeyIfaceStatus: "active",
		ovs.KeyIfaceIDVer:  t.uid,
		ovs.KeySandbox:     req.ContainerID,
		ovs.KeyIfName:      req.IfName,
		ovs.KeyNetns:       req.Netns,
		ovs.KeyPod:         pod.String(),
		ovs.KeyNetwork:     network,
		ovs.KeyPlug:        rand.Text(),
	}
}

// plug replaces whatever a former sandbox left on the port's interface, builds the pair and adds the host
// end to the bridge with these external_ids, as an access port of spec.VLAN when it is set; on the kernel-VLAN
// path the VLAN link it makes in the pod is all there is. On error nothing of it is left. A port another pod of
// the node holds is refused (a *portInUseError), and nothing of that pod's is touched.
func (s *Server) plug(ctx context.Context, spec plug.Spec, ids map[string]string) (plug.Result, error) {
	unlock := s.locks.lock(spec.HostIfName)
	defer unlock()
	if err := s.inUse(ctx, ids[ovs.KeyIfaceID], ids[ovs.KeyIfaceIDVer], ""); err != nil {
		return plug.Result{}, err
	}
	if err := s.takeOver(ctx, spec.HostIfName); err != nil {
		return plug.Result{}, err
	}
	res, err := s.cfg.Plumber.Setup(ctx, spec)
	if err != nil {
		return plug.Result{}, fmt.Errorf("setting up the pod's interface: %w", err)
	}
	if s.kernelVLAN() {
		return res, nil
	}
	if err := s.cfg.OVS.AddPort(ctx, spec.HostIfName, spec.VLAN, ids); err != nil {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = s.cfg.OVS.DelPort(cctx, spec.HostIfName)
		_ = s.cfg.Plumber.Teardown(cctx, "", "", spec.HostIfName)
		return plug.Result{}, err
	}
	return res, nil
}

// takeOver removes the host end of the veth a former sandbox (of this pod, of a pod that no longer holds the
// port, or a failed ADD) left; AddPort replaces its OVS port with a new one, so that ovn-installed can only come
// from this plug. On the kernel-VLAN path it removes a VLAN link of the name an ADD stopped halfway left in the
// host.
func (s *Server) takeOver(ctx context.Context, hostIfName string) error {
	if err := s.cfg.Plumber.Teardown(ctx, "", "", hostIfName); err != nil {
		return fmt.Errorf("removing the interface %s a former sandbox left: %w", hostIfName, err)
	}
	return nil
}

// undo removes a plug that did not become ready, unless another sandbox has taken the interface meanwhile.
func (s *Server) undo(ctx context.Context, sandbox string, spec plug.Spec) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	unlock := s.locks.lock(spec.HostIfName)
	defer unlock()
	logger := klog.FromContext(ctx)
	if s.kernelVLAN() {
		// The link is in this sandbox's namespace (or, had the ADD stopped halfway, in the host under its name),
		// where no other sandbox can have taken it.
		if err := s.cfg.Plumber.Teardown(cctx, spec.Netns, spec.IfName, spec.HostIfName); err != nil {
			logger.Error(err, "Undoing a plug")
		}
		return
	}
	iface, ok, err := s.cfg.OVS.Interface(cctx, spec.HostIfName)
	if err != nil {
		logger.Error(err, "Undoing a plug: reading the interface")
		return
	}
	if ok && iface.ExternalIDs[ovs.KeySandbox] != sandbox {
		return
	}
	if err := s.cfg.OVS.DelPort(cctx, spec.HostIfName); err != nil {
		logger.Error(err, "Undoing a plug")
	}
	if err := s.cfg.Plumber.Teardown(cctx, spec.Netns, spec.IfName, spec.HostIfName); err != nil {
		logger.Error(err, "Undoing a plug")
	}
}

// fail posts a Warning event on the pod, logs, and returns err.
func (s *Server) fail(ctx context.Context, pod wire.Pod, reason string, err error) error {
	klog.FromContext(ctx).Info("CNI ADD failed", "reason", reason, "err", err)
	s.cfg.Recorder.Event(podRef(pod), "Warning", reason, err.Error())
	return err
}
