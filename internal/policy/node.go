package policy

import (
	"net/netip"
	"slices"
	"strings"
)

// nodePrefix starts the key of a node group.
const nodePrefix = "node-"

// NodeKey is the key of the group that admits a node's own traffic to the isolated pods bound to it.
func NodeKey(node string) string { return nodePrefix + hash36(node) }

// IsNodeKey says whether key is a node group's.
func IsNodeKey(key string) bool { return strings.HasPrefix(key, nodePrefix) }

// NodeAddresses are the addresses of a node the isolated pods on it admit: those of its reported addresses
// (InternalIP, ExternalIP) that lie in one of cidrs (neutron.podIngressCIDRs, the sources the operator says
// nodes' traffic comes from). None when cidrs is empty: then no node traffic is admitted.
func NodeAddresses(addresses, cidrs []string) []string {
	var out []string
	for _, a := range addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil || !addr.Is4() {
			continue
		}
		for _, c := range cidrs {
			if p, err := netip.ParsePrefix(c); err == nil && p.Contains(addr) {
				out = append(out, addr.String())
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// AdmitOwnNodes gives every isolated pod of pods bound to a node the group of that node, which admits traffic from
// and to the node's addresses (nodes: node name → NodeAddresses) and nothing else, as Kubernetes allows a
// pod's own node (kubelet probes) whatever its policies say. Security groups are shared by every port that
// carries them, so "its own node" takes one group per node that runs isolated pods; a node with no admitted
// address has none.
func AdmitOwnNodes(res *Result, pods []Pod, nodes map[string][]string) {
	nodeOf := make(map[string]string, len(pods))
	for _, p := range pods {
		nodeOf[p.Key()] = p.Node
	}
	for key, m := range res.Pods {
		if !m.IngressIsolated && !m.EgressIsolated {
			continue
		}
		node := nodeOf[key]
		if node == "" || len(nodes[node]) == 0 {
			continue
		}
		gk := NodeKey(node)
		if _, made := res.Groups[gk]; !made {
			var rules []Rule
			for _, a := range nodes[node] {
				rules = append(rules, Rule{Direction: "ingress", RemoteIPPrefix: a + "/32"}, Rule{Direction: "egress", RemoteIPPrefix: a + "/32"})
			}
			res.Groups[gk] = Group{Key: gk, Description: clip("the node " + node + ", for the isolated pods on it"), Rules: dedupe(rules)}
		}
		m.Groups = append(m.Groups, gk)
		slices.Sort(m.Groups)
		m.Groups = slices.Compact(m.Groups)
		res.Pods[key] = m
	}
}
