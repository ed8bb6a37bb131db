package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// ServiceFlags are the IP_VS_SVC_F_* flags of a virtual service.
type ServiceFlags uint32

// Service flags. The three scheduler flags have scheduler-specific meanings: for sh and mh
// SCHED1 is "fallback" and SCHED2 is "port" (sh-fallback, sh-port, mh-fallback, mh-port).
const (
	FlagPersistent ServiceFlags = 0x0001
	// FlagHashed is kernel-internal; it is stripped on read and ignored on write.
	FlagHashed    ServiceFlags = 0x0002
	FlagOnePacket ServiceFlags = 0x0004
	FlagSched1    ServiceFlags = 0x0008
	FlagSched2    ServiceFlags = 0x0010
	FlagSched3    ServiceFlags = 0x0020

	FlagSHFallback = FlagSched1
	FlagSHPort     = FlagSched2
	FlagMHFallback = FlagSched1
	FlagMHPort     = FlagSched2
)

// SchedulerFlagNames returns the names ipvsadm prints for the scheduler flags of a service
// using scheduler sched, in ipvsadm's order (the "-b" list of -S, the "(...)" of -L).
// For sh and mh ipvsadm names only the first two flags (a set SCHED3 is not printed, as
// checked against ipvsadm 1.31 in the test VM); other schedulers print flag-1..flag-3.
func SchedulerFlagNames(sched string, f ServiceFlags) []string {
	var names []string
	switch sched {
	case "sh", "mh":
		if f&FlagSched1 != 0 {
			names = append(names, sched+"-fallback")
		}
		if f&FlagSched2 != 0 {
			names = append(names, sched+"-port")
		}
	default:
		for i, fl := range []ServiceFlags{FlagSched1, FlagSched2, FlagSched3} {
			if f&fl != 0 {
				names = append(names, "flag-"+strconv.Itoa(i+1))
			}
		}
	}
	return names
}

// ForwardMethod is how packets reach a destination (IP_VS_CONN_F_FWD_MASK bits).
type ForwardMethod uint32

// Forwarding methods. kipvs creates only Masq (NAT) destinations; the others are read.
const (
	Masq   ForwardMethod = 0
	Local  ForwardMethod = 1
	Tunnel ForwardMethod = 2
	Route  ForwardMethod = 3
)

// String returns the name ipvsadm prints in the Forward column (Masq, Local, Tunnel, Route).
func (m ForwardMethod) String() string {
	switch m {
	case Masq:
		return "Masq"
	case Local:
		return "Local"
	case Tunnel:
		return "Tunnel"
	case Route:
		return "Route"
	}
	return "fwd-" + strconv.Itoa(int(m))
}

// TunnelType is the encapsulation of a Tunnel destination.
type TunnelType uint8

// Tunnel types (IP_VS_CONN_F_TUNNEL_TYPE_*).
const (
	TunnelIPIP TunnelType = 0
	TunnelGUE  TunnelType = 1
	TunnelGRE  TunnelType = 2
)

// String returns the ipvsadm --tun-type name.
func (t TunnelType) String() string {
	switch t {
	case TunnelIPIP:
		return "ipip"
	case TunnelGUE:
		return "gue"
	case TunnelGRE:
		return "gre"
	}
	return "tun-" + strconv.Itoa(int(t))
}

// TunnelFlags are the checksum flags of a GUE or GRE tunnel destination.
type TunnelFlags uint16

// Tunnel checksum flags (IP_VS_TUNNEL_ENCAP_FLAG_*); zero means no checksum.
const (
	TunnelNoCsum  TunnelFlags = 0
	TunnelCsum    TunnelFlags = 1
	TunnelRemCsum TunnelFlags = 2
)

// ServiceKey identifies a virtual service: either a firewall mark (FWMark != 0, with Family)
// or protocol, address and port. Family may be left zero for address services; it is
// derived from Addr. Keys returned by this package are normalized (Family set, IPv4
// addresses unmapped), so they can be compared with == and used as map keys.
type ServiceKey struct {
	Family   inet.Family
	Protocol inet.Protocol
	Addr     netip.Addr
	Port     uint16
	FWMark   uint32
}

// String names the service the way ipvsadm -L does: "TCP 10.0.0.1:80", "UDP [fd00::1]:53",
// "FWM 100", "FWM 100 IPv6".
func (k ServiceKey) String() string {
	if k.FWMark != 0 {
		if k.Family == inet.IPv6 {
			return fmt.Sprintf("FWM %d IPv6", k.FWMark)
		}
		return fmt.Sprintf("FWM %d", k.FWMark)
	}
	return k.Protocol.Name() + " " + netip.AddrPortFrom(k.Addr.Unmap(), k.Port).String()
}

// Normalize returns the key in canonical form (Family filled in, IPv4 unmapped) or an
// error wrapping kerr.ErrInvalid (and EINVAL) if it names no valid service.
func (k ServiceKey) Normalize() (ServiceKey, error) {
	if k.FWMark != 0 {
		if k.Family != inet.IPv4 && k.Family != inet.IPv6 {
			return k, Invalidf("service %s: firewall-mark service needs Family IPv4 or IPv6, have %s", k, k.Family)
		}
		if k.Addr.IsValid() || k.Port != 0 || k.Protocol != 0 {
			return k, Invalidf("service %s: firewall-mark service must not set protocol, address or port", k)
		}
		return k, nil
	}
	if !k.Addr.IsValid() {
		return k, Invalidf("service %s: no address and no firewall mark", k)
	}
	k.Addr = k.Addr.Unmap()
	if k.Addr.Zone() != "" {
		return k, Invalidf("service %s: address has a zone", k)
	}
	fam := inet.FamilyOf(k.Addr)
	if k.Family != 0 && k.Family != fam {
		return k, Invalidf("service %s: Family %s does not match the address", k, k.Family)
	}
	k.Family = fam
	switch k.Protocol {
	case inet.TCP, inet.UDP, inet.SCTP:
	default:
		return k, Invalidf("service %s: protocol %d not supported", k, k.Protocol)
	}
	return k, nil
}

// Stats are the counters and rate estimates of a service or destination, as the kernel
// reports them in its 64-bit stats attributes. Rates are per second (bytes for the BPS ones).
// Service.Stats and Destination.Stats point to them (nil: none reported); Of reads them.
type Stats struct {
	Conns    uint64
	InPkts   uint64
	OutPkts  uint64
	InBytes  uint64
	OutBytes uint64
	CPS      uint64
	InPPS    uint64
	OutPPS   uint64
	InBPS    uint64
	OutBPS   uint64
}

// StatsOf returns *p, or zero counters for nil.
func StatsOf(p *Stats) Stats {
	if p == nil {
		return Stats{}
	}
	return *p
}

// Service is a virtual service. Stats are read-only (ignored on write): set on what the
// kernel reports, nil on what is written (a pointer, so that an Op, which carries a Service
// and a Destination, is not 160 bytes of unused counters bigger: a first sync's plan holds
// one Op per real server).
type Service struct {
	ServiceKey
	Scheduler string
	Flags     ServiceFlags
	// Timeout is the persistence timeout in seconds (used when Flags has FlagPersistent).
	Timeout uint32
	// Netmask is the persistence granularity: for IPv4 the mask as a number
	// (0xffffff00 is 255.255.255.0), for IPv6 the prefix length. Zero on write means the
	// full mask (0xffffffff or 128), which is what the kernel then reports.
	Netmask uint32
	// PEName is the persistence engine ("sip"), empty for none.
	PEName string
	Stats  *Stats
}

// FullNetmask is the netmask of family f that means "whole address" (the default).
func FullNetmask(f inet.Family) uint32 {
	if f == inet.IPv6 {
		return 128
	}
	return 0xffffffff
}

// Normalize returns s as the kernel will store it (normalized key, default netmask,
// FlagHashed cleared, stats zeroed) or an error wrapping kerr.ErrInvalid. Comparing a
// desired service after Normalize with one read back tells whether an update is needed.
func (s Service) Normalize() (Service, error) {
	k, err := s.ServiceKey.Normalize()
	if err != nil {
		return s, err
	}
	s.ServiceKey = k
	s.Flags &^= FlagHashed
	if s.Netmask == 0 {
		s.Netmask = FullNetmask(k.Family)
	}
	if k.Family == inet.IPv6 && s.Netmask > 128 {
		return s, Invalidf("service %s: IPv6 netmask %d is not a prefix length", k, s.Netmask)
	}
	if len(s.Scheduler) > maxNameLen {
		return s, Invalidf("service %s: scheduler name %q longer than %d bytes", k, s.Scheduler, maxNameLen)
	}
	if len(s.PEName) > maxNameLen {
		return s, Invalidf("service %s: persistence engine name %q longer than %d bytes", k, s.PEName, maxNameLen)
	}
	if strings.IndexByte(s.Scheduler, 0) >= 0 || strings.IndexByte(s.PEName, 0) >= 0 {
		return s, Invalidf("service %s: NUL byte in scheduler or persistence engine name", k)
	}
	s.Stats = nil
	return s, nil
}

// maxNameLen is the longest scheduler or persistence engine name (IP_VS_SCHEDNAME_MAXLEN-1).
const maxNameLen = 15

// Destination is a real server of a virtual service. ActiveConns, InactiveConns,
// PersistentConns and Stats are read-only.
//
// The kernel keeps the port as given for every forwarding method (ipvsadm, not the kernel,
// replaces the port of Route and Tunnel destinations by the service port).
type Destination struct {
	Addr    netip.Addr
	Port    uint16
	Forward ForwardMethod
	Weight  int
	// UpperThreshold and LowerThreshold bound active connections; 0 means no limit.
	UpperThreshold uint32
	LowerThreshold uint32
	// Tunnel settings, meaningful only for Forward == Tunnel (zeroed otherwise).
	TunnelType  TunnelType
	TunnelPort  uint16
	TunnelFlags TunnelFlags

	ActiveConns     uint32
	InactiveConns   uint32
	PersistentConns uint32
	Stats           *Stats // nil on what is written, like Service.Stats
}

// AddrPort returns the destination's address and port, which identify it within a service.
func (d Destination) AddrPort() netip.AddrPort { return netip.AddrPortFrom(d.Addr, d.Port) }

// Normalize returns d as the kernel stores it (IPv4 unmapped, tunnel settings cleared
// unless Forward is Tunnel, read-only fields zeroed) or an error wrapping kerr.ErrInvalid.
func (d Destination) Normalize() (Destination, error) {
	if !d.Addr.IsValid() {
		return d, Invalidf("destination %s: no address", d.AddrPort())
	}
	d.Addr = d.Addr.Unmap()
	if d.Addr.Zone() != "" {
		return d, Invalidf("destination %s: address has a zone", d.AddrPort())
	}
	if d.Forward > Route {
		return d, Invalidf("destination %s: forwarding method %d not supported", d.AddrPort(), d.Forward)
	}
	if d.Weight < -1<<31 || d.Weight > 1<<31-1 {
		return d, Invalidf("destination %s: weight %d out of range", d.AddrPort(), d.Weight)
	}
	if d.Forward != Tunnel {
		d.TunnelType, d.TunnelPort, d.TunnelFlags = 0, 0, 0
	} else if d.TunnelType > TunnelGRE || d.TunnelFlags > TunnelRemCsum {
		return d, Invalidf("destination %s: tunnel type %d / flags %d not supported", d.AddrPort(), d.TunnelType, d.TunnelFlags)
	}
	d.ActiveConns, d.InactiveConns, d.PersistentConns = 0, 0, 0
	d.Stats = nil
	return d, nil
}

// Entry is one virtual service with its destinations, as returned by Table.
type Entry struct {
	Service      Service
	Destinations []Destination
}

// Info is what IPVS_CMD_GET_INFO reports.
type Info struct {
	// Version is the IPVS version code, e.g. 0x010201.
	Version uint32
	// ConnTableSize is the size of the connection hash table (ipvsadm's "size=").
	ConnTableSize uint32
}

// VersionString formats the version as ipvsadm does ("1.2.1").
func (i Info) VersionString() string {
	return fmt.Sprintf("%d.%d.%d", i.Version>>16&0xff, i.Version>>8&0xff, i.Version&0xff)
}

// Timeouts are the IPVS connection timeouts in seconds. In SetTimeouts a zero field leaves
// that timeout unchanged (as the kernel and `ipvsadm --set` do).
type Timeouts struct {
	TCP    uint32
	TCPFin uint32
	UDP    uint32
}

// OpKind is the kind of a batched operation.
type OpKind uint8

// Operation kinds for Apply.
const (
	OpAddService OpKind = iota + 1
	OpUpdateService
	OpDeleteService
	OpAddDestination
	OpUpdateDestination
	OpDeleteDestination
)

// Op is one mutation in a batch. Service ops use Service (only its key for delete);
// destination ops use Service.ServiceKey and Destination (only Addr and Port for delete).
type Op struct {
	Kind        OpKind
	Service     Service
	Destination Destination
}

// AddServiceOp returns an Op adding s.
func AddServiceOp(s Service) Op { return Op{Kind: OpAddService, Service: s} }

// UpdateServiceOp returns an Op replacing the settings of the existing service s.
func UpdateServiceOp(s Service) Op { return Op{Kind: OpUpdateService, Service: s} }

// DeleteServiceOp returns an Op deleting the service k (with its destinations).
func DeleteServiceOp(k ServiceKey) Op {
	return Op{Kind: OpDeleteService, Service: Service{ServiceKey: k}}
}

// AddDestinationOp returns an Op adding d to service k.
func AddDestinationOp(k ServiceKey, d Destination) Op {
	return Op{Kind: OpAddDestination, Service: Service{ServiceKey: k}, Destination: d}
}

// UpdateDestinationOp returns an Op replacing the settings of destination d of service k.
func UpdateDestinationOp(k ServiceKey, d Destination) Op {
	return Op{Kind: OpUpdateDestination, Service: Service{ServiceKey: k}, Destination: d}
}

// DeleteDestinationOp returns an Op deleting destination ap from service k.
func DeleteDestinationOp(k ServiceKey, ap netip.AddrPort) Op {
	return Op{Kind: OpDeleteDestination, Service: Service{ServiceKey: k},
		Destination: Destination{Addr: ap.Addr(), Port: ap.Port()}}
}

// String describes the op, e.g. "add destination 10.1.0.1:8080 to TCP 10.0.0.1:80"; it is
// the prefix of the op's error messages.
func (o Op) String() string {
	k := o.Service.ServiceKey
	ap := o.Destination.AddrPort()
	switch o.Kind {
	case OpAddService:
		return "add service " + k.String()
	case OpUpdateService:
		return "update service " + k.String()
	case OpDeleteService:
		return "delete service " + k.String()
	case OpAddDestination:
		return fmt.Sprintf("add destination %s to %s", ap, k)
	case OpUpdateDestination:
		return fmt.Sprintf("update destination %s of %s", ap, k)
	case OpDeleteDestination:
		return fmt.Sprintf("delete destination %s from %s", ap, k)
	}
	return fmt.Sprintf("op %d on %s", o.Kind, k)
}

// Normalize checks and canonicalizes the parts of o that its kind uses.
func (o Op) Normalize() (Op, error) {
	switch o.Kind {
	case OpAddService, OpUpdateService:
		s, err := o.Service.Normalize()
		if err != nil {
			return o, err
		}
		return Op{Kind: o.Kind, Service: s}, nil
	case OpDeleteService, OpAddDestination, OpUpdateDestination, OpDeleteDestination:
		k, err := o.Service.ServiceKey.Normalize()
		if err != nil {
			return o, err
		}
		n := Op{Kind: o.Kind, Service: Service{ServiceKey: k}}
		if o.Kind == OpDeleteService {
			return n, nil
		}
		d := o.Destination
		if o.Kind == OpDeleteDestination {
			d = Destination{Addr: d.Addr, Port: d.Port}
		}
		if n.Destination, err = d.Normalize(); err != nil {
			return o, err
		}
		return n, nil
	}
	return o, Invalidf("unknown op kind %d", o.Kind)
}

// OpError is the failure of one op of a batch.
type OpError struct {
	Index int // position in the ops passed to Apply
	Op    Op
	Err   error // wraps the kerr type and the errno, like the single-op methods' errors
}

func (e *OpError) Error() string { return fmt.Sprintf("op %d: %v", e.Index, e.Err) }
func (e *OpError) Unwrap() error { return e.Err }

// BatchError is returned by Apply when some ops failed. Ops not listed succeeded: like
// the kernel, a batch does not stop at a failed op.
type BatchError struct {
	Ops    int // number of ops in the batch
	Errors []*OpError
}

func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ipvs: %d of %d ops failed", len(e.Errors), e.Ops)
	for i, oe := range e.Errors {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Errors)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(oe.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is/As look at every op error.
func (e *BatchError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i, oe := range e.Errors {
		errs[i] = oe
	}
	return errs
}

// Failed returns the failure of op i, or nil.
func (e *BatchError) Failed(i int) *OpError {
	for _, oe := range e.Errors {
		if oe.Index == i {
			return oe
		}
	}
	return nil
}

// Invalidf returns a client-side validation error that looks like the kernel's EINVAL.
func Invalidf(format string, args ...any) error {
	return kerr.Errno(fmt.Sprintf(format, args...), syscall.EINVAL)
}

// NewBatchError collects per-op errors into a *BatchError (nil if there are none).
func NewBatchError(n int, errs []*OpError) error {
	if len(errs) == 0 {
		return nil
	}
	return &BatchError{Ops: n, Errors: errs}
}

// Interface is the IPVS adapter. Both the netlink client (New) and the fake (ipvstest.NewFake)
// implement it; errors wrap kerr.ErrNotFound / ErrExists / ErrInvalid and the errno.
type Interface interface {
	// Info returns the IPVS version and connection table size.
	Info() (Info, error)
	// Services lists every virtual service (including firewall-mark ones), in Dump order.
	Services() ([]Service, error)
	// GetService returns one service; kerr.ErrNotFound if it does not exist.
	GetService(k ServiceKey) (Service, error)
	// Destinations lists the destinations of service k in Dump order; kerr.ErrNotFound if
	// the service does not exist.
	Destinations(k ServiceKey) ([]Destination, error)
	// Table returns every service with its destinations, in Dump order.
	Table() ([]Entry, error)

	AddService(s Service) error
	UpdateService(s Service) error
	DeleteService(k ServiceKey) error
	AddDestination(k ServiceKey, d Destination) error
	UpdateDestination(k ServiceKey, d Destination) error
	DeleteDestination(k ServiceKey, ap netip.AddrPort) error
	// Apply runs ops in order, as few kernel round trips as possible, and does not stop at
	// a failed op. It returns nil, a *BatchError listing the failed ops, or another error
	// if the batch could not be run at all.
	Apply(ops []Op) error
	// Flush deletes every service.
	Flush() error

	Timeouts() (Timeouts, error)
	SetTimeouts(t Timeouts) error

	// Dump returns the whole table as `ipvsadm -Sn` lines, sorted by CompareServiceKeys and
	// CompareDestinations.
	Dump() (string, error)
	Close() error
}

// ErrClosed is the error of every call on a closed client (or fake) but Close.
var ErrClosed = errors.New("ipvs: client closed")
