//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// etcd calls etcd's JSON gateway (the stack's etcd listens on 127.0.0.1 without TLS).
func etcd(t testing.TB, path string, body, out any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(env.vars["ETCD_URL"]+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd %s: %s", path, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// compactEtcd compacts etcd's history up to its current revision, as the apiserver's periodic compaction
// does, so that no watch can resume from an older resourceVersion.
func compactEtcd(t testing.TB) int64 {
	t.Helper()
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	etcd(t, "/v3/kv/range", map[string]any{"key": "AA=="}, &rng) // any key: the header carries the revision
	var rev int64
	if _, err := fmt.Sscan(rng.Header.Revision, &rev); err != nil {
		t.Fatalf("etcd revision %q: %v", rng.Header.Revision, err)
	}
	etcd(t, "/v3/kv/compaction", map[string]any{"revision": rev, "physical": true}, nil)
	return rev
}

// watchExpired tells whether a watch of the namespace's pods from resourceVersion rv is answered 410 Gone,
// at once or as its first event (within 10 s); err is the error the watch call returned.
func watchExpired(ctx context.Context, ns, rv string) (bool, error) {
	w, err := env.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	gone := apierrors.IsGone(err) || apierrors.IsResourceExpired(err)
	if err == nil {
		select {
		case ev := <-w.ResultChan():
			gone = ev.Type == watch.Error && (apierrors.IsGone(apierrors.FromObject(ev.Object)) || apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)))
		case <-time.After(10 * time.Second):
		}
		w.Stop()
	}
	return gone, err
}

// A watch that expires (410 Gone) while Raven is frozen: pods deleted and created meanwhile, the apiserver
// restarted and etcd compacted, so that Raven's informers cannot resume and must list again. No delete may
// be missed: the deleted pods' ports go, the new pods get theirs. Raven runs as a process without leader
// election here: the installed one, frozen past its Lease's renew deadline, would step down and restart on
// waking (and its liveness probe would fail), and a restart lists anew, which would hide the informers' relist.
func TestChaosWatchExpired(t *testing.T) {
	r := startRaven(t, ravenOpts{process: true})
	t.Cleanup(r.stop)
	ctx := context.Background()
	ns := newNamespace(t)
	createPods(t, ns, "a", 6)
	waitAllAnnotated(t, ns, 6, time.Minute)
	list, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := list.ResourceVersion // no later than what Raven's informers have seen

	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := true
	defer func() {
		if frozen {
			_ = r.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	for i := range 3 {
		if err := env.kube.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("a-%d", i), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	createPods(t, ns, "b", 3)
	eventually(t, time.Minute, "the deleted pods to be gone from the apiserver", func() (bool, error) {
		l, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 6, err
	})
	stackService(t, "stop-service", "kube-apiserver")
	rev := compactEtcd(t)
	stackService(t, "start-service", "kube-apiserver")
	eventually(t, time.Minute, "the apiserver back", func() (bool, error) {
		_, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err == nil, nil
	})

	// The resourceVersion Raven holds is now expired: a watch from it is answered 410 Gone.
	gone, err := watchExpired(ctx, ns, seen)
	if !gone {
		t.Fatalf("a watch from resourceVersion %s after compaction at revision %d was not answered 410 Gone (err %v)", seen, rev, err)
	}

	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	frozen = false
	// The invariant covers what matters here: no port left for the three pods deleted during the expiry,
	// one port for each of the three created.
	took := checkInvariant(t, 2*time.Minute)
	report(t, "watch expired (Raven frozen, 3 deletes + 3 creates, apiserver restarted, etcd compacted to revision %d; a watch from Raven's resourceVersion answered 410): invariant holds %.1f s after Raven resumed",
		rev, took.Seconds())
}
