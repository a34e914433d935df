package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/wire"
)

// Config is what a Server works with.
type Config struct {
	// Node is this node's name: the binding:host_id of the ports plugged here.
	Node string
	// ReadyTimeout bounds ADD: the port annotation plus ovn-installed (the kubelet's CRI timeout is 2m).
	ReadyTimeout time.Duration
	Pods         *Pods
	// Lookup reads a pod from the API server; ADD asks it once when the node's cache lacks the pod, so that a
	// pod scheduled to another node fails at once instead of at the deadline. Nil means never.
	Lookup func(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// OVS is the node's bridge; nil on the kernel-VLAN path (VLANUplink), which never calls it.
	OVS     ovs.Client
	Plumber Plumber
	// Recorder posts the Warning events of failed ADDs on the pods.
	Recorder record.EventRecorder
	// Metrics may be nil.
	Metrics *Metrics
	// Monitor shows the Interface table as OVS changes it, and PodsAPI patches pods: with both, WatchBindings
	// asks the controller to check the port of a running pod whose interface lost its OVN binding (nil: never).
	Monitor ovs.Monitor
	PodsAPI typedcorev1.PodsGetter
	// UnboundGrace is how long such an interface may stay without binding first (0: DefaultUnboundGrace).
	UnboundGrace time.Duration
	// Nested says the node is a nested node (a Nova VM): its pods' ports are VLAN subports of the VM port's
	// trunk, plugged as access ports of their VLAN on the VM's own bridge (OVS is the VM's, with no
	// ovn-controller), or as kernel VLAN links (VLANUplink), and a pod is ready once its gateway answers ARP
	// through the trunk.
	Nested bool
	// VLANUplink, on a nested node, is the VM's NIC on which each pod's interface is a kernel 802.1Q link of its
	// VLAN (the kernel-VLAN path: Plumber is a VLAN plumber of that NIC). Nothing then joins a bridge: ADD, DEL,
	// CHECK, GC and STATUS never call OVS, and the pod's namespace holds all there is of a plug.
	VLANUplink string
	// Health says whether an ADD can be served, for STATUS; nil means OVS.Health.
	Health func(ctx context.Context) error
}

// Server answers CNI requests.
type Server struct {
	cfg   Config
	locks keyedLocks
}

// New returns a server; cfg is used as given.
func New(cfg Config) *Server {
	return &Server{cfg: cfg}
}

// ServeHTTP takes one wire.Request as a JSON POST on wire.Path and answers a wire.Response.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != wire.Path {
		http.NotFound(w, r)
		return
	}
	var req wire.Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("decoding the CNI request: %v", err), http.StatusBadRequest)
		return
	}
	resp := s.Handle(r.Context(), req)
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(resp); err != nil {
		klog.FromContext(r.Context()).Error(err, "Writing a CNI response")
	}
}

// Handle runs one CNI request.
func (s *Server) Handle(ctx context.Context, req wire.Request) wire.Response {
	logger := klog.FromContext(ctx).WithValues("command", req.Command, "sandbox", req.ContainerID, "ifname", req.IfName)
	if pod, err := wire.ParsePod(req.Args); err == nil {
		logger = logger.WithValues("pod", klog.KRef(pod.Namespace, pod.Name))
	}
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()

	var resp wire.Response
	var err error
	resp.Result, err = s.dispatch(ctx, req)
	switch {
	case err != nil && req.Command == "ADD":
		// fail has logged it with its reason, and posted the event.
		resp.Error = asCNIError(err)
		logger.V(2).Info("CNI request failed", "code", resp.Error.Code, "duration", time.Since(start))
	case err != nil:
		resp.Error = asCNIError(err)
		logger.Error(err, "CNI request failed", "code", resp.Error.Code, "duration", time.Since(start))
	default:
		logger.V(2).Info("CNI request done", "duration", time.Since(start))
	}
	s.cfg.Metrics.observe(req.Command, err, time.Since(start))
	return resp
}

// dispatch runs the request's verb; only ADD has a result.
func (s *Server) dispatch(ctx context.Context, req wire.Request) (json.RawMessage, error) {
	conf, err := wire.ParseNetConf(req.Config)
	if err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	switch req.Command {
	case "ADD":
		return s.add(ctx, req, conf)
	case "DEL":
		return nil, s.del(ctx, req)
	case "CHECK":
		return nil, s.check(ctx, req)
	case "GC":
		return nil, s.gc(ctx, conf)
	case "STATUS":
		return nil, s.status(ctx)
	}
	return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI command %q", req.Command), "")
}

// asCNIError keeps a types.Error found in err's chain (with err's full message) or makes an internal one.
func asCNIError(err error) *types.Error {
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		return &types.Error{Code: cniErr.Code, Msg: err.Error(), Details: cniErr.Details}
	}
	return types.NewError(types.ErrInternal, err.Error(), "")
}

// kernelVLAN says pods are plugged as kernel VLAN links, without Open vSwitch.
func (s *Server) kernelVLAN() bool { return s.cfg.VLANUplink != "" }

// cleanupContext outlives the request's deadline, so that an ADD that timed out can still undo its work.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}
