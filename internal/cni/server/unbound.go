package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/pkg/annotations"
)

// FieldManager is the name raven-node's writes to pods carry in managedFields.
const FieldManager = "raven-node"

// WatchBindings asks the controller to check a running pod's port, until ctx ends, when the pod's interface
// has been without ovn-installed for the grace period (Config.UnboundGrace): ovn-controller removes it when it
// releases the interface's logical port, as when the port is deleted in Neutron. The controller would
// otherwise learn that only at its next resync. The request is the annotation raven.io/port-check naming the
// port; the controller reads that one port from Neutron, makes it again when it is gone, and removes the
// annotation. It reads the monitor of the Interface table (no database call) and the node's pod cache.
func (s *Server) WatchBindings(ctx context.Context) {
	if s.cfg.Monitor == nil || s.cfg.PodsAPI == nil || s.kernelVLAN() {
		return
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("bindings"))
	grace := s.cfg.UnboundGrace
	if grace <= 0 {
		grace = DefaultUnboundGrace
	}
	b := newBindingWatch(grace)
	get := func(namespace, name string) *corev1.Pod {
		pod, _ := s.cfg.Pods.Get(namespace, name) // a cache read fails only on a bad key: no pod
		return pod
	}
	for {
		ifaces, changed := s.cfg.Monitor.Snapshot()
		asks, next := b.step(ifaces, get, time.Now())
		for _, a := range asks {
			if err := s.askCheck(ctx, a); err != nil {
				klog.FromContext(ctx).Info("Asking Raven to check the pod's port failed; asking again later", "pod", klog.KObj(a.pod),
					"interface", a.iface, "port", a.port, "err", err)
			}
		}
		if !waitChange(ctx, changed, next) {
			return
		}
	}
}

// waitChange returns at the next change, or after next (when it is not 0); false when ctx ends first.
func waitChange(ctx context.Context, changed <-chan struct{}, next time.Duration) bool {
	var later <-chan time.Time
	if next > 0 {
		t := time.NewTimer(next)
		defer t.Stop()
		later = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-later:
	}
	return true
}

// askCheck annotates the pod with its port to check, and says so on the pod. The patch names the pod's UID: a
// pod made again under the name refuses it.
func (s *Server) askCheck(ctx context.Context, a checkAsk) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": a.pod.UID, "annotations": map[string]string{annotations.PodPortCheck: a.port},
	}})
	if err != nil {
		return err
	}
	_, err = s.cfg.PodsAPI.Pods(a.pod.Namespace).Patch(ctx, a.pod.Name, k8stypes.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("annotating pod %s/%s with %s: %w", a.pod.Namespace, a.pod.Name, annotations.PodPortCheck, err)
	}
	lost := time.Since(a.since).Round(time.Millisecond)
	klog.FromContext(ctx).Info("Warning: the pod's interface lost its OVN binding; asked Raven to check its port", "reason", ReasonPortUnbound,
		"pod", klog.KObj(a.pod), "interface", a.iface, "port", a.port, "without", lost)
	s.cfg.Recorder.Eventf(a.pod, corev1.EventTypeWarning, ReasonPortUnbound,
		"interface %s has had no OVN binding for port %s for %s (ovn-controller released it: the port was deleted in Neutron, "+
			"or bound elsewhere); the pod has no network until it has one again; raven-node asked Raven to check the port, "+
			"and a port that is gone is made again with the same MAC and IP when they are free", a.iface, a.port, lost)
	return nil
}
