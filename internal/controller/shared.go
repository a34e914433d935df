package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/pkg/annotations"
)

// Gate is closed once the cluster's OpenStack objects are ensured and the index is loaded.
type Gate struct {
	ch chan struct{}
}

// NewGate returns a shut gate.
func NewGate() *Gate { return &Gate{ch: make(chan struct{})} }

// Open lets reconcilers through. Call it once.
func (g *Gate) Open() { close(g.ch) }

// Wait blocks until the gate opens or ctx ends.
func (g *Gate) Wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsOpen reports without blocking.
func (g *Gate) IsOpen() bool {
	select {
	case <-g.ch:
		return true
	default:
		return false
	}
}

// Reason turns an error into a short CamelCase event reason with a prefix, e.g. "PortCreateQuotaExceeded".
func Reason(prefix string, err error) string {
	var e *openstack.Error
	if errors.As(err, &e) {
		return prefix + string(e.Kind)
	}
	return prefix + "Failed"
}

// Message is the note of a Warning event: what failed and why, without secrets.
func Message(what string, err error) string {
	return fmt.Sprintf("%s: %v", what, err)
}

// RateLimiter retries failed objects from 5 ms doubling up to 30 s, so that an object recovers within
// half a minute of an OpenStack outage ending (controller-runtime's default waits up to 1000 s).
func RateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 30*time.Second)
}

// SetFinalizer adds (present) or removes Raven's finalizer on obj with a merge patch. The optimistic lock
// keeps other controllers' finalizers intact. A vanished object is not an error.
func SetFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string, present bool) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) == present {
		return nil
	}
	orig, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("cannot copy %T", obj)
	}
	if present {
		controllerutil.AddFinalizer(obj, finalizer)
	} else {
		controllerutil.RemoveFinalizer(obj, finalizer)
	}
	err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(annotations.FieldManager))
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("updating the finalizer: %w", err)
	}
	return nil
}

// Warn records a Warning event on obj: reason, the action that failed, and what failed and why.
func Warn(rec events.EventRecorder, obj runtime.Object, reason, action, what string, err error) {
	if rec != nil {
		rec.Eventf(obj, nil, corev1.EventTypeWarning, reason, action, "%s", Message(what, err))
	}
}

// Send hands an object to a controller for repair; false when ctx ended first. A nil channel (the
// controller is switched off) takes nothing.
func Send(ctx context.Context, ch chan<- event.GenericEvent, o client.Object) bool {
	if ch == nil {
		return true
	}
	select {
	case ch <- event.GenericEvent{Object: o}:
		return true
	case <-ctx.Done():
		return false
	}
}

// Scope tells which namespaces Raven serves (config.Namespaces).
type Scope struct {
	names    map[string]bool
	selector labels.Selector
}

// NewScope builds the scope; the selector was validated with the configuration.
func NewScope(o config.Namespaces) (*Scope, error) {
	sel, err := labels.Parse(o.ExcludeSelector)
	if err != nil {
		return nil, err
	}
	if o.ExcludeSelector == "" {
		sel = labels.Nothing()
	}
	s := &Scope{names: map[string]bool{}, selector: sel}
	for _, n := range o.Exclude {
		s.names[n] = true
	}
	return s, nil
}

// Excluded says why the namespace gets no network, or "" when it is served. A nil scope serves all.
func (s *Scope) Excluded(ns *corev1.Namespace) string {
	switch {
	case s == nil:
		return ""
	case s.names[ns.Name]:
		return fmt.Sprintf("namespace %s is listed in Raven's namespaces.exclude", ns.Name)
	case s.selector.Matches(labels.Set(ns.Labels)):
		return fmt.Sprintf("namespace %s matches Raven's namespaces.excludeSelector %q", ns.Name, s.selector.String())
	}
	return ""
}
