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
//
// They follow the filter backend the node runs (the daemon's state document says which;
// without it, what the node holds): with iptables the KUBE-* ipsets and chains, with
// nftables the nft program, the kernel release and modules its table needs, the tables ip
// kipvs and ip6 kipvs and their drift. What the other backend left is reported either way.
package doctor
