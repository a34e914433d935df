package openstack

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Observer receives one report per OpenStack request: the operation (e.g. "neutron port create"),
// its duration and the failure kind ("" on success).
type Observer interface {
	ObserveCall(op string, d time.Duration, kind Kind)
}

// CallCounter counts requests, and separately the ones that change something (POST, PUT, DELETE).
type CallCounter struct {
	calls, writes atomic.Int64
}

// Calls is the number of requests so far.
func (c *CallCounter) Calls() int64 { return c.calls.Load() }

// Writes is the number of requests so far that were not GETs.
func (c *CallCounter) Writes() int64 { return c.writes.Load() }

// meter is the RoundTripper under every OpenStack client: it names and times each call.
type meter struct {
	next    http.RoundTripper
	project string
	obs     Observer
	calls   *CallCounter
}

func (m *meter) RoundTrip(req *http.Request) (*http.Response, error) {
	if m.project != "" {
		req = req.Clone(req.Context())
		req.Header.Set("X-Project-Id", m.project)
	}
	op := Operation(req.Method, req.URL.Path, req.URL.Port())
	m.calls.calls.Add(1)
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		m.calls.writes.Add(1)
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeoutFor(op))
	start := time.Now()
	resp, err := m.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
	} else {
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	}
	if m.obs != nil {
		var kind Kind
		switch {
		case err != nil:
			kind = KindUnavailable
		case resp.StatusCode >= 400:
			kind = kindOf(resp.StatusCode, "")
		}
		m.obs.ObserveCall(op, time.Since(start), kind)
	}
	return resp, err
}

// callTimeout bounds one request, its answer read; slowCallTimeout bounds a load balancer create, which
// carries the whole graph of a Service (Octavia with the OVN provider takes minutes for 100 listeners on a busy machine).
const (
	callTimeout     = 60 * time.Second
	slowCallTimeout = 5 * time.Minute
)

func timeoutFor(op string) time.Duration {
	if op == "octavia loadbalancer create" {
		return slowCallTimeout
	}
	return callTimeout
}

// cancelOnClose releases a request's deadline when its answer has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// Operation names a request by service, resource and verb, with IDs left out, so that metric labels stay few:
// "POST /v2.0/ports" → "neutron port create", "PUT /v2/lbaas/pools/ID/members" → "octavia member batch_update".
func Operation(method, path, _ string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	service := "neutron"
	var res []string
	ids := 0
	for _, p := range parts {
		switch {
		case p == "v2.0" || p == "v2" || p == "v3" || p == "":
		case p == "lbaas" || p == "octavia":
			service = "octavia"
		case p == "auth" || p == "tokens":
			service = "keystone"
			res = append(res, p)
		case looksLikeID(p):
			ids++
		default:
			res = append(res, strings.TrimSuffix(p, "s"))
		}
	}
	if len(res) == 0 {
		return service + " " + strings.ToLower(method)
	}
	resource, verb := verbOf(method, res[len(res)-1], parts[len(parts)-1])
	return service + " " + resource + " " + verb
}

// verbOf names what a request does to resource; last is the path's last segment.
func verbOf(method, resource, last string) (string, string) {
	switch method {
	case http.MethodGet:
		if last == "status" {
			return "loadbalancer_status", "get" // a load balancer's status tree
		}
		if looksLikeID(last) {
			return resource, "get"
		}
		return resource, "list"
	case http.MethodPost:
		return resource, "create"
	case http.MethodPut:
		switch {
		case resource == "member" && !looksLikeID(last):
			return resource, "batch_update"
		case resource == "tag":
			return resource, "replace"
		case resource == "add_router_interface" || resource == "remove_router_interface":
			return "router", strings.TrimSuffix(resource, "_router_interface") + "_interface"
		}
		return resource, "update"
	case http.MethodDelete:
		return resource, "delete"
	}
	return resource, strings.ToLower(method)
}

func looksLikeID(s string) bool {
	return len(s) >= 32 && strings.Count(s, "-") == 4 || len(s) == 32 && !strings.ContainsAny(s, "_")
}
