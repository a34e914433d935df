package server

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raven-net/raven/internal/cni/wire"
)

// DEL with nothing (left) to do succeeds: the runtime retries a failed DEL for ever, and the pod stays
// Terminating meanwhile.
func TestDelWithNothingToDo(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		// before runs after the ADD (if the pod has a port) and before the DEL.
		before func(t *testing.T, e *env)
		req    func(wire.Request) wire.Request
	}{
		{name: "the pod never had a port annotation", pod: testPod(t)},
		{name: "the pod is gone", pod: testPod(t, annotated), before: func(t *testing.T, e *env) {
			if err := e.cs.CoreV1().Pods("default").Delete(t.Context(), "nginx", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the interface is gone from the bridge", pod: testPod(t, annotated), before: func(t *testing.T, e *env) {
			if err := e.ovs.DelPort(t.Context(), testTap); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the runtime has removed the network namespace", pod: testPod(t, annotated),
			req: func(r wire.Request) wire.Request { r.Netns = ""; return r }},
		{name: "the request has no pod arguments", pod: testPod(t, annotated),
			req: func(r wire.Request) wire.Request { r.Args = ""; return r }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 5*time.Second, tt.pod)
			if tt.pod.Annotations != nil {
				decodeResult(t, e.srv.Handle(t.Context(), request("ADD", "sandbox-1")))
			}
			if tt.before != nil {
				tt.before(t, e)
			}
			req := request("DEL", "sandbox-1")
			if tt.req != nil {
				req = tt.req(req)
			}
			for i := range 2 {
				if resp := e.srv.Handle(t.Context(), req); resp.Error != nil {
					t.Fatalf("DEL %d: %v", i+1, resp.Error)
				}
			}
			if got := e.ovs.Names(); len(got) != 0 {
				t.Errorf("OVS ports %v after DEL, want none", got)
			}
			if tt.req == nil {
				if got := e.plumber.hostLinks(); len(got) != 0 {
					t.Errorf("veths %v after DEL, want none", got)
				}
			}
		})
	}
}
