package ipvsadm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// The JSON output (-o json) is kipvs's own, for machines; its schema is stable (fields are
// only ever added). Services are sorted numerically (family, protocol, address, port; then
// firewall marks), destinations by address and port; with --nosort both keep the kernel's
// order. Counters are the kernel's full 64-bit values.

// JSONTable is the document of a listing.
type JSONTable struct {
	// Version is the IPVS version ("1.2.1"); ConnTableSize the connection hash table size.
	Version       string        `json:"version"`
	ConnTableSize uint32        `json:"connTableSize"`
	Services      []JSONService `json:"services"`
}

// JSONService is one virtual server.
type JSONService struct {
	// Family is "IPv4" or "IPv6".
	Family string `json:"family"`
	// Protocol is "TCP", "UDP" or "SCTP" (empty for firewall-mark services).
	Protocol string `json:"protocol,omitempty"`
	Address  string `json:"address,omitempty"`
	Port     uint16 `json:"port,omitempty"`
	FWMark   uint32 `json:"fwmark,omitempty"`
	// Scheduler is the scheduler name ("rr").
	Scheduler string `json:"scheduler"`
	// Flags are the raw IP_VS_SVC_F_* bits; SchedFlags their scheduler-flag names.
	Flags      uint32   `json:"flags"`
	SchedFlags []string `json:"schedFlags,omitempty"`
	Persistent bool     `json:"persistent"`
	// Timeout is the persistence timeout in seconds.
	Timeout uint32 `json:"timeout"`
	// Netmask is the persistence granularity: a dotted quad for IPv4, a prefix length for IPv6.
	Netmask           string `json:"netmask"`
	PersistenceEngine string `json:"persistenceEngine,omitempty"`
	OnePacket         bool   `json:"onePacket"`
	Stats             Stats  `json:"stats"`
	// Owners are the Kubernetes Service ports the running daemon programmed this virtual
	// server for (only with --services).
	Owners       []Owner           `json:"owners,omitempty"`
	Destinations []JSONDestination `json:"destinations"`
}

// JSONDestination is one real server.
type JSONDestination struct {
	Address string `json:"address"`
	Port    uint16 `json:"port"`
	// Forward is "Masq", "Local", "Tunnel" or "Route".
	Forward         string      `json:"forward"`
	Weight          int         `json:"weight"`
	UpperThreshold  uint32      `json:"upperThreshold"`
	LowerThreshold  uint32      `json:"lowerThreshold"`
	ActiveConns     uint32      `json:"activeConns"`
	InactiveConns   uint32      `json:"inactiveConns"`
	PersistentConns uint32      `json:"persistentConns"`
	Tunnel          *JSONTunnel `json:"tunnel,omitempty"`
	Stats           Stats       `json:"stats"`
}

// JSONTunnel is the encapsulation of a Tunnel destination.
type JSONTunnel struct {
	Type  string `json:"type"` // ipip, gue, gre
	Port  uint16 `json:"port,omitempty"`
	Flags uint16 `json:"flags"` // 0 no checksum, 1 checksum, 2 remote checksum
}

// Stats are the counters and rate estimates (per second) of a service or destination.
type Stats struct {
	Conns    uint64 `json:"conns"`
	InPkts   uint64 `json:"inPkts"`
	OutPkts  uint64 `json:"outPkts"`
	InBytes  uint64 `json:"inBytes"`
	OutBytes uint64 `json:"outBytes"`
	CPS      uint64 `json:"cps"`
	InPPS    uint64 `json:"inPPS"`
	OutPPS   uint64 `json:"outPPS"`
	InBPS    uint64 `json:"inBPS"`
	OutBPS   uint64 `json:"outBPS"`
}

// JSONTimeouts is the document of --timeout.
type JSONTimeouts struct {
	TCP    uint32 `json:"tcp"`
	TCPFin uint32 `json:"tcpfin"`
	UDP    uint32 `json:"udp"`
}

// JSONConns is the document of -c.
type JSONConns struct {
	Connections []Conn `json:"connections"`
}

// tableJSON converts a snapshot to its JSON document.
func tableJSON(o Options, s Snapshot, owners Owners) JSONTable {
	entries := slices.Clone(s.Entries)
	if !o.NoSort {
		slices.SortStableFunc(entries, func(a, b ipvs.Entry) int {
			return ipvs.CompareServiceKeys(a.Service.ServiceKey, b.Service.ServiceKey)
		})
	}
	t := JSONTable{Version: s.Info.VersionString(), ConnTableSize: s.Info.ConnTableSize, Services: []JSONService{}}
	for _, e := range entries {
		sv := e.Service
		js := JSONService{
			Family: sv.Family.String(), Scheduler: sv.Scheduler, Flags: uint32(sv.Flags),
			SchedFlags: ipvs.SchedulerFlagNames(sv.Scheduler, sv.Flags),
			Persistent: sv.Flags&ipvs.FlagPersistent != 0, Timeout: sv.Timeout,
			Netmask:           netmaskString(sv.Family, sv.Netmask),
			PersistenceEngine: sv.PEName, OnePacket: sv.Flags&ipvs.FlagOnePacket != 0,
			Stats: Stats(ipvs.StatsOf(sv.Stats)), Destinations: []JSONDestination{},
		}
		if sv.FWMark != 0 {
			js.FWMark = sv.FWMark
		} else {
			js.Protocol, js.Address, js.Port = sv.Protocol.Name(), sv.Addr.String(), sv.Port
		}
		if owners != nil {
			js.Owners = owners[ownerKey(sv.ServiceKey)]
		}
		dests := slices.Clone(e.Destinations)
		if !o.NoSort {
			slices.SortStableFunc(dests, ipvs.CompareDestinations)
		}
		for _, d := range dests {
			jd := JSONDestination{
				Address: d.Addr.String(), Port: d.Port, Forward: d.Forward.String(), Weight: d.Weight,
				UpperThreshold: d.UpperThreshold, LowerThreshold: d.LowerThreshold,
				ActiveConns: d.ActiveConns, InactiveConns: d.InactiveConns, PersistentConns: d.PersistentConns,
				Stats: Stats(ipvs.StatsOf(d.Stats)),
			}
			if d.Forward == ipvs.Tunnel {
				jd.Tunnel = &JSONTunnel{Type: d.TunnelType.String(), Port: d.TunnelPort, Flags: uint16(d.TunnelFlags)}
			}
			js.Destinations = append(js.Destinations, jd)
		}
		t.Services = append(t.Services, js)
	}
	return t
}

func netmaskString(f inet.Family, m uint32) string {
	if f == inet.IPv6 {
		return strconv.FormatUint(uint64(m), 10)
	}
	return fmt.Sprintf("%d.%d.%d.%d", m>>24, m>>16&0xff, m>>8&0xff, m&0xff)
}

// Snapshot converts a JSON document back to the kernel state it describes (entries in the
// document's order). Together with tableJSON it lets a captured `-o json --nosort` stand
// in for the kernel in tests.
func (t JSONTable) Snapshot() (Snapshot, error) {
	var s Snapshot
	parts := strings.Split(t.Version, ".")
	if len(parts) != 3 {
		return s, fmt.Errorf("version %q: want X.Y.Z", t.Version)
	}
	for _, p := range parts {
		v, err := strconv.ParseUint(p, 10, 8)
		if err != nil {
			return s, fmt.Errorf("version %q: %w", t.Version, err)
		}
		s.Info.Version = s.Info.Version<<8 | uint32(v)
	}
	s.Info.ConnTableSize = t.ConnTableSize
	for i, js := range t.Services {
		e, err := js.entry()
		if err != nil {
			return s, fmt.Errorf("services[%d]: %w", i, err)
		}
		s.Entries = append(s.Entries, e)
	}
	return s, nil
}

func (js JSONService) entry() (ipvs.Entry, error) {
	var e ipvs.Entry
	sv := &e.Service
	switch js.Family {
	case "IPv4":
		sv.Family = inet.IPv4
	case "IPv6":
		sv.Family = inet.IPv6
	default:
		return e, fmt.Errorf("family %q: want IPv4 or IPv6", js.Family)
	}
	if js.FWMark != 0 {
		sv.FWMark = js.FWMark
	} else {
		p, err := parseProtocol(js.Protocol)
		if err != nil {
			return e, err
		}
		a, err := netip.ParseAddr(js.Address)
		if err != nil {
			return e, fmt.Errorf("address: %w", err)
		}
		sv.Protocol, sv.Addr, sv.Port = p, a, js.Port
	}
	sv.Scheduler, sv.Flags, sv.Timeout, sv.PEName = js.Scheduler, ipvs.ServiceFlags(js.Flags), js.Timeout, js.PersistenceEngine
	if sv.Family == inet.IPv6 {
		v, err := strconv.ParseUint(js.Netmask, 10, 32)
		if err != nil {
			return e, fmt.Errorf("netmask %q: %w", js.Netmask, err)
		}
		sv.Netmask = uint32(v)
	} else {
		a, err := netip.ParseAddr(js.Netmask)
		if err != nil || !a.Is4() {
			return e, fmt.Errorf("netmask %q: not a dotted quad", js.Netmask)
		}
		b := a.As4()
		sv.Netmask = uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	}
	svStats := ipvs.Stats(js.Stats)
	sv.Stats = &svStats
	e.Destinations = []ipvs.Destination{}
	for i, jd := range js.Destinations {
		a, err := netip.ParseAddr(jd.Address)
		if err != nil {
			return e, fmt.Errorf("destinations[%d].address: %w", i, err)
		}
		fwd, err := parseForward(jd.Forward)
		if err != nil {
			return e, fmt.Errorf("destinations[%d]: %w", i, err)
		}
		dStats := ipvs.Stats(jd.Stats)
		d := ipvs.Destination{
			Addr: a, Port: jd.Port, Forward: fwd, Weight: jd.Weight,
			UpperThreshold: jd.UpperThreshold, LowerThreshold: jd.LowerThreshold,
			ActiveConns: jd.ActiveConns, InactiveConns: jd.InactiveConns, PersistentConns: jd.PersistentConns,
			Stats: &dStats,
		}
		if jd.Tunnel != nil {
			switch jd.Tunnel.Type {
			case "ipip":
				d.TunnelType = ipvs.TunnelIPIP
			case "gue":
				d.TunnelType = ipvs.TunnelGUE
			case "gre":
				d.TunnelType = ipvs.TunnelGRE
			default:
				return e, fmt.Errorf("destinations[%d].tunnel.type %q", i, jd.Tunnel.Type)
			}
			d.TunnelPort, d.TunnelFlags = jd.Tunnel.Port, ipvs.TunnelFlags(jd.Tunnel.Flags)
		}
		e.Destinations = append(e.Destinations, d)
	}
	return e, nil
}

func parseProtocol(s string) (inet.Protocol, error) {
	for _, p := range []inet.Protocol{inet.TCP, inet.UDP, inet.SCTP} {
		if p.Name() == s {
			return p, nil
		}
	}
	if n, ok := strings.CutPrefix(s, "proto-"); ok {
		v, err := strconv.ParseUint(n, 10, 8)
		if err == nil {
			return inet.Protocol(v), nil
		}
	}
	return 0, fmt.Errorf("protocol %q: want TCP, UDP or SCTP", s)
}

func parseForward(s string) (ipvs.ForwardMethod, error) {
	for _, m := range []ipvs.ForwardMethod{ipvs.Masq, ipvs.Local, ipvs.Tunnel, ipvs.Route} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("forward %q: want Masq, Local, Tunnel or Route", s)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	return nil
}
