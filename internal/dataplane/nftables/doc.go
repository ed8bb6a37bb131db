// Package nftables is the dataplane.Filter of kipvs's nftables filter backend: IPVS does the
// load balancing as with the iptables backend, and everything kube-proxy's IPVS mode does
// with iptables rules and ipsets is done in one nf_tables table per family that kipvs owns
// whole, "ip kipvs" and "ip6 kipvs" (package nft), with one named set per proxy.Set and
// rules that make the same decisions as the iptables backend's.
package nftables
