package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/klog/v2"
)

const (
	// requestVerbosity is the -v level that logs each request.
	requestVerbosity = 2
	// shutdownWait bounds the wait for requests under way at SIGTERM.
	shutdownWait = 2 * time.Second
)

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:5000", "address to serve the registry on, plain HTTP")
	dir := fs.String("dir", "", "directory of image tarballs (*.tar) to serve")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	logger := klog.FromContext(ctx)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := startRegistry(ctx, ln)
	n, err := pushDir(ctx, *dir, ln.Addr().String())
	if err != nil {
		_ = srv.Close()
		return err
	}
	fmt.Println("ready")
	logger.Info("Registry ready", "addr", ln.Addr().String(), "tags", n, "dir", *dir)

	<-ctx.Done()
	logger.Info("Registry stopping")
	// Pulls under way get a moment to finish; a node retries one cut short.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownWait)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return srv.Close()
	}
	return nil
}

// startRegistry serves an empty in-memory registry on ln until the server is closed.
func startRegistry(ctx context.Context, ln net.Listener) *http.Server {
	logger := klog.FromContext(ctx)
	// The registry's own log would print every request on stderr; logRequests logs them at a verbosity.
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := &http.Server{Handler: logRequests(logger, reg), ReadHeaderTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Registry stopped")
		}
	}()
	return srv
}

// pushDir pushes every tag of every *.tar of dir to the registry at host, each at its mirrorPath, and
// returns how many tags it pushed.
func pushDir(ctx context.Context, dir, host string) (int, error) {
	tars, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return 0, err
	}
	if len(tars) == 0 {
		return 0, fmt.Errorf("no *.tar in %s", dir)
	}
	// Our own connections to the registry are closed once the images are in: idle ones would hold up
	// the server's graceful shutdown at SIGTERM.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	n := 0
	for _, p := range tars {
		pushed, err := pushTarball(ctx, p, host, tr)
		if err != nil {
			return n, fmt.Errorf("%s: %w", p, err)
		}
		n += pushed
	}
	return n, nil
}

func pushTarball(ctx context.Context, p, host string, tr http.RoundTripper) (int, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(p) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, desc := range m {
		for _, tag := range desc.RepoTags {
			if err := pushTag(ctx, opener, tag, host, tr); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

func pushTag(ctx context.Context, opener tarball.Opener, tag, host string, tr http.RoundTripper) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	img, err := tarball.Image(opener, &t)
	if err != nil {
		return fmt.Errorf("%s: %w", tag, err)
	}
	p, err := mirrorPath(tag)
	if err != nil {
		return err
	}
	dst, err := name.ParseReference(host+"/"+p, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(dst, img, remote.WithContext(ctx), remote.WithTransport(tr)); err != nil {
		return fmt.Errorf("pushing %s as %s: %w", tag, dst, err)
	}
	klog.FromContext(ctx).V(1).Info("Pushed", "image", tag, "as", dst.String())
	return nil
}

// logRequests logs each request's method, path and status at requestVerbosity.
func logRequests(logger klog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		logger.V(requestVerbosity).Info("Request", "method", r.Method, "path", r.URL.RequestURI(), "status", rec.status)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
