package main

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func TestSyncHostNetworkPod(t *testing.T) {
	tests := []struct {
		name      string
		node      string
		host      bool
		phase     corev1.PodPhase
		wantIP    string
		wantReady bool
	}{
		{name: "hostNetwork pod on this node runs with the node's IP", node: "n1", host: true, wantIP: nodeIP, wantReady: true},
		{name: "hostNetwork pod on another node is not this stand-in's", node: "n2", host: true},
		{name: "finished hostNetwork pod is left as it is", node: "n1", host: true, phase: corev1.PodSucceeded},
		{name: "pod on another node is not this stand-in's", node: "n2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"},
				Spec:   corev1.PodSpec{NodeName: tt.node, HostNetwork: tt.host},
				Status: corev1.PodStatus{Phase: tt.phase}}
			cs := fake.NewClientset(pod)
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if err := idx.Add(pod); err != nil {
				t.Fatal(err)
			}
			s := &standin{cs: cs, node: "n1", pods: idx}
			if err := s.sync(context.Background(), "ns/p"); err != nil {
				t.Fatal(err)
			}
			got, err := cs.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.PodIP != tt.wantIP || isReady(got) != tt.wantReady {
				t.Errorf("pod IP %q, Ready %v; want %q, %v", got.Status.PodIP, isReady(got), tt.wantIP, tt.wantReady)
			}
		})
	}
}
