// Command testserver is the workload of Raven's tests on real kubelets, and their pause image too: one
// static binary, so that a cluster without access to a public registry needs nothing it did not build.
//
// By default it answers with its name (env POD_NAME, else the hostname, which is a pod's name): on TCP and
// UDP port 80 and on every port listed in SERVE_PORTS ("8080,53/UDP,9000/tcp"; a bare number is TCP).
// A UDP datagram gets "name\n" back. A TCP connection whose first line is an HTTP request line gets an
// HTTP/1.1 200 response with "name\n" as its body, so that curl and wget work as they do against nginx;
// any other line, or none within a second, gets "name\n". Every connection is closed after its answer.
//
// With --pause it is a pod sandbox's pause process instead: it holds the sandbox's namespaces, reaps the
// zombies of a shared PID namespace, and exits 0 on SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

func main() {
	fs := flag.NewFlagSet("testserver", flag.ExitOnError)
	pause := fs.Bool("pause", false, "be a pod sandbox's pause process: wait for SIGTERM or SIGINT, reaping zombie children")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])
	logger := klog.NewKlogr()

	if *pause {
		runPause(logger)
		return
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	ctx = klog.NewContext(ctx, logger)
	if err := run(ctx); err != nil {
		logger.Error(err, "testserver failed")
		klog.Flush()
		cancel()
		os.Exit(1)
	}
	klog.Flush()
}

// run serves until ctx ends.
func run(ctx context.Context) error {
	name, err := serverName()
	if err != nil {
		return err
	}
	ports, err := parsePorts(os.Getenv("SERVE_PORTS"))
	if err != nil {
		return fmt.Errorf("SERVE_PORTS: %w", err)
	}
	ports = withDefaultPorts(ports)
	ls, err := listen(ports)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Serving", "name", name, "ports", portStrings(ports))
	return ls.serve(ctx, name)
}

// serverName is POD_NAME when the pod sets it, else the hostname, which the runtime sets to the pod's name.
func serverName() (string, error) {
	if n := os.Getenv("POD_NAME"); n != "" {
		return n, nil
	}
	n, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("no POD_NAME and no hostname: %w", err)
	}
	return n, nil
}
