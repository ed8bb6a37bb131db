package ipvs

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
)

// CompareServiceKeys orders services for Dump, Services and Table: address services before
// firewall-mark ones (by mark), then IPv4 before IPv6, protocol number, address, port.
// (ipvsadm's own order differs for addresses more than 2^31 apart, see the package doc.)
func CompareServiceKeys(a, b ServiceKey) int {
	return cmp.Or(
		cmp.Compare(a.FWMark, b.FWMark),
		cmp.Compare(keyFamily(a), keyFamily(b)),
		cmp.Compare(a.Protocol, b.Protocol),
		a.Addr.Compare(b.Addr),
		cmp.Compare(a.Port, b.Port),
	)
}

// keyFamily is the family of k, derived from the address unless k is a firewall mark.
func keyFamily(k ServiceKey) inet.Family {
	if k.FWMark != 0 {
		return k.Family
	}
	return inet.FamilyOf(k.Addr)
}

// CompareDestinations orders destinations within a service: IPv4 before IPv6, address, port.
func CompareDestinations(a, b Destination) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port))
}

// SortTable sorts services and the destinations of each.
func SortTable(t []Entry) {
	slices.SortFunc(t, func(a, b Entry) int { return CompareServiceKeys(a.Service.ServiceKey, b.Service.ServiceKey) })
	for _, e := range t {
		slices.SortFunc(e.Destinations, CompareDestinations)
	}
}

// FormatDump renders a table as the lines `ipvsadm -Sn` prints for it, one service line
// followed by its destination lines, sorted as CompareServiceKeys and CompareDestinations
// say (t itself is sorted in place). The one difference from ipvsadm: destination
// thresholds, which ipvsadm -S omits, are kept as " -x U -y L" when either is non-zero.
//
//	-A -t 10.0.0.1:80 -s rr -p 300 -M 255.255.255.0 -b flag-1
//	-a -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 1
func FormatDump(t []Entry) string {
	SortTable(t)
	var b strings.Builder
	for _, e := range t {
		svc := serviceSpec(e.Service.ServiceKey)
		b.WriteString(serviceRule(e.Service))
		b.WriteByte('\n')
		for _, d := range e.Destinations {
			b.WriteString(destinationRule(svc, d))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// serviceRule formats the `ipvsadm -Sn` line of one service ("-A ...").
func serviceRule(s Service) string {
	var b strings.Builder
	b.WriteString("-A ")
	b.WriteString(serviceSpec(s.ServiceKey))
	b.WriteString(" -s ")
	b.WriteString(s.Scheduler)
	if s.Flags&FlagPersistent != 0 {
		b.WriteString(" -p ")
		b.WriteString(strconv.FormatUint(uint64(s.Timeout), 10))
		if m := netmaskString(keyFamily(s.ServiceKey), s.Netmask); m != "" {
			b.WriteString(" -M ")
			b.WriteString(m)
		}
	}
	if s.PEName != "" {
		b.WriteString(" --pe ")
		b.WriteString(s.PEName)
	}
	if s.Flags&FlagOnePacket != 0 {
		b.WriteString(" -o")
	}
	if names := SchedulerFlagNames(s.Scheduler, s.Flags); len(names) > 0 {
		b.WriteString(" -b ")
		b.WriteString(strings.Join(names, ","))
	}
	return b.String()
}

// netmaskString formats a persistence netmask as ipvsadm does (dotted quad for IPv4,
// prefix length for IPv6), or "" when it is the full mask, which ipvsadm does not print.
func netmaskString(f inet.Family, mask uint32) string {
	if mask == FullNetmask(f) {
		return ""
	}
	if f == inet.IPv6 {
		return strconv.FormatUint(uint64(mask), 10)
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], mask)
	return netip.AddrFrom4(a).String()
}

// serviceSpec is the part of a rule naming the service: "-t 10.0.0.1:80", "-u [fd00::1]:53",
// "--sctp-service 10.0.0.1:9", "-f 100", "-f 100 -6".
func serviceSpec(k ServiceKey) string {
	if k.FWMark != 0 {
		s := "-f " + strconv.FormatUint(uint64(k.FWMark), 10)
		if keyFamily(k) == inet.IPv6 {
			s += " -6"
		}
		return s
	}
	var opt string
	switch k.Protocol {
	case inet.TCP:
		opt = "-t"
	case inet.UDP:
		opt = "-u"
	case inet.SCTP:
		opt = "--sctp-service"
	default:
		opt = "--protocol-" + strconv.Itoa(int(k.Protocol))
	}
	return opt + " " + netip.AddrPortFrom(k.Addr, k.Port).String()
}

func destinationRule(svc string, d Destination) string {
	var b strings.Builder
	b.WriteString("-a ")
	b.WriteString(svc)
	b.WriteString(" -r ")
	b.WriteString(d.AddrPort().String())
	switch d.Forward {
	case Masq:
		b.WriteString(" -m")
	case Tunnel:
		b.WriteString(" -i")
	case Local, Route:
		b.WriteString(" -g")
	default:
		b.WriteString(" -?")
	}
	b.WriteString(" -w ")
	b.WriteString(strconv.Itoa(d.Weight))
	if d.UpperThreshold != 0 || d.LowerThreshold != 0 {
		b.WriteString(" -x ")
		b.WriteString(strconv.FormatUint(uint64(d.UpperThreshold), 10))
		b.WriteString(" -y ")
		b.WriteString(strconv.FormatUint(uint64(d.LowerThreshold), 10))
	}
	if d.Forward == Tunnel {
		b.WriteString(" --tun-type ")
		b.WriteString(d.TunnelType.String())
		if d.TunnelType == TunnelGUE {
			b.WriteString(" --tun-port ")
			b.WriteString(strconv.FormatUint(uint64(d.TunnelPort), 10))
		}
		if d.TunnelType == TunnelGUE || d.TunnelType == TunnelGRE {
			switch d.TunnelFlags {
			case TunnelNoCsum:
				b.WriteString(" --tun-nocsum")
			case TunnelCsum:
				b.WriteString(" --tun-csum")
			case TunnelRemCsum:
				b.WriteString(" --tun-remcsum")
			}
		}
	}
	return b.String()
}
