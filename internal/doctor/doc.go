// Package doctor is `kipvs doctor`: a read-only checkup of a node against the configuration
// kipvs runs with. Every check looks at the node through a View (NewRealView for the real
// node, fakes in tests) and yields one Result: a status, a one-line finding naming the
// exact object and value, and a one-line fix. Nothing is changed on the node.
//
// The checks cover what IPVS mode needs from the kernel (modules, sysctls, conntrack), the
// network around it (rp_filter with overlays, bridge netfilter and hairpin, routes to the
// Service CIDR), the seed-001 family of configuration mistakes (no local-traffic detector,
// a clusterCIDR that is the Service CIDR, a node address bound as a VIP), a FORWARD policy
// of DROP without kipvs's KUBE-FORWARD jump, and, when a kipvs daemon runs, drift between
// its desired state (its /debug/kipvs/state endpoint) and the kernel.
package doctor
