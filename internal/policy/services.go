package policy

import (
	"net/netip"
	"slices"
	"strings"
)

// Service is what the translation needs of a Service: the addresses clients reach it by and, per port,
// the backends it balances to.
type Service struct {
	Namespace, Name string
	// Addresses are the addresses that lead to its load balancer (IPv4): its clusterIPs and the floating IPs
	// Raven made for it. Never an address its editor may merely write (externalIPs, status ingress IPs): the
	// Service's egress rules go to each of them.
	Addresses []string
	Ports     []ServicePort
}

// ServicePort is one port of a Service and the backends behind it: every one its load balancer may send to.
type ServicePort struct {
	// Protocol is "tcp", "udp" or "sctp".
	Protocol string
	Port     int
	Backends []Backend
}

// Backend is one endpoint of a Service port.
type Backend struct {
	// Pod is the pod's Key ("namespace/name"), "" for an endpoint that is no pod.
	Pod string
	IP  string
	// Port is the port the load balancer sends to on the backend (the targetPort's number).
	Port int
}

// AdmitServices lets an egress rule reach a backend through the Service in front of it: on ML2/OVN a pod's
// egress rules (from-lport ACLs) are judged before the load balancer's DNAT, on the address the client
// dialled. For every policy group with egress rules and every Service port whose backends that group's
// egress rules all admit (judged as Neutron would: by the backend's peer groups or address, protocol and
// target port), the group gets a rule to each of the Service's addresses on the Service's port. A Service
// port with a backend the group does not admit stays closed to it (the load balancer could send the
// connection there), as does one without backends. Costs one rule per (policy group with egress rules,
// Service port it admits, Service address).
func AdmitServices(res *Result, services []Service) {
	for key, g := range res.Groups {
		if !strings.HasPrefix(key, "np-") || !hasEgress(g.Rules) {
			continue
		}
		added := false
		for _, svc := range services {
			for _, sp := range svc.Ports {
				if !admitsAll(res, g.Rules, sp) {
					continue
				}
				for _, addr := range svc.Addresses {
					if egressAdmits(res, g.Rules, sp.Protocol, Backend{IP: addr, Port: sp.Port}) {
						continue // already open (a rule to anywhere, or a block that holds the address)
					}
					g.Rules = append(g.Rules, Rule{Direction: "egress", Protocol: sp.Protocol, PortMin: sp.Port, PortMax: sp.Port, RemoteIPPrefix: addr + "/32"})
					added = true
				}
			}
		}
		if added {
			g.Rules = dedupe(g.Rules)
			res.Groups[key] = g
		}
	}
}

func hasEgress(rules []Rule) bool {
	return slices.ContainsFunc(rules, func(r Rule) bool { return r.Direction == "egress" })
}

// admitsAll says whether rules admit every backend of sp (false without backends).
func admitsAll(res *Result, rules []Rule, sp ServicePort) bool {
	if len(sp.Backends) == 0 {
		return false
	}
	for _, b := range sp.Backends {
		if !egressAdmits(res, rules, sp.Protocol, b) {
			return false
		}
	}
	return true
}

// egressAdmits says whether one of rules lets a connection out to b on protocol, as Neutron evaluates a group.
func egressAdmits(res *Result, rules []Rule, protocol string, b Backend) bool {
	addr, err := netip.ParseAddr(b.IP)
	if err != nil {
		return false
	}
	for _, r := range rules {
		if r.Direction != "egress" || (r.Protocol != "" && r.Protocol != protocol) {
			continue
		}
		if r.PortMin != 0 && (b.Port < r.PortMin || b.Port > r.PortMax) {
			continue
		}
		switch {
		case r.RemoteGroup != "":
			if b.Pod != "" && slices.Contains(res.Pods[b.Pod].Groups, r.RemoteGroup) {
				return true
			}
		case r.RemoteIPPrefix != "":
			if p, err := netip.ParsePrefix(r.RemoteIPPrefix); err == nil && p.Contains(addr) {
				return true
			}
		}
	}
	return false
}
