package service

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
)

// The refusal memory: changes Octavia refused, asked again only after refusalRetry.

type refusal struct {
	until time.Time
	what  string // the step and Octavia's answer
}

// refusalRetry is how long Raven waits before asking Octavia again for a change it refused.
const refusalRetry = 30 * time.Second

// reportRefusals raises one Warning event when Octavia refused something anew: the first new refusal names
// the reason (LoadBalancerRefused<Kind>), the message lists every change refused now.
func (r *Reconciler) reportRefusals(svc *corev1.Service, lb *openstack.LoadBalancer, refused []string, fresh []error) {
	if len(fresh) == 0 {
		return
	}
	r.warn(svc, "LoadBalancerRefused", fmt.Sprintf("Octavia refused %d change(s) of load balancer %s; the other ports are served", len(refused), lb.ID),
		refusedError{first: fresh[0], all: refused})
}

// refusedError carries the first new refusal (for its kind) and the text of all current ones.
type refusedError struct {
	first error
	all   []string
}

// Error lists the refusals, within what an Event's message may hold (1024 bytes).
func (e refusedError) Error() string {
	const limit = 900
	var b strings.Builder
	for i, what := range e.all {
		if r := []rune(what); len(r) > 200 {
			what = string(r[:200]) + "…"
		}
		if b.Len()+len(what) > limit {
			fmt.Fprintf(&b, "; and %d more", len(e.all)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(what)
	}
	return b.String()
}
func (e refusedError) Unwrap() error { return e.first }

func shortest(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// specHash tells two versions of a step apart (other members, another algorithm).
func specHash(s octavia.Step) string {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s|%s|%v", s.ID, s.Listener.Algorithm, s.Listener.Members)
	return strconv.FormatUint(h.Sum64(), 36)
}

// pruneRefusals forgets refusals whose time is up, so that ports removed or changed since do not pile up.
func (r *Reconciler) pruneRefusals(now time.Time) {
	r.dropRefusals(func(_ string, ref refusal) bool { return !now.Before(ref.until) })
}

// forgetRefusals drops what Octavia refused for a Service that no longer needs a load balancer.
func (r *Reconciler) forgetRefusals(uid string) {
	r.dropRefusals(func(key string, _ refusal) bool { return strings.HasPrefix(key, uid+"|") })
}

func (r *Reconciler) dropRefusals(drop func(key string, ref refusal) bool) {
	r.refusals.Range(func(k, v any) bool {
		if drop(k.(string), v.(refusal)) {
			r.refusals.Delete(k)
		}
		return true
	})
}
