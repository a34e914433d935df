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
//
// Tests switch a running server from inside its pod (kubectl exec), as faults a real container meets:
// --mark=unready makes --probe (an exec readiness probe) fail until --mark=ready; --mark=hung makes the
// server close its sockets while its pod stays Ready (a hung container no probe sees) until --mark=serving.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

func main() {
	fs := flag.NewFlagSet("testserver", flag.ExitOnError)
	pause := fs.Bool("pause", false, "be a pod sandbox's pause process: wait for SIGTERM or SIGINT, reaping zombie children")
	probe := fs.Bool("probe", false, "exit 1 while the server is marked unready, 0 otherwise (an exec readiness probe)")
	get := fs.String("get", "", "fetch this URL with HTTP GET, print the body and exit (a client inside a pod: kubectl exec POD -- /testserver --get http://IP/)")
	mark := fs.String("mark", "", "switch the running server: ready, unready (for --probe), hung (sockets closed) or serving")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])
	logger := klog.NewKlogr()

	switch {
	case *pause:
		runPause(logger)
		return
	case *probe:
		if err := probeReady(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	case *get != "":
		if err := httpGet(*get, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "testserver --get:", err)
			os.Exit(1)
		}
		return
	case *mark != "":
		if err := setMark(*mark); err != nil {
			fmt.Fprintln(os.Stderr, "testserver --mark:", err)
			os.Exit(1)
		}
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
	return serveUntilDone(ctx, name, ports)
}

// httpGet prints the body of a GET of url to w, failing on a status other than 200, within 10 s.
func httpGet(url string, w io.Writer) error {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
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
