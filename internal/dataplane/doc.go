// Package dataplane is the seam between the reconciler and a packet-filter backend. Package
// proxy states what the filter must do as typed values: the members of the sets traffic is
// matched against (proxy.Member) and the facts the rules depend on (proxy.Filter). A Filter
// renders them into one backend's objects and reads them back; the reconciler (package
// reconcile) decides what changes and in which order, and never sees the backend's syntax.
//
// internal/dataplane/iptables is the backend kipvs runs: ipsets and iptables rules named as
// upstream kube-proxy's IPVS mode names them, so the two can replace each other on a node.
// docs/development.md sketches a native nftables backend behind the same interface.
package dataplane
