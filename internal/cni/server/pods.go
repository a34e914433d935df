package server

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Pods is the node's pod cache with a signal on every change, so that waiters re-check at once.
type Pods struct {
	lister corelisters.PodLister

	mu      sync.Mutex
	changed chan struct{}
}

// NewPods wraps an informer of the node's pods.
func NewPods(inf cache.SharedIndexInformer) (*Pods, error) {
	p := &Pods{lister: corelisters.NewPodLister(inf.GetIndexer()), changed: make(chan struct{})}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.notify() },
		UpdateFunc: func(any, any) { p.notify() },
		DeleteFunc: func(any) { p.notify() },
	})
	if err != nil {
		return nil, fmt.Errorf("watching the node's pods: %w", err)
	}
	return p, nil
}

func (p *Pods) notify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.changed)
	p.changed = make(chan struct{})
}

// Changed is closed at the next change of any pod of the node.
func (p *Pods) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// Get returns the cached pod, or nil when the cache has none of that name.
func (p *Pods) Get(namespace, name string) (*corev1.Pod, error) {
	pod, err := p.lister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s from the cache: %w", namespace, name, err)
	}
	return pod, nil
}
