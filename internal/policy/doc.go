// Package policy translates Kubernetes NetworkPolicies into Neutron security groups, purely: no I/O.
//
// Every policy becomes one group holding its rules, and every distinct peer selector (namespaceSelector
// and podSelector of a from/to entry) one rule-less peer group whose members are the pods it selects; a
// rule names its peer by remote group (ML2/OVN turns that into an address set), an ipBlock by prefixes
// (the block minus its excepts, a true set difference). The number of rules therefore grows with the
// policies' rules, peers and ports, never with the pods. Translate also says which pods each policy
// isolates in which direction, so that the caller gives a pod the groups of every policy that selects it,
// the peer groups it belongs to, and open ingress or egress where no policy isolates it.
package policy
