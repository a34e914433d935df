//go:build bench

package scale

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/raven-net/raven/pkg/annotations"
)

const (
	serviceCIDR = "10.96.0.0/16"
	// Kubernetes' published limits (150,000 pods, 5,000 nodes, 10,000 namespaces, 10,000 Services) set the ratios:
	// 30 pods per node, 15 per namespace, one Service per namespace whose endpoints are the namespace's pods.
	podsPerNode      = 30
	podsPerNamespace = 15
	benchLabel       = "raven-scale"
	// clusterID is the cluster ID of the Raven configuration (clusterID: scale).
	clusterID = "scale"
)

// shape is the cluster of one size.
type shape struct{ pods, nodes, namespaces int }

// within is how long a phase may wait for what takes d at 50,000 pods or fewer: d, and in proportion above.
func (s shape) within(d time.Duration) time.Duration {
	return max(d, d*time.Duration(s.pods)/50000)
}

func shapeOf(pods int) shape {
	return shape{pods: pods, nodes: max(3, pods/podsPerNode), namespaces: (pods + podsPerNamespace - 1) / podsPerNamespace}
}

func nodeName(i int) string      { return fmt.Sprintf("node-%05d", i) }
func namespaceName(i int) string { return fmt.Sprintf("ns-%05d", i) }

// parallel runs do(i) for i in [from, to) on workers goroutines; it fails the test on the first error.
func parallel(t testing.TB, from, to, workers int, do func(i int) error) {
	t.Helper()
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var first atomic.Value
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to || first.Load() != nil {
					return
				}
				if err := do(i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		t.Fatal(err)
	}
}

func newNode(i int) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{benchLabel: "true"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP,
			Address: fmt.Sprintf("192.168.%d.%d", i/250, i%250+1)}}},
	}
}

// benchPod is a pod bound to its node at creation (no scheduler), that tolerates the taints a node without
// kubelet gets, with one container as most pods have.
func benchPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{benchLabel: "true", "app": "svc"}},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
		},
	}
}

func benchService(ns string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc", Labels: map[string]string{benchLabel: "true"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80,
			TargetPort: intstr.FromInt32(8080)}}},
	}
}

// grow creates what a cluster of shape `to` has beyond `from`: nodes, namespaces with their Service, and
// pods (podsPerNamespace per namespace, spread over the nodes).
func grow(ctx context.Context, t testing.TB, c kubernetes.Interface, from, to shape) {
	t.Helper()
	parallel(t, from.nodes, to.nodes, 32, func(i int) error {
		_, err := c.CoreV1().Nodes().Create(ctx, newNode(i), metav1.CreateOptions{})
		return err
	})
	parallel(t, from.namespaces, to.namespaces, 32, func(i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceName(i), Labels: map[string]string{benchLabel: "true"}}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := c.CoreV1().Services(ns.Name).Create(ctx, benchService(ns.Name), metav1.CreateOptions{})
		return err
	})
	parallel(t, from.pods, to.pods, 48, func(i int) error {
		ns := namespaceName(i / podsPerNamespace)
		_, err := c.CoreV1().Pods(ns).Create(ctx, benchPod(ns, fmt.Sprintf("pod-%06d", i), nodeName((i*7919)%to.nodes)), metav1.CreateOptions{})
		return err
	})
}

// publishEndpoints writes each namespace's EndpointSlice (namespaces from..to) with its pods' addresses.
func publishEndpoints(ctx context.Context, t testing.TB, c kubernetes.Interface, w *watch, from, to shape) {
	t.Helper()
	parallel(t, 0, to.namespaces, 32, func(n int) error {
		ns := namespaceName(n)
		var eps []discoveryv1.Endpoint
		for i := n * podsPerNamespace; i < min((n+1)*podsPerNamespace, to.pods); i++ {
			name := fmt.Sprintf("pod-%06d", i)
			ip, ok := w.ip(ns + "/" + name)
			if !ok {
				return fmt.Errorf("pod %s/%s has no annotated address", ns, name)
			}
			eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name}})
		}
		es := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "svc-bench", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   eps,
			Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Protocol: new(corev1.ProtocolTCP), Port: new(int32(8080))}},
		}
		if n < from.namespaces {
			_, err := c.DiscoveryV1().EndpointSlices(ns).Update(ctx, es, metav1.UpdateOptions{})
			return err
		}
		_, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{})
		return err
	})
}

// watch records, for every pod, when its port annotation was first seen and the address it gives.
type watch struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	addr  map[string]string
	count atomic.Int64
	// grown counts the grown pods (pod-*) whose annotation gave an address.
	grown atomic.Int64
	stop  context.CancelFunc
}

func watchPods(t testing.TB, c kubernetes.Interface) *watch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watch{seen: map[string]time.Time{}, addr: map[string]string{}, stop: cancel}
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(c, 0)
	inf := factory.Core().V1().Pods().Informer()
	// Only the annotation matters: the benchmark's own cache of 50,000 pods stays small.
	if err := inf.SetTransform(func(o any) (any, error) {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return o, nil
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, ResourceVersion: p.ResourceVersion,
			Annotations: map[string]string{annotations.PodPort: p.Annotations[annotations.PodPort]}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	record := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Annotations[annotations.PodPort] == "" {
			return
		}
		now := time.Now()
		key := p.Namespace + "/" + p.Name
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.seen[key]; ok {
			return
		}
		var port annotations.Port
		if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &port); ok && err == nil && len(port.FixedIPs) > 0 {
			if _, had := w.addr[key]; !had && strings.HasPrefix(p.Name, "pod-") {
				w.grown.Add(1)
			}
			w.addr[key] = port.FixedIPs[0].IPAddress
		}
		w.seen[key] = now
		w.count.Add(1)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, o any) { record(o) },
		DeleteFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				w.mu.Lock()
				if _, ok := w.seen[p.Namespace+"/"+p.Name]; ok {
					delete(w.seen, p.Namespace+"/"+p.Name)
					w.count.Add(-1)
				}
				w.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the pod informer did not sync")
	}
	return w
}

func (w *watch) at(key string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.seen[key]
	return at, ok
}

func (w *watch) ip(key string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ip, ok := w.addr[key]
	return ip, ok
}
