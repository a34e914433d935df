// Command openstack-sim serves a simulated Neutron and Octavia (internal/openstack/sim) for Raven's scale
// benchmark. It prints one line of JSON, {"neutron": "http://…", "octavia": "http://…"}, once both listen, and
// serves until SIGTERM or SIGINT. Requests are logged on stderr only when answered with an error (other than 404).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/raven-net/raven/internal/openstack/sim"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	neutronAddr := flag.String("neutron-listen", "127.0.0.1:0", "Neutron's listen address")
	octaviaAddr := flag.String("octavia-listen", "127.0.0.1:0", "Octavia's listen address")
	modelPath := flag.String("model", "", "the latency model (JSON, see sim.Model); none: every request is answered at once")
	extNet := flag.String("external-network", "public", "name of the external network made at start (\"\": none)")
	extCIDR := flag.String("external-subnet", "172.24.4.0/24", "CIDR of the external network's subnet (floating IPs, router gateways)")
	flag.Parse()

	var model sim.Model
	if *modelPath != "" {
		m, err := sim.LoadModel(*modelPath)
		if err != nil {
			return err
		}
		model = m
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := sim.New(model)
	s.Log = log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds).Printf
	if *extNet != "" {
		if _, err := s.AddExternalNetwork(ctx, *extNet, *extCIDR); err != nil {
			return fmt.Errorf("external network: %w", err)
		}
	}
	nl, err := net.Listen("tcp", *neutronAddr)
	if err != nil {
		return err
	}
	ol, err := net.Listen("tcp", *octaviaAddr)
	if err != nil {
		return err
	}
	servers := []*http.Server{
		{Handler: s.Neutron(), ReadHeaderTimeout: 10 * time.Second},
		{Handler: s.Octavia(), ReadHeaderTimeout: 10 * time.Second},
	}
	errs := make(chan error, 2)
	for i, l := range []net.Listener{nl, ol} {
		go func() { errs <- servers[i].Serve(l) }()
	}
	line, _ := json.Marshal(map[string]string{"neutron": "http://" + nl.Addr().String(), "octavia": "http://" + ol.Addr().String()})
	fmt.Println(string(line))

	select {
	case <-ctx.Done():
	case err := <-errs:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return nil
}
