package octavia

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/raven-net/raven/internal/openstack"
)

// Provider is what Raven must know about an Octavia provider driver to ask it only for what it accepts.
type Provider struct {
	// Name is the provider Raven asks Octavia for ("amphora", "ovn").
	Name string
	// MakesVIPPort: the provider creates the VIP port itself from the subnet and address (the OVN provider
	// refuses a port made by someone else); otherwise Raven makes the port and hands it over.
	MakesVIPPort bool
	// FullyPopulated: a load balancer is created with its listeners, pools and members in one request.
	// Octavia 11's amphora provider leaves such a graph PENDING_CREATE for good, so it is built step by step.
	FullyPopulated bool
	// Balance and Sticky are the pool algorithms for a Service without and with ClientIP session affinity;
	// Sticky is empty when the provider has none, and the Service is then balanced with Balance.
	Balance, Sticky string
	// MonitorTypes is the health monitor type the provider has for each listener protocol.
	MonitorTypes map[string]string
	// Monitor is how every pool probes its members (nil: no health monitors). The provider's ProviderNamed
	// leaves it nil; the configuration sets it.
	Monitor *Monitor
	// MonitorSlowsMembers: with a monitor on the pool, each member the provider adds or removes costs it a
	// pass over every member of the pool (ovn-octavia-provider 3.0.0 maps each member's health-check source
	// again, with Neutron calls). Several member changes then go faster without the monitor, made again after.
	MonitorSlowsMembers bool
	// MonitorsFirst: a load balancer's health monitors go, one request each, before it does. ovn-octavia-provider
	// 8.0.0 (2025.1) makes a health-check port per member subnet (ovn-lb-hm-<subnet>, device owner
	// ovn-lb-hm:distributed) and deletes it when the subnet's last monitor goes; a cascade delete of a
	// load balancer with members fails on its way (handle_member_dvr finds no OVN load balancer) and leaves that
	// port, and so does removing the members first: the port then holds the namespace's subnet, which Raven cannot
	// delete. Its agent drops a verdict for a member it cannot find.
	MonitorsFirst bool
	// MembersFirst: the monitored pools of a load balancer lose their members before it goes (then MonitorsFirst
	// does not apply). Off by default, on with the configuration's octavia.deleteMembersFirst. ovn-octavia-provider
	// 3.0.0's agent may report a member's health-check verdict after a cascade delete has
	// removed its listener (a verdict it took from a service monitor that changed, or went, while the delete
	// waited in its queue); Octavia refuses that status, and the agent retries it for about 12 minutes (15
	// tries, backing off to 75 s) while every other event waits behind it: floating IPs on new VIPs are not
	// programmed, verdicts are not applied. Without members, the agent finds no member for a late verdict and
	// reports nothing. (Deleting the monitors first is not enough: the service monitors' own removal yields
	// verdicts, and these can still come after the delete.)
	MembersFirst bool
	// OneByOne: a member that goes is deleted with a request of its own, and new members come in a batch update
	// that removes none, while the members that go are no more than those that stay (oneChange). The OVN provider
	// turns a batch member update into one request per member in its single queue: the new members first (Octavia
	// passes them first), then an update for every member that stays, then the deletes (member_batch_update). On
	// 8.0.0 those updates cost little unless the batch removes a member; then each costs about 0.9 s, and the
	// removal waits for them all (`make bench-provider`, oneChange). A backend that turned unready left a 5-member
	// pool 11.4 s after a batch update, 0.17 s after a delete of its own (2026-11-28, TestServicesCarryTraffic).
	OneByOne bool
}

// Monitor is how a pool's health monitor probes: every Delay seconds (UDPConnectDelay for UDP-CONNECT, which
// Octavia holds to a minimum of its own), giving each probe Timeout seconds; MaxRetriesDown failed probes take a
// member out of the rotation, MaxRetries good ones bring it back.
type Monitor struct {
	Delay, UDPConnectDelay, Timeout, MaxRetries, MaxRetriesDown int
}

// providers are the providers Raven knows.
var providers = map[string]Provider{
	"amphora": {Name: "amphora", Balance: "ROUND_ROBIN", Sticky: "SOURCE_IP",
		MonitorTypes: map[string]string{"TCP": "TCP", "UDP": "UDP-CONNECT", "SCTP": "SCTP"}},
	// OVN load balancers hash the 5-tuple: SOURCE_IP_PORT is the one algorithm the provider accepts. Its
	// health checks are OVN service monitors: TCP and UDP only.
	"ovn": {Name: "ovn", MakesVIPPort: true, FullyPopulated: true, Balance: "SOURCE_IP_PORT", MonitorsFirst: true,
		OneByOne: true, MonitorTypes: map[string]string{"TCP": "TCP", "UDP": "UDP-CONNECT"}},
}

// ProviderNamed returns the provider called name, or an error listing the known ones.
func ProviderNamed(name string) (Provider, error) {
	p, ok := providers[name]
	if !ok {
		return Provider{}, fmt.Errorf("octavia provider %q is not supported: use amphora or ovn", name)
	}
	return p, nil
}

// algorithm is the pool algorithm for svc, and a problem when the provider cannot honour its affinity.
func (p Provider) algorithm(svc *corev1.Service) (string, string) {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return p.Balance, ""
	}
	if p.Sticky == "" {
		return p.Balance, fmt.Sprintf("sessionAffinity ClientIP: the %s provider has no source-IP algorithm; connections are balanced with %s", p.Name, p.Balance)
	}
	return p.Sticky, ""
}

// monitor is the health monitor of a listener's pool, or nil when there is none: monitors are off, or the
// provider has no type for the protocol (the pool then follows the endpoints' readiness alone).
func (p Provider) monitor(protocol string) *openstack.MonitorSpec {
	t, ok := p.MonitorTypes[protocol]
	if p.Monitor == nil || !ok {
		return nil
	}
	m := p.Monitor
	delay := m.Delay
	if t == "UDP-CONNECT" {
		delay = m.UDPConnectDelay
	}
	return &openstack.MonitorSpec{Type: t, Delay: delay, Timeout: m.Timeout, MaxRetries: m.MaxRetries, MaxRetriesDown: m.MaxRetriesDown}
}
