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
// the cache holds; unisolated are the groups of a pod no policy isolates. ok is false while a group the pod
// needs is still being made: the pod waits, so that it never runs without the policies that select it. A
// group Neutron refused to make does not hold the pod: it goes on with the groups that exist (more closed
// than its policies, never more open), and refused names the missing ones.
func (s *State) GroupsFor(ctx context.Context, c client.Reader, pod *corev1.Pod, ip string, unisolated []string) (groups, refused []string, ok bool, err error) {
	var nps networkingv1.NetworkPolicyList
	if err := c.List(ctx, &nps); err != nil {
		return nil, nil, false, err
	}
	if len(nps.Items) == 0 {
		return unisolated, nil, true, nil
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return nil, nil, false, err
	}
	p := podOf(pod, ip)
	res := policy.Translate(nps.Items, []policy.Pod{p}, namespacesOf(nss.Items))
	ids, refusedKeys := s.get()
	groups, missing := policy.SecurityGroups(res.Pods[p.Key()], unisolated, ids)
	for _, k := range missing {
		if !refusedKeys[k] {
			return nil, nil, false, nil
		}
	}
	return nonNil(groups), missing, true, nil
}

// nonNil is groups, or an empty list: a port update with no groups must say so, not leave them out.
func nonNil(groups []string) []string {
	if groups == nil {
		return []string{}
	}
	return groups
}

func podOf(pod *corev1.Pod, ip string) policy.Pod {
	p := policy.Pod{Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels, IP: ip}
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
