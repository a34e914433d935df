package openstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
)

// Kind classifies an OpenStack failure so that callers can decide without knowing gophercloud.
type Kind string

// The kinds of failure Raven tells apart.
const (
	KindNotFound     Kind = "NotFound"
	KindConflict     Kind = "Conflict"
	KindQuota        Kind = "QuotaExceeded"
	KindExhausted    Kind = "AddressesExhausted"
	KindBadRequest   Kind = "BadRequest"
	KindForbidden    Kind = "Forbidden"
	KindUnauthorized Kind = "Unauthorized"
	KindImmutable    Kind = "Immutable"   // Octavia: the object is PENDING_*
	KindUnsupported  Kind = "Unsupported" // Octavia's provider cannot do what was asked (501)
	KindServer       Kind = "ServerError"
	KindUnavailable  Kind = "Unavailable" // connection refused, timeout
	KindUnknown      Kind = "Unknown"
)

// Error is an OpenStack call that failed. Op names the call, e.g. "neutron port create".
type Error struct {
	Op     string
	Kind   Kind
	Status int
	Detail string
	Err    error
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%s: %s (%d): %s", e.Op, e.Kind, e.Status, e.Detail)
	}
	return fmt.Sprintf("%s: %v", e.Op, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// wrap classifies err; it returns nil for nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	e := &Error{Op: op, Kind: KindUnknown, Err: err}
	var code gophercloud.ErrUnexpectedResponseCode
	var netErr net.Error
	switch {
	case errors.As(err, &code):
		e.Status = code.Actual
		e.Detail = detail(code.Body)
		e.Kind = kindOf(code.Actual, string(code.Body))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		e.Kind = KindUnavailable
	case errors.As(err, &netErr):
		e.Kind = KindUnavailable
	case strings.Contains(err.Error(), "connection refused"):
		e.Kind = KindUnavailable
	}
	return e
}

func kindOf(status int, body string) Kind {
	switch {
	case status == http.StatusNotFound:
		return KindNotFound
	case status == http.StatusConflict:
		return conflictKind(body)
	case status == http.StatusForbidden && strings.Contains(body, "Quota"):
		return KindQuota
	case strings.Contains(body, "Insufficient prefix space"):
		// A full subnet pool: 400 in the API reference, 500 from the Neutron the stack runs.
		return KindExhausted
	case status == http.StatusBadRequest:
		if strings.Contains(body, "SubnetAllocationError") {
			return KindExhausted
		}
		return KindBadRequest
	case status == http.StatusUnauthorized:
		return KindUnauthorized
	case status == http.StatusForbidden:
		return KindForbidden
	case status == http.StatusNotImplemented:
		return KindUnsupported
	case status >= 500:
		return KindServer
	}
	return KindUnknown
}

// conflictKind tells what a 409 means from its body.
func conflictKind(body string) Kind {
	switch {
	case strings.Contains(body, "OverQuota"):
		return KindQuota
	case strings.Contains(body, "IpAddressGenerationFailure") || strings.Contains(body, "SubnetAllocationError") ||
		strings.Contains(body, "No more IP") || strings.Contains(body, "Insufficient prefix space"):
		return KindExhausted
	case strings.Contains(body, "mmutable") || strings.Contains(body, "Invalid state PENDING_"):
		return KindImmutable // Octavia 16 words it the second way for a load balancer delete
	}
	return KindConflict
}

// detail pulls the human message out of a Neutron or Octavia error body. A database error's SQL text and
// parameters are cut off: they say nothing to a Kubernetes user and can be long.
func detail(b []byte) string {
	s := strings.TrimSpace(string(b))
	for _, key := range []string{`"message": "`, `"message":"`, `"faultstring": "`, `"faultstring":"`, `"description": "`} {
		if i := strings.Index(s, key); i >= 0 {
			rest := s[i+len(key):]
			if j := strings.Index(rest, `"`); j >= 0 {
				s = rest[:j]
				break
			}
		}
	}
	for _, cut := range []string{`\n`, "\n", " [SQL:", " (Background on this error"} {
		if i := strings.Index(s, cut); i > 0 {
			s = s[:i]
		}
	}
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return strings.TrimSpace(s)
}

// KindOf returns the kind of an OpenStack error, or KindUnknown.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindUnknown
}

// Rejected says OpenStack refused the request itself (invalid, over quota, not supported by the
// provider): sending it again soon will not help, but other requests may still succeed.
func Rejected(err error) bool {
	switch KindOf(err) {
	case KindBadRequest, KindQuota, KindUnsupported:
		return true
	}
	return false
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return KindOf(err) == KindNotFound }

// IgnoreNotFound returns nil for a 404, err otherwise.
func IgnoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// NewError builds a classified error; the fake uses it to answer like OpenStack does.
func NewError(op string, kind Kind, status int, detail string) error {
	return &Error{Op: op, Kind: kind, Status: status, Detail: detail, Err: errors.New(detail)}
}
