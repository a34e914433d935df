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
}

func (s *State) set(ids map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = maps.Clone(ids)
}

func (s *State) get() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ids
}

// GroupsFor are the security groups the port of pod (with address ip) must carry now, given the policies
// the cache holds; unisolated are the groups of a pod no policy isolates. ok is false while a group the pod
// needs has not been made yet: the pod waits, so that it never runs without the policies that select it.
func (s *State) GroupsFor(ctx context.Context, c client.Reader, pod *corev1.Pod, ip string, unisolated []string) (groups []string, ok bool, err error) {
	var nps networkingv1.NetworkPolicyList
	if err := c.List(ctx, &nps); err != nil {
		return nil, false, err
	}
	if len(nps.Items) == 0 {
		return unisolated, true, nil
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return nil, false, err
	}
	p := podOf(pod, ip)
	res := policy.Translate(nps.Items, []policy.Pod{p}, namespacesOf(nss.Items))
	groups, ok = policy.SecurityGroups(res.Pods[p.Key()], unisolated, s.get())
	return groups, ok, nil
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
