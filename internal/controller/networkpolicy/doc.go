// Package networkpolicy keeps Neutron's security groups in step with the cluster's NetworkPolicies. One
// reconcile covers the whole cluster: it translates every policy (internal/policy), makes the groups and
// rules Neutron lacks, gives every pod's port the groups it should carry, and deletes the groups nothing
// wants. State hands the pod controller the groups of a new pod, so that a pod's port carries its policies
// before the pod's annotation lets the CNI plug it.
package networkpolicy
