package pod

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/metrics"
	"github.com/raven-net/raven/pkg/annotations"
)

func TestAPodInAnExcludedNamespaceGetsNoPortAndAWarning(t *testing.T) {
	w := newWorld(t, pod("p", "uid-1"))
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}
	if _, err := w.r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(w.r.Neutron.X.PortsOf("uid-1")) != 1 {
		t.Fatal("a served namespace's pod got no port")
	}
	scope, err := controller.NewScope(config.Namespaces{Exclude: []string{"ns"}})
	if err != nil {
		t.Fatal(err)
	}
	w.r.Scope = scope
	if _, err := w.r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(w.r.Neutron.X.PortsOf("uid-1")) != 0 {
		t.Fatal("a pod of a namespace excluded later kept its port")
	}
	var got = getPod(t, w, "p")
	if _, ok := got.Annotations[annotations.PodPort]; ok {
		t.Fatal("the port annotation stayed")
	}
	select {
	case ev := <-w.recorder.Events:
		if !strings.Contains(ev, "NamespaceExcluded") || !strings.Contains(ev, "namespaces.exclude") {
			t.Fatalf("event %q does not say why the pod has no port", ev)
		}
	default:
		t.Fatal("no Warning event for a pod without a port")
	}
}

func getPod(t *testing.T, w *world, name string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestTheLatencyMetricCountsFromWhenRavenFirstSawThePod(t *testing.T) {
	old := pod("p", "uid-1", func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour)) })
	w := newWorld(t, old)
	w.r.Metrics = metrics.New(prometheus.NewRegistry())
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}
	if _, err := w.r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	if err := w.r.Metrics.PodPortLatency.Write(&m); err != nil {
		t.Fatal(err)
	}
	if h := m.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() > 5 {
		t.Fatalf("latency count %d, sum %.1f s: want one sample measured from first sight, not from the pod's creation an hour ago",
			h.GetSampleCount(), h.GetSampleSum())
	}
}
