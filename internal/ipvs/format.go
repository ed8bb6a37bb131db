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
// followed by its destination lines (SaveService, SaveDestination), sorted as
// CompareServiceKeys and CompareDestinations say (t itself is sorted in place; ipvsadm's
// order differs, see the package doc). Where it differs from ipvsadm: destination
// thresholds, which ipvsadm -S omits, are kept as " -x U -y L" when either is non-zero, and
// addresses are netip's text (SaveOptions).
//
//	-A -t 10.0.0.1:80 -s rr -p 300 -M 255.255.255.0 -b flag-1
//	-a -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 1
func FormatDump(t []Entry) string {
	SortTable(t)
	o := SaveOptions{Thresholds: true}
	var b strings.Builder
	for i := range t {
		e := &t[i]
		b.WriteString(SaveService(&e.Service, o))
		b.WriteByte('\n')
		for j := range e.Destinations {
			b.WriteString(SaveDestination(&e.Service, &e.Destinations[j], o))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// SaveOptions say where the lines of SaveService and SaveDestination depart from what
// `ipvsadm -Sn` 1.31 prints. The zero value departs only in the addresses' text.
type SaveOptions struct {
	// Thresholds keeps a destination's thresholds, which ipvsadm -S omits, as " -x U -y L"
	// after its weight when either is non-zero.
	Thresholds bool
	// AddrPort writes an address and port. nil: netip.AddrPort's text ("[fd00::1]:80"),
	// which for some IPv6 addresses is not ipvsadm's: netip writes ::1.2.3.4 as "::102:304",
	// glibc's inet_ntop as "::1.2.3.4".
	AddrPort func(netip.Addr, uint16) string
}

func (o SaveOptions) addrPort(a netip.Addr, port uint16) string {
	if o.AddrPort != nil {
		return o.AddrPort(a, port)
	}
	return netip.AddrPortFrom(a, port).String()
}

// anySchedFlag is every scheduler flag.
const anySchedFlag = FlagSched1 | FlagSched2 | FlagSched3

// SaveService is the `ipvsadm -Sn` line of service s, without its newline:
// "-A -t 10.0.0.1:80 -s rr -p 300 -M 255.255.255.0". As ipvsadm, it writes " -b " when a
// scheduler flag is set even if none of the set flags has a name for s's scheduler.
func SaveService(s *Service, o SaveOptions) string {
	var b strings.Builder
	b.WriteString("-A ")
	b.WriteString(serviceSpec(s.ServiceKey, o))
	b.WriteString(" -s ")
	b.WriteString(s.Scheduler)
	if s.Flags&FlagPersistent != 0 {
		b.WriteString(" -p ")
		b.WriteString(strconv.FormatUint(uint64(s.Timeout), 10))
		if m := PersistenceNetmask(s); m != "" {
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
	if s.Flags&anySchedFlag != 0 {
		b.WriteString(" -b ")
		b.WriteString(strings.Join(SchedulerFlagNames(s.Scheduler, s.Flags), ","))
	}
	return b.String()
}

// PersistenceNetmask is s's persistence netmask as ipvsadm prints it (a dotted quad for
// IPv4, a prefix length for IPv6, printed as a C int), or "" when it is the full mask,
// which ipvsadm does not print.
func PersistenceNetmask(s *Service) string {
	f := keyFamily(s.ServiceKey)
	if s.Netmask == FullNetmask(f) {
		return ""
	}
	if f == inet.IPv6 {
		return strconv.Itoa(int(int32(s.Netmask)))
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], s.Netmask)
	return netip.AddrFrom4(a).String()
}

// serviceSpec is the part of a rule naming the service: "-t 10.0.0.1:80", "-u [fd00::1]:53",
// "--sctp-service 10.0.0.1:9", "-f 100", "-f 100 -6". As ipvsadm, it prints a mark as a C
// int ("-f -1294967296" for 3000000000) and "--xxx-service" for a protocol it has no
// option for.
func serviceSpec(k ServiceKey, o SaveOptions) string {
	if k.FWMark != 0 {
		s := "-f " + strconv.Itoa(int(int32(k.FWMark)))
		if keyFamily(k) == inet.IPv6 {
			s += " -6"
		}
		return s
	}
	opt := "--xxx-service"
	switch k.Protocol {
	case inet.TCP:
		opt = "-t"
	case inet.UDP:
		opt = "-u"
	case inet.SCTP:
		opt = "--sctp-service"
	}
	return opt + " " + o.addrPort(k.Addr, k.Port)
}

// SaveDestination is the `ipvsadm -Sn` line of destination d of service s, without its
// newline: "-a -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 1". As ipvsadm, it writes "(null)"
// for a forwarding method or tunnel checksum flags it has no option for.
func SaveDestination(s *Service, d *Destination, o SaveOptions) string {
	var b strings.Builder
	b.WriteString("-a ")
	b.WriteString(serviceSpec(s.ServiceKey, o))
	b.WriteString(" -r ")
	b.WriteString(o.addrPort(d.Addr, d.Port))
	b.WriteByte(' ')
	b.WriteString(forwardSwitch(d.Forward))
	b.WriteString(" -w ")
	b.WriteString(strconv.Itoa(d.Weight))
	if o.Thresholds && (d.UpperThreshold != 0 || d.LowerThreshold != 0) {
		b.WriteString(" -x ")
		b.WriteString(strconv.FormatUint(uint64(d.UpperThreshold), 10))
		b.WriteString(" -y ")
		b.WriteString(strconv.FormatUint(uint64(d.LowerThreshold), 10))
	}
	if d.Forward&7 != Tunnel {
		return b.String()
	}
	switch d.TunnelType {
	case TunnelIPIP:
		b.WriteString(" --tun-type ipip")
	case TunnelGUE:
		b.WriteString(" --tun-type gue --tun-port ")
		b.WriteString(strconv.FormatUint(uint64(d.TunnelPort), 10))
		b.WriteByte(' ')
		b.WriteString(tunnelFlagsOption(d.TunnelFlags))
	case TunnelGRE:
		b.WriteString(" --tun-type gre ")
		b.WriteString(tunnelFlagsOption(d.TunnelFlags))
	}
	return b.String()
}

// forwardSwitch is ipvsadm's fwd_switch: the option of a forwarding method.
func forwardSwitch(m ForwardMethod) string {
	switch m & 7 {
	case Masq:
		return "-m"
	case Tunnel:
		return "-i"
	case Local, Route:
		return "-g"
	}
	return "(null)"
}

// tunnelFlagsOption is the option of a GUE or GRE tunnel's checksum flags.
func tunnelFlagsOption(f TunnelFlags) string {
	switch f {
	case TunnelNoCsum:
		return "--tun-nocsum"
	case TunnelCsum:
		return "--tun-csum"
	case TunnelRemCsum:
		return "--tun-remcsum"
	}
	return "(null)"
}
