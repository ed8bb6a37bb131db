package proxy

import "strings"

// NodeSpecific reports whether a Problem depends on facts of the node that found it (its
// addresses, its kernel, its sets, how it reaches the apiserver), so another node may not
// have it or may word it differently. Every other Problem is Service-wide: it follows from
// the Service, its EndpointSlices and the cluster (the Service CIDRs) alone, so every node
// with the same configuration finds the same one, and one node's Event says it for all
// (the daemon elects that node per Service).
//
// A reason this function does not know is node-specific: every node that finds it reports
// it, which is never less than an operator needs (TestEveryReasonHasAScope keeps the list
// complete).
func NodeSpecific(p Problem) bool {
	scope, known := reasonScope(p.Reason)
	if !known {
		return true
	}
	if p.Reason == reasonVirtualServerConflict {
		// A NodePort claim's virtual servers are on this node's addresses.
		return strings.HasPrefix(p.Field, kindNodePort.field())
	}
	return scope == nodeScope
}

type problemScope int

const (
	serviceScope problemScope = iota
	nodeScope
)

const reasonVirtualServerConflict = "VirtualServerConflict"

// reasonScope is the scope of every reason package proxy gives a Problem (known: false for
// any other).
func reasonScope(reason string) (scope problemScope, known bool) {
	switch reason {
	case "ClusterIPIsNodeAddress", "ExternalIPIsNodeAddress", "LoadBalancerIPIsNodeAddress", // the node's own addresses
		"ExternalIPIsAPIServer", "LoadBalancerIPIsAPIServer", // the apiserver's address as this node reaches it
		"ExternalIPOnNodeLink", "LoadBalancerIPOnNodeLink", // this node's links and gateways
		"ExternalIPInPodCIDR", "LoadBalancerIPInPodCIDR", // the cluster CIDRs, and this Node's pod CIDRs
		"SchedulerUnavailable",                                // this node's kernel modules
		ReasonTooManySetMembers,                               // the members include this node's local endpoints
		ReasonTooManyRealServers, ReasonTooManyVirtualServers, // node ports on this node's addresses, its local endpoints
		ReasonSetCapacityExceeded, ReasonRealServerCapacityExceeded: // this node's tables, filled in its own order
		return nodeScope, true
	case reasonVirtualServerConflict, // which claim wins follows from the Services alone
		// From the Service and its EndpointSlices alone.
		"InvalidServiceType", "InvalidSessionAffinity", "InvalidSessionAffinityTimeout", "InvalidTrafficPolicy",
		"InvalidPortName", "InvalidPort", "UnsupportedProtocol", "DuplicatePort",
		"InvalidClusterIP", "UnusableClusterIP", "InvalidIPFamilies",
		"InvalidExternalIP", "UnusableExternalIP", "InvalidLoadBalancerIP", "UnusableLoadBalancerIP",
		"InvalidEndpointAddress", "UnusableEndpointAddress",
		"UnknownScheduler", "InvalidSchedulerFlag", "InvalidSourceRange",
		// From the cluster's Service CIDRs and the configuration (the DaemonSet's one
		// ConfigMap: the same on every node).
		"ExternalIPInServiceCIDR", "LoadBalancerIPInServiceCIDR", "ExternalIPNotAllowed", "LoadBalancerIPNotAllowed":
		return serviceScope, true
	}
	return nodeScope, false
}
