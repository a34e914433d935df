package openstack

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestTimeoutFor(t *testing.T) {
	for op, want := range map[string]time.Duration{
		"octavia loadbalancer create": slowCallTimeout, // a Service's whole graph in one request
		"octavia listener create":     callTimeout,
		"neutron port create":         callTimeout,
	} {
		if got := timeoutFor(op); got != want {
			t.Errorf("timeoutFor(%q) = %v, want %v", op, got, want)
		}
	}
}

// The meter's per-request deadline must last until the answer is read: an answer larger than the first
// read, written slowly, still arrives whole.
func TestMeterAnswerReadableAfterRoundTrip(t *testing.T) {
	body := strings.Repeat("x", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(50 * time.Millisecond)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	c := httpClient(nil, "", nil, &CallCounter{})
	resp, err := c.Get(srv.URL + "/v2.0/ports")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || len(got) != len(body) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(body))
	}
}
