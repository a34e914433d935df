package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/raven-net/raven/internal/openstack"
)

// call is one request being served.
type call struct {
	r *http.Request
	// segs is the path after the service's version prefix, split at "/"; ids its odd segments, the IDs.
	segs, ids []string
	query     url.Values
	// items are the objects the request carries or its page returns, for the model and the counters.
	items int
	// list says the request is a page of a list.
	list bool
}

// reply is a handler's answer: a status and a body encoded as JSON (none when nil).
type reply struct {
	status int
	body   any
}

func ok(body any) reply      { return reply{http.StatusOK, body} }
func created(body any) reply { return reply{http.StatusCreated, body} }
func noContent() reply       { return reply{status: http.StatusNoContent} }

// handler serves one kind of request.
type handler func(c *call) (reply, error)

// route is a handler and whether its requests are pages of a list.
type route struct {
	h    handler
	list bool
}

// routes maps "METHOD shape" to its route; the shape is the path after the version prefix with every odd
// segment (an ID) written {id}, e.g. "PUT ports/{id}/tags".
type routes map[string]route

// service is one simulated API: its routes, its workers and its error body.
type service struct {
	name string
	// prefixes are the version prefixes its paths start with.
	prefixes []string
	routes   routes
	shapes   map[string]bool
	// sem holds a token per request being served; nil: no cap.
	sem chan struct{}
	// fault is the body of an error answer.
	fault func(status int, msg string) any
}

func newService(name string, workers int, prefixes []string, rs routes, fault func(int, string) any) *service {
	svc := &service{name: name, prefixes: prefixes, routes: rs, shapes: map[string]bool{}, fault: fault}
	for k := range rs {
		svc.shapes[k[strings.IndexByte(k, ' ')+1:]] = true
	}
	if workers > 0 {
		svc.sem = make(chan struct{}, workers)
	}
	return svc
}

// match finds the route of a request, or a route whose handler answers 404 (unknown path) or 405 (a known
// path, another method).
func (svc *service) match(r *http.Request) (route, *call) {
	c := &call{r: r, query: r.URL.Query()}
	rest := ""
	for _, p := range svc.prefixes {
		if s, ok := strings.CutPrefix(r.URL.Path, p); ok {
			rest = s
			break
		}
	}
	c.segs = strings.Split(strings.Trim(rest, "/"), "/")
	shape := make([]string, len(c.segs))
	for i, s := range c.segs {
		shape[i] = s
		if i%2 == 1 {
			shape[i] = "{id}"
			c.ids = append(c.ids, s)
		}
	}
	key := strings.Join(shape, "/")
	if rt, ok := svc.routes[r.Method+" "+key]; ok && rest != "" {
		c.list = rt.list
		return rt, c
	}
	if svc.shapes[key] && rest != "" {
		return route{h: func(*call) (reply, error) {
			return reply{}, fail(http.StatusMethodNotAllowed, "the simulator does not serve %s %s", r.Method, key)
		}}, c
	}
	return route{h: func(*call) (reply, error) {
		return reply{}, fail(http.StatusNotFound, "The resource could not be found (the simulator serves no %s %s).", r.Method, r.URL.Path)
	}}, c
}

// fail is an error answered with status.
func fail(status int, format string, args ...any) error {
	return openstack.NewError("sim", openstack.KindUnknown, status, fmt.Sprintf(format, args...))
}

// bad is a 400 for input the services refuse, or that the simulator does not take.
func bad(format string, args ...any) error { return fail(http.StatusBadRequest, format, args...) }

// statusOf is the status and message an error is answered with: the fake's errors carry the status the real
// service answers with; anything else is a 500.
func statusOf(err error) (int, string) {
	var e *openstack.Error
	if errors.As(err, &e) && e.Status >= 400 {
		return e.Status, e.Detail
	}
	return http.StatusInternalServerError, err.Error()
}

// result is an answer ready to write.
type result struct {
	status int
	body   []byte
	// msg is the error's message, for the log.
	msg string
}

// run calls the handler, turning errors and panics into error answers.
func (svc *service) run(rt route, c *call) (res result) {
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprintf("the simulator failed: %v", p)
			res = result{status: http.StatusInternalServerError, body: mustJSON(svc.fault(http.StatusInternalServerError, msg)), msg: msg}
		}
	}()
	rep, err := rt.h(c)
	if err != nil {
		status, msg := statusOf(err)
		return result{status: status, body: mustJSON(svc.fault(status, msg)), msg: msg}
	}
	res = result{status: rep.status}
	if rep.body != nil {
		res.body = mustJSON(rep.body)
	}
	return res
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the simulator's own views always encode
	}
	return b
}

func (res result) write(w http.ResponseWriter) {
	if res.body != nil {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(res.status)
	if res.body != nil {
		_, _ = w.Write(res.body)
	}
}

// maxBody bounds a request body (a bulk of a few thousand ports).
const maxBody = 64 << 20

// fields reads the request body, a JSON object, by its top-level keys; keys must all be among allowed.
func (c *call) fields(allowed ...string) (map[string]json.RawMessage, error) {
	raw, err := io.ReadAll(io.LimitReader(c.r.Body, maxBody))
	if err != nil {
		return nil, bad("reading the body: %v", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, bad("Failed to parse request. Body is not a JSON object: %v", err)
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			return nil, bad("Unrecognized attribute(s) '%s'", k)
		}
	}
	return m, nil
}

// decode reads the body {key: {...}} into v, refusing attributes v does not have.
func (c *call) decode(key string, v any) error {
	m, err := c.fields(key)
	if err != nil {
		return err
	}
	raw, ok := m[key]
	if !ok {
		return bad("Resource body required: %q", key)
	}
	return strict(raw, v)
}

// strict decodes raw into v, refusing attributes v does not have.
func strict(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return bad("Invalid input: %v", err)
	}
	return nil
}

// link is a page link of a list (Neutron's and Octavia's <collection>_links).
type link struct {
	Rel  string `json:"rel"`
	Href string `json:"href"`
}

// page is the body of a list page: the objects under key, and a next link when more follow the last.
func (c *call) page(key string, items any, n int, more bool, lastID string) reply {
	c.items = n
	if fields := c.query["fields"]; len(fields) > 0 {
		items = only(items, fields)
	}
	body := map[string]any{key: items}
	if more {
		q := url.Values{}
		for k, v := range c.query {
			q[k] = v
		}
		q.Set("marker", lastID)
		scheme := "http"
		if c.r.TLS != nil {
			scheme = "https"
		}
		body[key+"_links"] = []link{{Rel: "next", Href: scheme + "://" + c.r.Host + c.r.URL.Path + "?" + q.Encode()}}
	}
	return ok(body)
}

// only keeps, of each of items (a slice of views), the attributes named in fields, as a list with fields does.
func only(items any, fields []string) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	if err := json.Unmarshal(mustJSON(items), &out); err != nil {
		panic(err) // the simulator's own views are JSON objects
	}
	for _, m := range out {
		for k := range m {
			if !slices.Contains(fields, k) {
				delete(m, k)
			}
		}
	}
	return out
}

// views maps fn over items.
func views[T, V any](items []T, fn func(T) V) []V {
	out := make([]V, 0, len(items))
	for _, x := range items {
		out = append(out, fn(x))
	}
	return out
}
