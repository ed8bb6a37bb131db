// Package inet declares the IP family and the transport protocol once, for every package:
// the pure layer (proxy), the reconciler and the kernel adapters (ipvs, ipset, netfilter,
// conntrack), each of which encodes them in its own wire or text format.
//
// It is a leaf: it imports only the standard library.
package inet
