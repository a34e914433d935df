package slim

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/pkg/annotations"
)

// maxShared bounds the table: past it, the table starts empty again. Objects already cached keep the values
// they share; the values of objects that come after are shared anew. At Kubernetes' published limits
// (10,000 namespaces, 5,000 nodes) the table holds far fewer values than this.
var maxShared = 1 << 17

// Table keeps one copy of each value that cached objects repeat. Cached objects are read only (the cache hands
// out copies), so objects may share a map or a slice. The zero Table is ready.
type Table struct {
	mu         sync.Mutex
	strs       map[string]string
	labels     map[string]map[string]string
	containers map[string][]corev1.Container
}

// size is the number of values the table holds. Callers hold mu.
func (t *Table) size() int { return len(t.strs) + len(t.labels) + len(t.containers) }

// resetIfFull empties a full table, and makes the maps of a new one. Callers hold mu.
func (t *Table) resetIfFull() {
	if t.strs == nil || t.size() >= maxShared {
		t.strs, t.labels, t.containers = map[string]string{}, map[string]map[string]string{}, map[string][]corev1.Container{}
	}
}

// share returns the value that the table's map (which pick chooses) holds under key, or keeps and returns the
// one mk makes when it holds none.
func share[V any](t *Table, pick func(*Table) map[string]V, key string, mk func() V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.resetIfFull()
	m := pick(t)
	if c, ok := m[key]; ok {
		return c
	}
	v := mk()
	m[key] = v
	return v
}

// str is the table's copy of s.
func (t *Table) str(s string) string {
	if s == "" {
		return ""
	}
	return share(t, func(t *Table) map[string]string { return t.strs }, s, func() string { return s })
}

// labelSet is the table's copy of a set of labels: the pods of one ReplicaSet carry the same set.
func (t *Table) labelSet(l map[string]string) map[string]string {
	if len(l) == 0 {
		return nil
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(l[k])
		b.WriteByte(0)
	}
	return share(t, func(t *Table) map[string]map[string]string { return t.labels }, b.String(), func() map[string]string { return maps.Clone(l) })
}

// namedPorts is the table's copy of the containers of cs that name ports, each with those ports only (their
// name, number and protocol): a NetworkPolicy names a pod's port by its name. Nil when no port has a name.
func (t *Table) namedPorts(cs []corev1.Container) []corev1.Container {
	var b strings.Builder
	for _, c := range cs {
		for _, p := range c.Ports {
			if p.Name != "" {
				b.WriteString(c.Name)
				b.WriteByte(0)
				b.WriteString(p.Name)
				b.WriteByte(0)
				b.WriteString(strconv.Itoa(int(p.ContainerPort)))
				b.WriteByte(0)
				b.WriteString(string(p.Protocol))
				b.WriteByte(0)
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	// Made only when the table has none like it.
	return share(t, func(t *Table) map[string][]corev1.Container { return t.containers }, b.String(), func() []corev1.Container {
		var out []corev1.Container
		for _, c := range cs {
			var ports []corev1.ContainerPort
			for _, p := range c.Ports {
				if p.Name != "" {
					ports = append(ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, Protocol: p.Protocol})
				}
			}
			if ports != nil {
				out = append(out, corev1.Container{Name: c.Name, Ports: ports})
			}
		}
		return out
	})
}

// podAnnotations are the pod annotations Raven reads: its own.
var podAnnotations = []string{annotations.PodPort, annotations.PodSubnet, annotations.PodPortCheck}

// ravenAnnotations keeps Raven's annotations of all (nil when there is none). The subnet's, the same on every
// pod of a namespace, is shared; the port's is kept compact (annotations.CompactPort: its ID, network, MAC and
// addresses, and a digest that annotations.Changes compares with the value the controller would write).
func (t *Table) ravenAnnotations(all map[string]string) map[string]string {
	var out map[string]string
	for _, k := range podAnnotations {
		if v, ok := all[k]; ok {
			if out == nil {
				out = make(map[string]string, len(podAnnotations))
			}
			switch k {
			case annotations.PodSubnet:
				v = t.str(v)
			case annotations.PodPort:
				v = annotations.CompactPort(v)
			}
			out[k] = v
		}
	}
	return out
}

// Pod is the cache's transform for pods. It keeps only what Raven reads of a pod: its identity, deletion,
// labels (selectors), finalizers and Raven's annotations; hostNetwork, node and named container ports
// (NetworkPolicy); phase and address. Owner references, other tools' annotations (which can be large), images
// and conditions are never read.
func (t *Table) Pod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	m := p.ObjectMeta
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: t.str(m.Namespace), UID: m.UID, ResourceVersion: m.ResourceVersion,
			Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
			DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds, Labels: t.labelSet(m.Labels), Finalizers: m.Finalizers,
			Annotations: t.ravenAnnotations(m.Annotations)},
		Spec:   corev1.PodSpec{HostNetwork: p.Spec.HostNetwork, NodeName: t.str(p.Spec.NodeName), Containers: t.namedPorts(p.Spec.Containers)},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(t.str(string(p.Status.Phase))), PodIP: p.Status.PodIP},
	}, nil
}

// Node is the cache's transform for nodes. It keeps only what Raven reads of a node: its identity and
// addresses (NetworkPolicy admits a pod's own node), not its images or conditions.
func Node(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{TypeMeta: n.TypeMeta, ObjectMeta: n.ObjectMeta, Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}
	slim.ManagedFields = nil
	return slim, nil
}

// EndpointSlice is the cache's transform for EndpointSlices. It keeps what Raven reads of a slice: its
// identity, labels (the Service's name), address type and ports, and of each endpoint its addresses,
// conditions and the kind, namespace and name of the object behind it; not its node, zone or hints.
func (t *Table) EndpointSlice(obj any) (any, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	m := es.ObjectMeta
	slim := &discoveryv1.EndpointSlice{
		TypeMeta: es.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: t.str(m.Namespace), UID: m.UID, ResourceVersion: m.ResourceVersion,
			Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
			Labels: m.Labels, Annotations: m.Annotations, OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers},
		AddressType: es.AddressType,
		Ports:       es.Ports,
	}
	if len(es.Endpoints) > 0 {
		slim.Endpoints = make([]discoveryv1.Endpoint, len(es.Endpoints))
		for i, ep := range es.Endpoints {
			out := discoveryv1.Endpoint{Addresses: ep.Addresses, Conditions: ep.Conditions}
			if r := ep.TargetRef; r != nil {
				out.TargetRef = &corev1.ObjectReference{Kind: t.str(r.Kind), Namespace: t.str(r.Namespace), Name: r.Name}
			}
			slim.Endpoints[i] = out
		}
	}
	return slim, nil
}
