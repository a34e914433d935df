package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/pkg/annotations"
)

type standin struct {
	cs    kubernetes.Interface
	node  string
	pods  cache.Indexer
	queue workqueue.TypedRateLimitingInterface[string]
	// binds holds the unscheduled pods to bind, the scheduler's part: apart from queue, whose workers may wait
	// in a CNI ADD, so that binding a burst never waits for sandboxes.
	binds workqueue.TypedRateLimitingInterface[string]
	// sb is nil without CNI: the pod's IP then comes from its port annotation.
	sb *sandboxes
	// bind says this stand-in binds the pods that name no node to its own.
	bind bool
	// seen keeps, by pod key, when the pod was first seen unbound, when its binding returned, and when it was
	// first seen bound here: the "Pod sandbox up" log line says where a pod's time went before its sandbox.
	mu   sync.Mutex
	seen map[string]*podSeen
}

// podSeen is what seen keeps of one pod.
type podSeen struct{ unbound, bindDone, bound time.Time }

// mark sets the time that pick chooses in the pod's entry to now, unless it is set already.
func (s *standin) mark(key string, pick func(*podSeen) *time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]*podSeen{}
	}
	ps, ok := s.seen[key]
	if !ok {
		ps = &podSeen{}
		s.seen[key] = ps
	}
	if t := pick(ps); t.IsZero() {
		*t = time.Now()
	}
}

func run(ctx context.Context, o options) error {
	logger := klog.FromContext(ctx)
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := registerNode(ctx, cs, o.node); err != nil {
		return err
	}
	var opts []informers.SharedInformerOption
	if !o.bind {
		// Like a kubelet, a stand-in that does not bind sees only its node's pods.
		opts = append(opts, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.node).String()
		}))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, opts...)
	inf := factory.Core().V1().Pods().Informer()
	s := &standin{
		cs: cs, node: o.node, pods: inf.GetIndexer(), sb: o.sandboxes(), bind: o.bind,
		queue: newQueue(), binds: newQueue(),
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: s.enqueue, UpdateFunc: func(_, o any) { s.enqueue(o) }, DeleteFunc: s.enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("pod cache did not sync")
	}
	if s.sb != nil {
		if err := s.sb.cleanup(ctx, s.livePods()); err != nil {
			logger.Error(err, "Cleaning up after a former run")
		}
	}
	logger.Info("node stand-in ready", "node", o.node, "cni", s.sb != nil)
	work(ctx, o.workers, s.queue, s.sync)
	work(ctx, bindWorkers, s.binds, s.bindPod)
	<-ctx.Done()
	s.queue.ShutDown()
	s.binds.ShutDown()
	return nil
}

// enqueue hands an unscheduled pod to binds (when this stand-in binds), any other to queue.
func (s *standin) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	p, ok := obj.(*corev1.Pod)
	switch {
	case ok && p.Spec.NodeName == "" && p.DeletionTimestamp == nil:
		s.mark(key, func(ps *podSeen) *time.Time { return &ps.unbound })
		if s.bind {
			s.binds.Add(key)
		}
		return
	case ok && p.Spec.NodeName == s.node:
		s.mark(key, func(ps *podSeen) *time.Time { return &ps.bound })
	}
	s.queue.Add(key)
}

// work starts n workers that hand q's keys to handle until q shuts down.
func work(ctx context.Context, n int, q workqueue.TypedRateLimitingInterface[string], handle func(context.Context, string) error) {
	for range n {
		go func() {
			for next(ctx, q, handle) {
			}
		}()
	}
}

// livePods maps namespace/name to UID for the pods bound to this node.
func (s *standin) livePods() map[string]string {
	live := map[string]string{}
	for _, obj := range s.pods.List() {
		if p := obj.(*corev1.Pod); p.Spec.NodeName == s.node && !isTerminal(p) {
			live[p.Namespace+"/"+p.Name] = string(p.UID)
		}
	}
	return live
}

func registerNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "standin",
	}}}
	created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", name, err)
	}
	created.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "StandIn",
		Message: "node stand-in: no kubelet runs here", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// nodeIP is the InternalIP every stand-in node reports, and so the IP of its hostNetwork pods.
const nodeIP = "127.0.0.1"

// newQueue retries a failed key with a backoff that stays within minutes, as a kubelet retries a sandbox.
func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second))
}

// bindWorkers bind pods at once. kube-scheduler picks nodes one pod at a time but binds each pod in a
// goroutine of its own, without a limit: a burst is bound at once.
const bindWorkers = 128

// next hands the next key of q to handle, and retries it later when handle fails.
func next(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], handle func(context.Context, string) error) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	if err := handle(ctx, key); err != nil {
		klog.FromContext(ctx).Info("Retrying pod", "pod", key, "err", err)
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// bindPod binds an unscheduled pod to this node (the scheduler's part); the binding's update brings the pod
// to queue.
func (s *standin) bindPod(ctx context.Context, key string) error {
	obj, exists, err := s.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return nil
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: s.node}}
	if err := s.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	s.mark(key, func(ps *podSeen) *time.Time { return &ps.bindDone })
	return nil
}

func (s *standin) sync(ctx context.Context, key string) error {
	obj, exists, err := s.pods.GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		return s.removeGone(ctx, key)
	}
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		return s.finishDeletion(ctx, pod)
	}
	if pod.Spec.NodeName != s.node {
		return nil
	}
	if pod.Spec.HostNetwork {
		// A kubelet runs such a pod in the node's network namespace, without CNI: its IP is the node's.
		if isTerminal(pod) {
			return nil
		}
		return s.markReady(ctx, pod, nodeIP)
	}
	if isTerminal(pod) {
		if s.sb != nil {
			return s.sb.removeByName(ctx, pod.Namespace, pod.Name)
		}
		return nil
	}
	ip, err := s.podIP(s.withSeen(ctx, key), pod)
	if err != nil || ip == "" {
		return err
	}
	return s.markReady(ctx, pod, ip)
}

// withSeen adds to ctx's logger where the pod's time went before this sync: from first seen unbound to its
// binding's return, to first seen bound, to now.
func (s *standin) withSeen(ctx context.Context, key string) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps, ok := s.seen[key]
	if !ok || ps.unbound.IsZero() || ps.bindDone.IsZero() || ps.bound.IsZero() {
		return ctx
	}
	return klog.NewContext(ctx, klog.FromContext(ctx).WithValues("bindCall", ps.bindDone.Sub(ps.unbound),
		"boundSeen", ps.bound.Sub(ps.bindDone), "boundSeenAt", ps.bound.UTC().Format("15:04:05.000000"), "syncAfterBoundSeen", time.Since(ps.bound)))
}

// removeGone removes the sandbox of a pod that is gone from the API.
func (s *standin) removeGone(ctx context.Context, key string) error {
	s.mu.Lock()
	delete(s.seen, key)
	s.mu.Unlock()
	if s.sb == nil {
		return nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	return s.sb.removeByName(ctx, ns, name)
}

// finishDeletion does what a kubelet does for a pod being deleted: it stops the containers (and removes the
// sandbox), then removes the pod.
func (s *standin) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	if s.sb != nil && pod.Spec.NodeName == s.node {
		if err := s.sb.removeByName(ctx, pod.Namespace, pod.Name); err != nil {
			return err
		}
	}
	err := s.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// podIP is the IP the pod's sandbox got from CNI, or without CNI the IP of its port annotation ("" while
// there is none: the annotation's arrival brings the pod back).
func (s *standin) podIP(ctx context.Context, pod *corev1.Pod) (string, error) {
	if s.sb != nil {
		return s.sb.ensure(ctx, pod)
	}
	var port annotations.Port
	ok, err := annotations.Decode(pod.Annotations, annotations.PodPort, &port)
	if !ok || err != nil || len(port.FixedIPs) == 0 {
		return "", nil
	}
	return port.FixedIPs[0].IPAddress, nil
}

// ReadyAnnotation set to "false" on a pod plays a failing readiness probe: the stand-in reports the running
// pod not Ready (its endpoints turn unready), and Ready again once the annotation is gone.
const ReadyAnnotation = "node-standin.raven/ready"

// ServingAnnotation set to "false" on a pod plays a container that hangs while its pod stays Ready (no
// readiness probe sees it): the stand-in stops the pod's server, and starts it again once the annotation is gone.
const ServingAnnotation = "node-standin.raven/serving"

// markReady reports the pod Running with its IP, and Ready unless ReadyAnnotation says otherwise.
func (s *standin) markReady(ctx context.Context, pod *corev1.Pod, ip string) error {
	ready := pod.Annotations[ReadyAnnotation] != "false"
	if pod.Status.PodIP == ip && isReady(pod) == ready {
		return nil
	}
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	now := metav1.Now()
	st := pod.Status.DeepCopy()
	st.Phase = corev1.PodRunning
	st.HostIP = nodeIP
	st.HostIPs = []corev1.HostIP{{IP: nodeIP}}
	st.PodIP = ip
	st.PodIPs = []corev1.PodIP{{IP: ip}}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
	}
	// A patch of the status, as a kubelet sends: it cannot conflict with Raven's annotation patch, as an update
	// of the whole pod would; the UID makes it fail for a new pod of the same name.
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID}, "status": st})
	if err != nil {
		return err
	}
	_, err = s.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
