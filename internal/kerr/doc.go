// Package kerr holds the typed errors every kernel adapter (ipvs, ipset, netfilter, dummyif,
// sysctl, conntrack) returns, real and fake alike, so callers can test them with errors.Is
// whichever implementation is behind the interface.
package kerr
