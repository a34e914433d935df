package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/klog/v2"
)

// The marks live in the container's own file system, where `kubectl exec` writes them. Hung and serving are
// signals to the server, PID 1 of the container's PID namespace: it closes or reopens its sockets at once.
var unreadyMark = filepath.Join(os.TempDir(), "testserver-unready")

const (
	hangSignal   = syscall.SIGUSR1
	resumeSignal = syscall.SIGUSR2
)

// probeReady fails while the unready mark exists.
func probeReady() error {
	if _, err := os.Stat(unreadyMark); err == nil {
		return errors.New("marked unready")
	}
	return nil
}

// setMark switches the running server; see the package comment.
func setMark(mark string) error {
	switch mark {
	case "ready":
		if err := os.Remove(unreadyMark); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	case "unready":
		// The image has no /tmp of its own: an image built from binaries alone has only their paths.
		if err := os.MkdirAll(filepath.Dir(unreadyMark), 0o1777); err != nil {
			return err
		}
		return os.WriteFile(unreadyMark, nil, 0o644)
	case "hung":
		return syscall.Kill(1, hangSignal)
	case "serving":
		return syscall.Kill(1, resumeSignal)
	}
	return fmt.Errorf("unknown mark %q: ready, unready, hung or serving", mark)
}

// serveUntilDone serves ports until ctx ends; between hangSignal and resumeSignal its sockets are closed, so
// that connections are refused and datagrams go unanswered while the pod stays Ready.
func serveUntilDone(ctx context.Context, name string, ports []port) error {
	logger := klog.FromContext(ctx)
	switches := make(chan os.Signal, 4)
	signal.Notify(switches, hangSignal, resumeSignal)
	defer signal.Stop(switches)
	for {
		ls, err := listen(ports)
		if err != nil {
			return err
		}
		logger.Info("Serving", "name", name, "ports", portStrings(ports))
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ls.serve(sctx, name) }()
		if err := waitFor(ctx, switches, hangSignal, done); err != nil || ctx.Err() != nil {
			stop()
			return err
		}
		stop()
		if err := <-done; err != nil {
			return err
		}
		logger.Info("Hung: sockets closed until --mark=serving")
		if err := waitFor(ctx, switches, resumeSignal, nil); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// waitFor returns when want arrives (nil), ctx ends (nil), or done yields (its error); other signals are ignored.
func waitFor(ctx context.Context, switches <-chan os.Signal, want os.Signal, done <-chan error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			if err == nil {
				return errors.New("the server stopped")
			}
			return err
		case s := <-switches:
			if s == want {
				return nil
			}
		}
	}
}
