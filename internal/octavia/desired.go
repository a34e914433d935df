package octavia

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/raven-net/raven/internal/openstack"
)

// Listener is one desired listener with its pool and members.
type Listener struct {
	Name      string
	Protocol  string
	Port      int
	Algorithm string
	Members   []openstack.MemberSpec
	// Monitor is the pool's health monitor (its PoolID, Name and Tags are set when it is created); nil for none.
	Monitor *openstack.MonitorSpec
	// MonitorSlowsMembers: see Provider.MonitorSlowsMembers.
	MonitorSlowsMembers bool
	// OneByOne: see Provider.OneByOne.
	OneByOne bool
}

// Key identifies a listener within a load balancer.
func (l Listener) Key() string { return l.Protocol + ":" + strconv.Itoa(l.Port) }

// PoolName names the listener's pool: unique within the load balancer (a fully populated create refuses two
// pools of one name, and a TCP and a UDP port may share a number).
func (l Listener) PoolName() string { return l.Name + "/" + strings.ToLower(l.Protocol) }

// SupportedProtocol maps a Service port protocol to Octavia's; ok is false for what Octavia cannot serve.
func SupportedProtocol(p corev1.Protocol) (string, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return "TCP", true
	case corev1.ProtocolUDP:
		return "UDP", true
	case corev1.ProtocolSCTP:
		return "SCTP", true
	}
	return "", false
}

// Desired returns the listeners a Service needs, and a problem description for each port that cannot be
// served (or served otherwise than asked). subnetFor names the Neutron subnet of a member address ("" lets
// Octavia use the VIP subnet); prov says which algorithms the provider has.
func Desired(svc *corev1.Service, endpointSlices []discoveryv1.EndpointSlice, subnetFor func(ip string) string, prov Provider) ([]Listener, []string) {
	algorithm, problem := prov.algorithm(svc)
	var out []Listener
	var problems []string
	if problem != "" {
		problems = append(problems, problem)
	}
	for _, sp := range svc.Spec.Ports {
		proto, ok := SupportedProtocol(sp.Protocol)
		if !ok {
			problems = append(problems, fmt.Sprintf("port %d: protocol %s is not supported by Octavia", sp.Port, sp.Protocol))
			continue
		}
		l := Listener{Name: listenerName(svc, sp), Protocol: proto, Port: int(sp.Port), Algorithm: algorithm, Monitor: prov.monitor(proto)}
		l.MonitorSlowsMembers = prov.MonitorSlowsMembers && l.Monitor != nil
		l.OneByOne = prov.OneByOne
		l.Members = members(endpointSlices, sp, subnetFor)
		out = append(out, l)
	}
	return out, problems
}

func listenerName(svc *corev1.Service, sp corev1.ServicePort) string {
	name := svc.Namespace + "/" + svc.Name + ":" + strconv.Itoa(int(sp.Port))
	if len(name) > 255 {
		name = name[:255]
	}
	return name
}

// Endpoint is one ready IPv4 endpoint of a Service port: its address, the port the load balancer sends to
// on it, and the object behind it (nil when none).
type Endpoint struct {
	Address   string
	Port      int
	TargetRef *corev1.ObjectReference
}

// ReadyEndpoints lists the ready IPv4 endpoints of one Service port (what become its pool's members), without
// duplicates, in the slices' order.
func ReadyEndpoints(endpointSlices []discoveryv1.EndpointSlice, sp corev1.ServicePort) []Endpoint {
	seen := map[string]bool{}
	var out []Endpoint
	for _, es := range endpointSlices {
		if es.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port := -1
		for _, p := range es.Ports {
			if p.Name != nil && *p.Name == sp.Name && p.Port != nil {
				port = int(*p.Port)
			}
		}
		if port < 0 {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				key := addr + ":" + strconv.Itoa(port)
				if seen[key] {
					continue
				}
				seen[key] = true
				out = append(out, Endpoint{Address: addr, Port: port, TargetRef: ep.TargetRef})
			}
		}
	}
	return out
}

// members lists the ready endpoints of one service port as members, sorted.
func members(endpointSlices []discoveryv1.EndpointSlice, sp corev1.ServicePort, subnetFor func(string) string) []openstack.MemberSpec {
	var out []openstack.MemberSpec
	for _, e := range ReadyEndpoints(endpointSlices, sp) {
		m := openstack.MemberSpec{Address: e.Address, ProtocolPort: e.Port, SubnetID: subnetFor(e.Address)}
		if e.TargetRef != nil {
			m.Name = e.TargetRef.Name
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b openstack.MemberSpec) int {
		return strings.Compare(addrPort(a.Address, a.ProtocolPort), addrPort(b.Address, b.ProtocolPort))
	})
	return out
}
