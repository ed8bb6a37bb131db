package inet

import (
	"net/netip"
	"strconv"
	"strings"
)

// ParseAddrSloppy parses an address as kube-proxy parses the Service and EndpointSlice
// fields it reads (k8s.io/utils/net.ParseIPSloppy): netip's grammar, and also IPv4 (alone,
// or at the end of an IPv6 address) with leading zeros in an octet, read as decimal
// ("010.096.000.010" is 10.96.0.10), which the apiserver accepts in those fields unless
// StrictIPCIDRValidation is on (off by default in v1.34). The address is returned as
// netip parses the canonical text (a zone kept, an IPv4-mapped address not unmapped).
func ParseAddrSloppy(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a, true
	}
	i := strings.LastIndexByte(s, ':') // -1 for IPv4
	v4, ok := canonicalIPv4(s[i+1:])
	if !ok {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s[:i+1] + v4)
	return a, err == nil
}

// ParsePrefixSloppy parses a CIDR as kube-proxy parses loadBalancerSourceRanges
// (k8s.io/utils/net.ParseCIDRSloppy): netip's grammar, and also leading zeros in IPv4
// octets and in the prefix length, read as decimal ("010.0.0.0/8" is 10.0.0.0/8).
func ParsePrefixSloppy(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p, true
	}
	addr, bits, ok := strings.Cut(s, "/")
	if !ok {
		return netip.Prefix{}, false
	}
	a, ok := ParseAddrSloppy(addr)
	if !ok || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	n, ok := decimal(bits, a.BitLen())
	if !ok {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, n), true
}

// canonicalIPv4 rewrites a dotted quad whose octets may have leading zeros without them.
func canonicalIPv4(s string) (string, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return "", false
	}
	out := make([]byte, 0, len(s))
	for i, p := range parts {
		n, ok := decimal(p, 255)
		if !ok {
			return "", false
		}
		if i > 0 {
			out = append(out, '.')
		}
		out = strconv.AppendInt(out, int64(n), 10)
	}
	return string(out), true
}

// decimal parses a non-empty string of decimal digits (leading zeros allowed) up to limit.
func decimal(s string, limit int) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
		if n > limit {
			return 0, false
		}
	}
	return n, true
}
