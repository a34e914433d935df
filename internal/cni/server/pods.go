package server

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Pods is the node's pod cache with a signal on every change of a pod, so that the ADDs waiting for that pod
// re-check at once, and only they: in a burst, every pod changes several times while other ADDs wait.
type Pods struct {
	lister corelisters.PodLister

	mu sync.Mutex
	// changed holds, by namespace/name, a channel for the pods someone waits for: closed and forgotten at the
	// pod's next change.
	changed map[string]chan struct{}
}

// NewPods wraps an informer of the node's pods.
func NewPods(inf cache.SharedIndexInformer) (*Pods, error) {
	p := &Pods{lister: corelisters.NewPodLister(inf.GetIndexer()), changed: map[string]chan struct{}{}}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.notify,
		UpdateFunc: func(_, obj any) { p.notify(obj) },
		DeleteFunc: p.notify,
	})
	if err != nil {
		return nil, fmt.Errorf("watching the node's pods: %w", err)
	}
	return p, nil
}

func (p *Pods) notify(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch, ok := p.changed[key]; ok {
		close(ch)
		delete(p.changed, key)
	}
}

// Changed is closed at the next change of the pod namespace/name (its creation, an update, its deletion).
func (p *Pods) Changed(namespace, name string) <-chan struct{} {
	key := namespace + "/" + name
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.changed[key]
	if !ok {
		ch = make(chan struct{})
		p.changed[key] = ch
	}
	return ch
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
