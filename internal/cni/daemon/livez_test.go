package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raven-net/raven/internal/cni/server"
)

// /livez follows the CNI socket: 200 while it answers, 503 with the reason once it does not.
func TestLivezFollowsTheCNISocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "cni.sock")
	l, err := server.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "bad request", http.StatusBadRequest) })}
	go func() { _ = srv.Serve(l) }()
	probe := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		livez(socket)(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/livez", nil))
		return rec
	}
	if rec := probe(); rec.Code != http.StatusOK {
		t.Fatalf("with the socket answering: %d %s, want 200", rec.Code, rec.Body)
	}
	_ = srv.Close()
	if rec := probe(); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), socket) {
		t.Fatalf("with the socket closed: %d %q, want 503 naming the socket", rec.Code, rec.Body)
	}
}
