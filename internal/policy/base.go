package policy

import (
	"slices"
	"strings"
)

// The base groups: what a pod gets in a direction no policy isolates, and what an isolated pod keeps.
const (
	// BaseIngress opens ingress as the cluster pod group does for a pod no policy selects.
	BaseIngress = "base-ingress"
	// BaseEgress opens egress to anywhere.
	BaseEgress = "base-egress"
	// BaseInfra is what the cluster needs of an isolated pod: hairpin traffic a load balancer sends from its
	// VIP in, and the load balancers' health checks in. Nothing out: a Service is reached only where the
	// pod's egress rules admit its backends (AdmitServices).
	BaseInfra = "base-infra"
)

// Infra is the addresses the base groups admit.
type Infra struct {
	// ServiceCIDR is the service subnet: the VIPs.
	ServiceCIDR string
	// PodPrefixes are the pod subnet pool's prefixes.
	PodPrefixes []string
	// NodeCIDRs are further sources a pod no policy isolates for ingress admits (the nodes); an isolated pod
	// admits only its own node's addresses among them (AdmitOwnNodes).
	NodeCIDRs []string
	// HealthSources are the addresses the load balancers' health checks come from (the OVN provider's:
	// each pod network's network:distributed port).
	HealthSources []string
}

// BaseGroups are the three base groups for in.
func BaseGroups(in Infra) []Group {
	from := func(prefixes ...string) []Rule {
		var out []Rule
		for _, p := range prefixes {
			if p != "" {
				out = append(out, Rule{Direction: "ingress", RemoteIPPrefix: p})
			}
		}
		return out
	}
	var health []string
	for _, h := range in.HealthSources {
		if !strings.Contains(h, "/") {
			h += "/32"
		}
		health = append(health, h)
	}
	ingress := from(append(append(slices.Clone(in.PodPrefixes), in.ServiceCIDR), in.NodeCIDRs...)...)
	// Nodes are not in infra: an isolated pod admits its own node only, by the node's group (AdmitOwnNodes).
	infra := from(append([]string{in.ServiceCIDR}, health...)...)
	return []Group{
		{Key: BaseIngress, Description: "ingress of pods no NetworkPolicy isolates for ingress", Rules: dedupe(ingress)},
		{Key: BaseEgress, Description: "egress of pods no NetworkPolicy isolates for egress", Rules: []Rule{{Direction: "egress", RemoteIPPrefix: "0.0.0.0/0"}}},
		{Key: BaseInfra, Description: "what pods isolated by NetworkPolicy still need: load balancers, health checks", Rules: dedupe(infra)},
	}
}

// SecurityGroups are the groups of a pod's port, by ID: for a pod no policy isolates, the cluster's pod
// groups (unisolated) and the peer groups it belongs to; for an isolated pod, the infra group, the base group
// of each direction no policy isolates, and its policy and peer groups. missing are the keys of the groups an
// isolated pod needs that have no ID (not made yet, or refused by Neutron). groups are then the ones that
// exist, and never the unisolated ones: security groups only admit, so a pod with fewer of its groups is
// more closed than its policies say, never more open. An unisolated pod does not wait for a peer group: it
// joins it once it exists.
func SecurityGroups(m Membership, unisolated []string, ids map[string]string) (groups, missing []string) {
	keys := slices.Clone(m.Groups)
	isolated := m.IngressIsolated || m.EgressIsolated
	if !isolated {
		groups = slices.Clone(unisolated)
	} else {
		keys = append(keys, BaseInfra)
		if !m.IngressIsolated {
			keys = append(keys, BaseIngress)
		}
		if !m.EgressIsolated {
			keys = append(keys, BaseEgress)
		}
	}
	for _, k := range keys {
		id, found := ids[k]
		switch {
		case found:
			groups = append(groups, id)
		case isolated:
			missing = append(missing, k)
		}
	}
	slices.Sort(groups)
	slices.Sort(missing)
	return slices.Compact(groups), slices.Compact(missing)
}
