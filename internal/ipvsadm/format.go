package ipvsadm

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// Snapshot is the kernel state a listing renders: IPVS info and the services with their
// destinations in the kernel's dump order (the order ipvsadm reads before it sorts).
type Snapshot struct {
	Info    ipvs.Info
	Entries []ipvs.Entry
	// Single is set for a one-service listing (-L -t ...): no header line.
	Single bool
}

// Owner is a Kubernetes Service port a virtual server was programmed for (--services).
type Owner struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Port      string `json:"port,omitempty"`
	Kind      string `json:"kind,omitempty"`
}

// String is "namespace/name:port".
func (o Owner) String() string {
	s := o.Namespace + "/" + o.Name
	if o.Port != "" {
		s += ":" + o.Port
	}
	return s
}

// Owners maps virtual servers (normalized keys) to their owners.
type Owners map[ipvs.ServiceKey][]Owner

// WriteList renders a listing (-L in any of its formats, or -S) byte for byte as
// `ipvsadm -n` 1.31 prints it. owners, when not nil, appends "  # ns/name:port" to each
// service line (the kipvs --services extra; not ipvsadm output).
func WriteList(w io.Writer, o Options, s Snapshot, owners Owners) error {
	bw := bufio.NewWriter(w)
	entries := append([]ipvs.Entry(nil), s.Entries...)
	if o.Command != Save && !s.Single {
		v := s.Info.Version
		fmt.Fprintf(bw, "IP Virtual Server version %d.%d.%d (size=%d)\n", v>>16&0xff, v>>8&0xff, v&0xff, int32(s.Info.ConnTableSize))
	}
	if !o.NoSort && !s.Single {
		ipvsadmSortServices(entries)
	}
	writeTitle(bw, o)
	for i := range entries {
		e := &entries[i]
		writeService(bw, o, &e.Service, owners)
		dests := append([]ipvs.Destination(nil), e.Destinations...)
		if !o.NoSort {
			ipvsadmSortDests(dests)
		}
		for j := range dests {
			writeDest(bw, o, &e.Service, &dests[j])
		}
	}
	return bw.Flush()
}

func writeTitle(w *bufio.Writer, o Options) {
	switch {
	case o.Command == Save:
	case o.Stats:
		fmt.Fprintf(w, "%-33s %8s %8s %8s %8s %8s\n  -> RemoteAddress:Port\n",
			"Prot LocalAddress:Port", "Conns", "InPkts", "OutPkts", "InBytes", "OutBytes")
	case o.Rate:
		fmt.Fprintf(w, "%-33s %8s %8s %8s %8s %8s\n  -> RemoteAddress:Port\n",
			"Prot LocalAddress:Port", "CPS", "InPPS", "OutPPS", "InBPS", "OutBPS")
	case o.Thresholds:
		fmt.Fprintf(w, "%-33s %-10s %-10s %-10s %-10s\n  -> RemoteAddress:Port\n",
			"Prot LocalAddress:Port", "Uthreshold", "Lthreshold", "ActiveConn", "InActConn")
	case o.PersistentConn:
		fmt.Fprintf(w, "%-33s %-9s %-11s %-10s %-10s\n  -> RemoteAddress:Port\n",
			"Prot LocalAddress:Port", "Weight", "PersistConn", "ActiveConn", "InActConn")
	case o.TunInfo:
		w.WriteString("Prot LocalAddress:Port Scheduler Flags\n" +
			"  -> RemoteAddress:Port           Forward TunnelInfo    Weight ActiveConn InActConn\n")
	default:
		w.WriteString("Prot LocalAddress:Port Scheduler Flags\n" +
			"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	}
}

// addrPort is ipvsadm's numeric addrport_to_anyname: "a.b.c.d:port" or "[v6]:port".
func addrPort(a netip.Addr, port uint16) string {
	if a.Is4() {
		return a.String() + ":" + strconv.Itoa(int(port))
	}
	return "[" + inetNtop6(a.As16()) + "]:" + strconv.Itoa(int(port))
}

// protocolName is ipvsadm's protocol_name.
func protocolName(p inet.Protocol) string {
	switch p {
	case inet.TCP, inet.UDP, inet.SCTP:
		return p.Name()
	}
	return "?"
}

// serviceName is ipvsadm's svc_name for a listing: "TCP  10.0.0.1:80", "FWM  5 IPv6" (-S
// names services as ipvs.SaveService does).
func serviceName(s *ipvs.Service) string {
	if s.FWMark != 0 {
		m := int32(s.FWMark) // printed with %d
		if s.Family == inet.IPv6 {
			return fmt.Sprintf("FWM  %d IPv6", m)
		}
		return fmt.Sprintf("FWM  %d", m)
	}
	name := fmt.Sprintf("%-4s %s", protocolName(s.Protocol), addrPort(s.Addr, s.Port))
	if s.Family != inet.IPv6 && len(name) > 33 {
		name = name[:33]
	}
	return name
}

// schedFlags is ipvsadm's print_sched_flags: the names of the scheduler flags, comma
// separated ("" when the set flags have no name for this scheduler).
func schedFlags(s *ipvs.Service) string {
	return strings.Join(ipvs.SchedulerFlagNames(s.Scheduler, s.Flags), ",")
}

const anySchedFlag = ipvs.FlagSched1 | ipvs.FlagSched2 | ipvs.FlagSched3

// saveOptions make ipvs.SaveService and ipvs.SaveDestination write ipvsadm's lines: the
// addresses in glibc's text.
func saveOptions() ipvs.SaveOptions { return ipvs.SaveOptions{AddrPort: addrPort} }

func writeService(w *bufio.Writer, o Options, s *ipvs.Service, owners Owners) {
	name := serviceName(s)
	switch {
	case o.Command == Save:
		w.WriteString(ipvs.SaveService(s, saveOptions()))
	case o.Stats:
		fmt.Fprintf(w, "%-33s", name)
		st := ipvs.StatsOf(s.Stats)
		for _, v := range []uint64{st.Conns, st.InPkts, st.OutPkts, st.InBytes, st.OutBytes} {
			largeNum(w, v, o.Exact)
		}
	case o.Rate:
		fmt.Fprintf(w, "%-33s", name)
		st := ipvs.StatsOf(s.Stats)
		for _, v := range []uint64{st.CPS, st.InPPS, st.OutPPS, st.InBPS, st.OutBPS} {
			largeNum(w, v, o.Exact)
		}
	default:
		fmt.Fprintf(w, "%s %s", name, s.Scheduler)
		if s.Flags&anySchedFlag != 0 {
			w.WriteString(" (")
			w.WriteString(schedFlags(s))
			w.WriteString(")")
		}
		if s.Flags&ipvs.FlagPersistent != 0 {
			fmt.Fprintf(w, " persistent %d", s.Timeout)
			if m := ipvs.PersistenceNetmask(s); m != "" {
				w.WriteString(" mask ")
				w.WriteString(m)
			}
			if s.PEName != "" {
				fmt.Fprintf(w, " pe %s", s.PEName)
			}
		}
		if s.Flags&ipvs.FlagOnePacket != 0 {
			w.WriteString(" ops")
		}
	}
	if owners != nil {
		if list := owners[ownerKey(s.ServiceKey)]; len(list) > 0 {
			names := make([]string, len(list))
			for i, ow := range list {
				names[i] = ow.String()
			}
			w.WriteString("  # ")
			w.WriteString(strings.Join(names, ", "))
		}
	}
	w.WriteByte('\n')
}

// fwdName is ipvsadm's fwd_name ("(null)" is what glibc's printf prints for an unknown one).
func fwdName(m ipvs.ForwardMethod) string {
	switch m & 7 {
	case ipvs.Masq, ipvs.Local, ipvs.Tunnel, ipvs.Route:
		return (m & 7).String()
	}
	return "(null)"
}

// tunFlag is the name of a tunnel's checksum flags in --tun-info.
func tunFlag(f ipvs.TunnelFlags) string {
	if names := [...]string{"-c", "+c", "r+c"}; int(f) < len(names) {
		return names[f]
	}
	return "(null)"
}

// tunInfo is ipvsadm's fwd_tun_info ("" when it has none: the caller prints "n/a").
func tunInfo(d *ipvs.Destination) string {
	if d.Forward&7 != ipvs.Tunnel {
		return ""
	}
	var s string
	switch d.TunnelType {
	case ipvs.TunnelIPIP:
		s = "ipip"
	case ipvs.TunnelGUE:
		s = fmt.Sprintf("gue:%d:%s", d.TunnelPort, tunFlag(d.TunnelFlags))
	case ipvs.TunnelGRE:
		s = "gre:" + tunFlag(d.TunnelFlags)
	default:
		return ""
	}
	if len(s) > 15 { // snprintf into 16 bytes
		s = s[:15]
	}
	return s
}

func writeDest(w *bufio.Writer, o Options, s *ipvs.Service, d *ipvs.Destination) {
	dname := addrPort(d.Addr, d.Port)
	v6 := inet.FamilyOf(d.Addr) == inet.IPv6
	if o.Command != Save && !v6 && len(dname) > 28 {
		dname = dname[:28]
	}
	// libipvs 1.31 parses a destination's 64-bit stats with its 32-bit parser, which reads
	// every counter but the byte counts with nla_get_u32: the low 32 bits.
	st := ipvs.StatsOf(d.Stats) // a copy: the loop truncates it
	for _, p := range []*uint64{&st.Conns, &st.InPkts, &st.OutPkts, &st.CPS, &st.InPPS, &st.OutPPS, &st.InBPS, &st.OutBPS} {
		*p = uint64(uint32(*p))
	}
	switch {
	case o.Command == Save:
		w.WriteString(ipvs.SaveDestination(s, d, saveOptions()))
		w.WriteByte('\n')
	case o.Stats:
		fmt.Fprintf(w, "  -> %-28s", dname)
		for _, v := range []uint64{st.Conns, st.InPkts, st.OutPkts, st.InBytes, st.OutBytes} {
			largeNum(w, v, o.Exact)
		}
		w.WriteByte('\n')
	case o.Rate:
		fmt.Fprintf(w, "  -> %-28s %8d %8d %8d", dname, st.CPS, st.InPPS, st.OutPPS)
		largeNum(w, st.InBPS, o.Exact)
		largeNum(w, st.OutBPS, o.Exact)
		w.WriteByte('\n')
	case o.Thresholds:
		fmt.Fprintf(w, "  -> %-28s %-10d %-10d %-10d %-10d\n", dname, d.UpperThreshold, d.LowerThreshold, d.ActiveConns, d.InactiveConns)
	case o.PersistentConn:
		fmt.Fprintf(w, "  -> %-28s %-9d %-11d %-10d %-10d\n", dname, uint32(int32(d.Weight)), d.PersistentConns, d.ActiveConns, d.InactiveConns)
	case o.TunInfo:
		ti := tunInfo(d)
		if ti == "" {
			ti = "n/a"
		}
		fmt.Fprintf(w, "  -> %-28s %-7s %-13s %-6d %-10d %-10d\n", dname, fwdName(d.Forward), ti, int32(d.Weight), d.ActiveConns, d.InactiveConns)
	default:
		fmt.Fprintf(w, "  -> %-28s %-7s %-6d %-10d %-10d\n", dname, fwdName(d.Forward), int32(d.Weight), d.ActiveConns, d.InactiveConns)
	}
}

// largeNum is ipvsadm's print_largenum: nine columns, or K/M/G/T with eight digits; with
// --exact the full number, right-aligned in nine columns or one more than its digits.
func largeNum(w *bufio.Writer, v uint64, exact bool) {
	if exact {
		n := len(strconv.FormatUint(v, 10))
		width := 9
		if n > 8 {
			width = n + 1
		}
		fmt.Fprintf(w, "%*d", width, v)
		return
	}
	switch {
	case v < 100000000:
		fmt.Fprintf(w, "%9d", v)
	case v < 1000000000:
		fmt.Fprintf(w, "%8dK", v/1000)
	case v < 100000000000:
		fmt.Fprintf(w, "%8dM", v/1000000)
	case v < 100000000000000:
		fmt.Fprintf(w, "%8dG", v/1000000000)
	default:
		fmt.Fprintf(w, "%8dT", v/1000000000000)
	}
}

// writeTimeouts renders --timeout.
func writeTimeouts(w io.Writer, t ipvs.Timeouts) error {
	_, err := fmt.Fprintf(w, "Timeout (tcp tcpfin udp): %d %d %d\n", int32(t.TCP), int32(t.TCPFin), int32(t.UDP))
	return err
}

// ownerKey normalizes a service key for the owners map.
func ownerKey(k ipvs.ServiceKey) ipvs.ServiceKey {
	if n, err := k.Normalize(); err == nil {
		return n
	}
	return k
}

// inetNtop6 formats an IPv6 address as glibc's inet_ntop does: the longest run (the first
// of equal ones) of two or more zero groups becomes "::", and an address whose first six
// groups are zero, or five zero groups then ffff, ends in dotted IPv4 ("::1.2.3.4",
// "::ffff:1.2.3.4"), except "::" and "::1"-style addresses whose zero run is longer.
func inetNtop6(b [16]byte) string {
	var words [8]uint16
	for i := range words {
		words[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	bestBase, bestLen := -1, 0
	curBase, curLen := -1, 0
	for i := 0; i < 8; i++ {
		if words[i] == 0 {
			if curBase == -1 {
				curBase, curLen = i, 1
			} else {
				curLen++
			}
			continue
		}
		if curBase != -1 {
			if bestBase == -1 || curLen > bestLen {
				bestBase, bestLen = curBase, curLen
			}
			curBase = -1
		}
	}
	if curBase != -1 && (bestBase == -1 || curLen > bestLen) {
		bestBase, bestLen = curBase, curLen
	}
	if bestBase != -1 && bestLen < 2 {
		bestBase = -1
	}
	var sb strings.Builder
	for i := 0; i < 8; i++ {
		if bestBase != -1 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				sb.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			sb.WriteByte(':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && words[5] == 0xffff)) {
			fmt.Fprintf(&sb, "%d.%d.%d.%d", b[12], b[13], b[14], b[15])
			return sb.String()
		}
		sb.WriteString(strconv.FormatUint(uint64(words[i]), 16))
	}
	if bestBase != -1 && bestBase+bestLen == 8 {
		sb.WriteByte(':')
	}
	return sb.String()
}
