package inet

import (
	"net/netip"
	"strconv"
)

// Family is an IP family; kipvs runs one independent proxier per family.
type Family uint8

// The families. The zero Family is none (an invalid address, a set type without a family).
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// String returns "IPv4", "IPv6" or "Family(N)".
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return "Family(" + strconv.Itoa(int(f)) + ")"
}

// Matches reports whether a belongs to the family (an IPv4-mapped IPv6 address is IPv4).
func (f Family) Matches(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && (a.Is4() == (f == IPv4))
}

// FamilyOf returns the family of a (IPv4 also for IPv4-mapped IPv6 addresses), 0 if a is
// invalid.
func FamilyOf(a netip.Addr) Family {
	switch {
	case !a.IsValid():
		return 0
	case a.Unmap().Is4():
		return IPv4
	}
	return IPv6
}

// Protocol is an IP protocol number (IANA, as the kernel uses them).
type Protocol uint8

// The protocols a proxy serves and cleans up after, and the ICMP ones a conntrack listing
// may show.
const (
	ICMP   Protocol = 1
	TCP    Protocol = 6
	UDP    Protocol = 17
	ICMPv6 Protocol = 58
	SCTP   Protocol = 132
)

// String returns the name in lower case, as iptables, ipset and conntrack(8) write it
// ("tcp", "icmpv6"), or "proto-N".
func (p Protocol) String() string {
	switch p {
	case ICMP:
		return "icmp"
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case ICMPv6:
		return "icmpv6"
	case SCTP:
		return "sctp"
	}
	return "proto-" + strconv.Itoa(int(p))
}

// Name returns the name in upper case, as Kubernetes and ipvsadm write it ("TCP",
// "ICMPv6"), or "proto-N".
func (p Protocol) Name() string {
	switch p {
	case ICMP:
		return "ICMP"
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	case ICMPv6:
		return "ICMPv6"
	case SCTP:
		return "SCTP"
	}
	return "proto-" + strconv.Itoa(int(p))
}

// HasPorts reports whether flows of the protocol are keyed by ports.
func (p Protocol) HasPorts() bool {
	switch p {
	case TCP, UDP, SCTP, 33 /* DCCP */, 136 /* UDP-Lite */ :
		return true
	}
	return false
}
