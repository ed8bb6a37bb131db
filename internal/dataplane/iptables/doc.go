// Package iptables is kipvs's packet-filter dataplane (see internal/dataplane): the sets are
// ipsets and the rules iptables rules, named, typed and written as upstream kube-proxy's IPVS
// mode does, through the ipset and netfilter adapters.
package iptables
