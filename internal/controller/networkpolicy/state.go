package networkpolicy

import (
	"context"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raven-net/raven/internal/policy"
)

// State is the policy groups Neutron has, by key, as the last reconcile left them.
type State struct {
	// NodeCIDRs are where nodes' addresses must lie for the isolated pods on them to admit them
	// (neutron.podIngressCIDRs).
	NodeCIDRs []string

	mu  sync.RWMutex
	ids map[string]string
	// refused are the keys of the groups Neutron refused to make in the last reconcile.
	refused map[string]bool
}

func (s *State) set(ids map[string]string, refused map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids, s.refused = maps.Clone(ids), maps.Clone(refused)
}

func (s *State) get() (ids map[string]string, refused map[string]bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ids, s.refused
}

// GroupsFor are the security groups the port of pod (with address ip) must carry now, given the policies
// the cache holds; unisolated are the groups of a pod no policy isolates. waiting names the groups the pod
// needs that the policy reconcile has not handed out yet (not made yet, or their rules not in place), each as
// "key (description)": the pod waits, so that it never runs without the policies that select it, nor with a
// group that admits more than they say. A group Neutron refused to make does not hold the pod: it goes on with
// the groups that exist (more closed than its policies, never more open), and refused names the missing ones.
func (s *State) GroupsFor(ctx context.Context, c client.Reader, pod *corev1.Pod, ip string, unisolated []string) (groups, refused, waiting []string, err error) {
	var nps networkingv1.NetworkPolicyList
	if err := c.List(ctx, &nps); err != nil {
		return nil, nil, nil, err
	}
	if len(nps.Items) == 0 {
		return unisolated, nil, nil, nil
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return nil, nil, nil, err
	}
	p := podOf(pod, ip)
	res := policy.Translate(nps.Items, []policy.Pod{p}, namespacesOf(nss.Items))
	nodes, err := ownNodeAddresses(ctx, c, p.Node, s.NodeCIDRs)
	if err != nil {
		return nil, nil, nil, err
	}
	policy.AdmitOwnNodes(&res, []policy.Pod{p}, nodes)
	ids, refusedKeys := s.get()
	groups, missing := policy.SecurityGroups(res.Pods[p.Key()], unisolated, ids)
	for _, k := range missing {
		switch {
		case policy.IsNodeKey(k):
			// The first isolated pod of a node: the policy reconcile makes the node's group once the pod has
			// its port. Until then the pod does not admit its node (more closed, never more open).
		case refusedKeys[k]:
			refused = append(refused, k)
		default:
			waiting = append(waiting, describe(k, res.Groups[k]))
		}
	}
	if len(waiting) > 0 {
		return nil, nil, waiting, nil
	}
	return nonNil(groups), refused, nil, nil
}

// describe is a group's key and what it stands for (the base groups, which no policy owns, by key alone).
func describe(key string, g policy.Group) string {
	if g.Description == "" {
		return key
	}
	return key + " (" + g.Description + ")"
}

// nodeAddresses are the admitted addresses of every node, by node name; none without cidrs.
func nodeAddresses(ctx context.Context, c client.Reader, cidrs []string) (map[string][]string, error) {
	if len(cidrs) == 0 {
		return nil, nil
	}
	var list corev1.NodeList
	if err := c.List(ctx, &list); err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = policy.NodeAddresses(addressesOf(&list.Items[i]), cidrs)
	}
	return out, nil
}

// ownNodeAddresses are the admitted addresses of the node named node alone (none while the pod is not bound,
// the node is gone or there are no cidrs), by node name.
func ownNodeAddresses(ctx context.Context, c client.Reader, node string, cidrs []string) (map[string][]string, error) {
	if node == "" || len(cidrs) == 0 {
		return nil, nil
	}
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return map[string][]string{node: policy.NodeAddresses(addressesOf(&n), cidrs)}, nil
}

// addressesOf are a node's InternalIP and ExternalIP addresses.
func addressesOf(n *corev1.Node) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out = append(out, a.Address)
		}
	}
	return out
}

// nonNil is groups, or an empty list: a port update with no groups must say so, not leave them out.
func nonNil(groups []string) []string {
	if groups == nil {
		return []string{}
	}
	return groups
}

func podOf(pod *corev1.Pod, ip string) policy.Pod {
	p := policy.Pod{Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels, IP: ip, Node: pod.Spec.NodeName}
	for _, c := range pod.Spec.Containers {
		p.Ports = append(p.Ports, c.Ports...)
	}
	return p
}

func namespacesOf(items []corev1.Namespace) []policy.Namespace {
	out := make([]policy.Namespace, 0, len(items))
	for _, ns := range items {
		out = append(out, policy.Namespace{Name: ns.Name, Labels: ns.Labels})
	}
	return out
}
