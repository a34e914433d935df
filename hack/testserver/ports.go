package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// port is one port to serve on one protocol.
type port struct {
	Number int
	UDP    bool
}

func (p port) network() string {
	if p.UDP {
		return "udp"
	}
	return "tcp"
}

// String reads as a Kubernetes containerPort: "80/TCP".
func (p port) String() string { return fmt.Sprintf("%d/%s", p.Number, strings.ToUpper(p.network())) }

func portStrings(ports []port) []string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = p.String()
	}
	return out
}

// defaultPort is what every instance serves, on TCP and UDP: nginx's port, for the pods of tests that
// declare none.
const defaultPort = 80

// parsePorts reads SERVE_PORTS: comma-separated "N", "N/TCP" or "N/UDP", the protocol in any case, a bare
// N being TCP. Blank entries (a trailing comma) are skipped; anything else that is not a port is an error,
// so that a typo in a pod spec fails the pod at start instead of leaving a port silent.
func parsePorts(s string) ([]port, error) {
	var out []port
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		num, proto, _ := strings.Cut(f, "/")
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("%q: the port is not a number from 1 to 65535", f)
		}
		p := port{Number: n}
		switch strings.ToUpper(proto) {
		case "", "TCP":
		case "UDP":
			p.UDP = true
		default:
			return nil, fmt.Errorf("%q: the protocol is neither TCP nor UDP", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// withDefaultPorts adds port 80 on TCP and UDP, sorts (TCP first) and drops duplicates.
func withDefaultPorts(ports []port) []port {
	out := append(slices.Clone(ports), port{Number: defaultPort}, port{Number: defaultPort, UDP: true})
	slices.SortFunc(out, func(a, b port) int {
		if a.UDP != b.UDP {
			if a.UDP {
				return 1
			}
			return -1
		}
		return a.Number - b.Number
	})
	return slices.Compact(out)
}
