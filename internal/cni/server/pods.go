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
	// updated are called with the old and the new pod of every update.
	updated []func(old, cur *corev1.Pod)
}

// NewPods wraps an informer of the node's pods.
func NewPods(inf cache.SharedIndexInformer) (*Pods, error) {
	p := &Pods{lister: corelisters.NewPodLister(inf.GetIndexer()), changed: map[string]chan struct{}{}}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.notify,
		UpdateFunc: func(old, obj any) { p.notify(obj); p.notifyUpdate(old, obj) },
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

func (p *Pods) notifyUpdate(old, obj any) {
	o, ok1 := old.(*corev1.Pod)
	c, ok2 := obj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	p.mu.Lock()
	updated := p.updated
	p.mu.Unlock()
	for _, f := range updated {
		f(o, c)
	}
}

// OnUpdate has f called with the old and the new pod of every update from now on, on the informer's
// goroutine: f must not block, nor change the pods.
func (p *Pods) OnUpdate(f func(old, cur *corev1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updated = append(p.updated[:len(p.updated):len(p.updated)], f)
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
