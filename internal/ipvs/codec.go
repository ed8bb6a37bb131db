package ipvs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/inet"
)

// Encoding of services and destinations as IPVS generic netlink attributes, and decoding
// of the kernel's replies. Ports (and the tunnel port) are big-endian; the IPv4 netmask is
// the mask in network byte order while the IPv6 netmask is a prefix length in host order
// (both in a u32 attribute); addresses are 4 or 16 bytes on the way in and always 16
// (union nf_inet_addr) on the way out.

// appendAttr appends one attribute: its header (length without the padding, type), its
// value, and the padding to 4 bytes.
func appendAttr(b []byte, typ uint16, v []byte) []byte {
	b = native.AppendUint16(b, uint16(unix.SizeofRtAttr+len(v)))
	b = native.AppendUint16(b, typ)
	b = append(b, v...)
	return appendPad(b, len(v))
}

// appendPad appends the zero bytes that align a value of n bytes to 4.
func appendPad(b []byte, n int) []byte {
	for ; n%unix.RTA_ALIGNTO != 0; n++ {
		b = append(b, 0)
	}
	return b
}

func appendU16Attr(b []byte, typ, v uint16) []byte {
	return appendAttr(b, typ, native.AppendUint16(make([]byte, 0, 2), v))
}

func appendU32Attr(b []byte, typ uint16, v uint32) []byte {
	return appendAttr(b, typ, native.AppendUint32(make([]byte, 0, 4), v))
}

func appendBE16Attr(b []byte, typ, v uint16) []byte {
	return appendAttr(b, typ, binary.BigEndian.AppendUint16(make([]byte, 0, 2), v))
}

// appendStringAttr appends a NUL-terminated string attribute.
func appendStringAttr(b []byte, typ uint16, v string) []byte {
	b = native.AppendUint16(b, uint16(unix.SizeofRtAttr+len(v)+1))
	b = native.AppendUint16(b, typ)
	b = append(append(b, v...), 0)
	return appendPad(b, len(v)+1)
}

// appendAddrAttr appends an address as 4 or 16 bytes.
func appendAddrAttr(b []byte, typ uint16, a netip.Addr) []byte {
	if a.Is4() {
		v := a.As4()
		return appendAttr(b, typ, v[:])
	}
	v := a.As16()
	return appendAttr(b, typ, v[:])
}

// beginNested appends the header of a nested attribute of type typ and returns where it
// starts, for endNested.
func beginNested(b []byte, typ uint16) ([]byte, int) {
	start := len(b)
	b = native.AppendUint16(b, 0)
	return native.AppendUint16(b, typ|nlaFNested), start
}

// endNested sets the length of the nested attribute that starts at start.
func endNested(b []byte, start int) []byte {
	native.PutUint16(b[start:], uint16(len(b)-start))
	return b
}

// appendService appends service s (already normalized) as IPVS_CMD_ATTR_SERVICE; full adds
// the settings that IPVS_CMD_NEW_SERVICE and IPVS_CMD_SET_SERVICE require.
func appendService(b []byte, s Service, full bool) []byte {
	b, start := beginNested(b, cmdAttrService)
	b = appendU16Attr(b, svcAttrAF, afOf(s.Family))
	if s.FWMark != 0 {
		b = appendU32Attr(b, svcAttrFWMark, s.FWMark)
	} else {
		b = appendU16Attr(b, svcAttrProtocol, uint16(s.Protocol))
		b = appendAddrAttr(b, svcAttrAddr, s.Addr)
		b = appendBE16Attr(b, svcAttrPort, s.Port)
	}
	if full {
		b = appendStringAttr(b, svcAttrSchedName, s.Scheduler)
		if s.PEName != "" {
			b = appendStringAttr(b, svcAttrPEName, s.PEName)
		}
		// struct ip_vs_flags {flags, mask}: the full mask replaces every flag.
		var flags [8]byte
		native.PutUint32(flags[:4], uint32(s.Flags))
		native.PutUint32(flags[4:], ^uint32(0))
		b = appendAttr(b, svcAttrFlags, flags[:])
		b = appendU32Attr(b, svcAttrTimeout, s.Timeout)
		if s.Family == inet.IPv6 {
			b = appendU32Attr(b, svcAttrNetmask, s.Netmask)
		} else {
			b = appendAttr(b, svcAttrNetmask, binary.BigEndian.AppendUint32(make([]byte, 0, 4), s.Netmask))
		}
	}
	return endNested(b, start)
}

// appendDestination appends destination d (already normalized) as IPVS_CMD_ATTR_DEST; full
// adds the settings that IPVS_CMD_NEW_DEST and IPVS_CMD_SET_DEST require.
func appendDestination(b []byte, d Destination, full bool) []byte {
	b, start := beginNested(b, cmdAttrDest)
	b = appendAddrAttr(b, destAttrAddr, d.Addr)
	b = appendBE16Attr(b, destAttrPort, d.Port)
	b = appendU16Attr(b, destAttrAddrFamily, afOf(inet.FamilyOf(d.Addr)))
	if full {
		b = appendU32Attr(b, destAttrFwdMethod, uint32(d.Forward))
		b = appendU32Attr(b, destAttrWeight, uint32(int32(d.Weight)))
		b = appendU32Attr(b, destAttrUThresh, d.UpperThreshold)
		b = appendU32Attr(b, destAttrLThresh, d.LowerThreshold)
		if d.Forward == Tunnel {
			b = appendAttr(b, destAttrTunType, []byte{uint8(d.TunnelType)})
			b = appendBE16Attr(b, destAttrTunPort, d.TunnelPort)
			b = appendU16Attr(b, destAttrTunFlags, uint16(d.TunnelFlags))
		}
	}
	return endNested(b, start)
}

// opCommand is the command of a normalized op.
func opCommand(o Op) uint8 {
	switch o.Kind {
	case OpAddService:
		return cmdNewService
	case OpUpdateService:
		return cmdSetService
	case OpDeleteService:
		return cmdDelService
	case OpAddDestination:
		return cmdNewDest
	case OpUpdateDestination:
		return cmdSetDest
	case OpDeleteDestination:
		return cmdDelDest
	}
	panic(fmt.Sprintf("ipvs: opCommand: unknown op kind %d", o.Kind))
}

// appendOpAttrs appends the attributes of a normalized op: its service, and its
// destination for a destination op.
func appendOpAttrs(b []byte, o Op) []byte {
	switch o.Kind {
	case OpAddService, OpUpdateService:
		return appendService(b, o.Service, true)
	case OpDeleteService:
		return appendService(b, o.Service, false)
	case OpAddDestination, OpUpdateDestination:
		return appendDestination(appendService(b, o.Service, false), o.Destination, true)
	case OpDeleteDestination:
		return appendDestination(appendService(b, o.Service, false), o.Destination, false)
	}
	panic(fmt.Sprintf("ipvs: appendOpAttrs: unknown op kind %d", o.Kind))
}

// nested returns the value of the first attribute of type typ in b.
func nested(b []byte, typ uint16) ([]byte, bool) {
	var v []byte
	found := false
	_ = walkAttrs(b, func(t uint16, val []byte) error {
		if t == typ && !found {
			v, found = val, true
		}
		return nil
	})
	return v, found
}

func u16(v []byte) uint16 {
	if len(v) < 2 {
		return 0
	}
	return native.Uint16(v)
}

func u32(v []byte) uint32 {
	if len(v) < 4 {
		return 0
	}
	return native.Uint32(v)
}

func ube16(v []byte) uint16 {
	if len(v) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(v)
}

// uvar reads a u32 or u64 attribute (the 32-bit stats mix both).
func uvar(v []byte) uint64 {
	switch {
	case len(v) >= 8:
		return native.Uint64(v)
	case len(v) >= 4:
		return uint64(native.Uint32(v))
	}
	return 0
}

// afOf is the kernel's address family (AF_INET, AF_INET6) of f; 0 for none.
func afOf(f inet.Family) uint16 {
	switch f {
	case inet.IPv4:
		return syscall.AF_INET
	case inet.IPv6:
		return syscall.AF_INET6
	}
	return 0
}

// familyOfAF is the family of the kernel's address family af; 0 for another one.
func familyOfAF(af uint16) inet.Family {
	switch af {
	case syscall.AF_INET:
		return inet.IPv4
	case syscall.AF_INET6:
		return inet.IPv6
	}
	return 0
}

// afName names a kernel address family: "IPv4", "IPv6" or "af-N".
func afName(af uint16) string {
	if f := familyOfAF(af); f != 0 {
		return f.String()
	}
	return "af-" + strconv.Itoa(int(af))
}

func decodeAddr(af uint16, v []byte) (netip.Addr, error) {
	switch {
	case af == syscall.AF_INET && len(v) >= 4:
		return netip.AddrFrom4([4]byte(v[:4])), nil
	case af == syscall.AF_INET6 && len(v) >= 16:
		return netip.AddrFrom16([16]byte(v[:16])), nil
	}
	return netip.Addr{}, fmt.Errorf("address of %d bytes for family %s: %w", len(v), afName(af), syscall.EBADMSG)
}

// decodeStats reads a nested stats attribute (32- or 64-bit flavour).
func decodeStats(b []byte) *Stats {
	s := new(Stats)
	_ = walkAttrs(b, func(t uint16, v []byte) error {
		switch t {
		case statsAttrConns:
			s.Conns = uvar(v)
		case statsAttrInPkts:
			s.InPkts = uvar(v)
		case statsAttrOutPkts:
			s.OutPkts = uvar(v)
		case statsAttrInBytes:
			s.InBytes = uvar(v)
		case statsAttrOutBytes:
			s.OutBytes = uvar(v)
		case statsAttrCPS:
			s.CPS = uvar(v)
		case statsAttrInPPS:
			s.InPPS = uvar(v)
		case statsAttrOutPPS:
			s.OutPPS = uvar(v)
		case statsAttrInBPS:
			s.InBPS = uvar(v)
		case statsAttrOutBPS:
			s.OutBPS = uvar(v)
		}
		return nil
	})
	return s
}

// decodeService reads the IPVS_CMD_ATTR_SERVICE of a reply's attributes.
func decodeService(msg []byte) (Service, error) {
	b, ok := nested(msg, cmdAttrService)
	if !ok {
		return Service{}, fmt.Errorf("ipvs: service reply without service attribute: %w", syscall.EBADMSG)
	}
	var (
		s                  Service
		addr, st32, st64   []byte
		hasStats, hasSt64  bool
		hasAF, hasNetmask  bool
		af                 uint16
		netmask            []byte
		hasFlags, hasSched bool
	)
	err := walkAttrs(b, func(t uint16, v []byte) error {
		switch t {
		case svcAttrAF:
			af, hasAF = u16(v), true
		case svcAttrProtocol:
			s.Protocol = inet.Protocol(u16(v))
		case svcAttrAddr:
			addr = v
		case svcAttrPort:
			s.Port = ube16(v)
		case svcAttrFWMark:
			s.FWMark = u32(v)
		case svcAttrSchedName:
			s.Scheduler, hasSched = cString(v), true
		case svcAttrPEName:
			s.PEName = cString(v)
		case svcAttrFlags:
			s.Flags, hasFlags = ServiceFlags(u32(v))&^FlagHashed, true
		case svcAttrTimeout:
			s.Timeout = u32(v)
		case svcAttrNetmask:
			netmask, hasNetmask = v, true
		case svcAttrStats:
			st32, hasStats = v, true
		case svcAttrStats64:
			st64, hasSt64 = v, true
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("ipvs: decode service: %w", err)
	}
	if !hasAF || !hasSched || !hasFlags || !hasNetmask {
		return s, fmt.Errorf("ipvs: decode service: missing attribute (af %t, scheduler %t, flags %t, netmask %t): %w",
			hasAF, hasSched, hasFlags, hasNetmask, syscall.EBADMSG)
	}
	s.Family = familyOfAF(af)
	if s.FWMark != 0 {
		// The kernel keeps TCP as the protocol of firewall-mark services but does not report it.
		s.Protocol, s.Port = 0, 0
	} else if s.Addr, err = decodeAddr(af, addr); err != nil {
		return s, fmt.Errorf("ipvs: decode service %s: %w", s.ServiceKey, err)
	}
	if s.Family == inet.IPv6 {
		s.Netmask = u32(netmask)
	} else if len(netmask) >= 4 {
		s.Netmask = binary.BigEndian.Uint32(netmask)
	}
	switch {
	case hasSt64:
		s.Stats = decodeStats(st64)
	case hasStats:
		s.Stats = decodeStats(st32)
	}
	return s, nil
}

// decodeDestination reads the IPVS_CMD_ATTR_DEST of a reply; svcFamily is used when the
// kernel does not report the destination's own family (kernels before 4.x).
func decodeDestination(msg []byte, svcFamily inet.Family) (Destination, error) {
	b, ok := nested(msg, cmdAttrDest)
	if !ok {
		return Destination{}, fmt.Errorf("ipvs: destination reply without destination attribute: %w", syscall.EBADMSG)
	}
	var (
		d                 Destination
		addr, st32, st64  []byte
		hasStats, hasSt64 bool
		af                = afOf(svcFamily)
	)
	err := walkAttrs(b, func(t uint16, v []byte) error {
		switch t {
		case destAttrAddr:
			addr = v
		case destAttrPort:
			d.Port = ube16(v)
		case destAttrFwdMethod:
			d.Forward = ForwardMethod(u32(v))
		case destAttrWeight:
			d.Weight = int(int32(u32(v)))
		case destAttrUThresh:
			d.UpperThreshold = u32(v)
		case destAttrLThresh:
			d.LowerThreshold = u32(v)
		case destAttrActiveConns:
			d.ActiveConns = u32(v)
		case destAttrInactConns:
			d.InactiveConns = u32(v)
		case destAttrPersistConns:
			d.PersistentConns = u32(v)
		case destAttrAddrFamily:
			af = u16(v)
		case destAttrTunType:
			if len(v) >= 1 {
				d.TunnelType = TunnelType(v[0])
			}
		case destAttrTunPort:
			d.TunnelPort = ube16(v)
		case destAttrTunFlags:
			d.TunnelFlags = TunnelFlags(u16(v))
		case destAttrStats:
			st32, hasStats = v, true
		case destAttrStats64:
			st64, hasSt64 = v, true
		}
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("ipvs: decode destination: %w", err)
	}
	if d.Addr, err = decodeAddr(af, addr); err != nil {
		return d, fmt.Errorf("ipvs: decode destination: %w", err)
	}
	switch {
	case hasSt64:
		d.Stats = decodeStats(st64)
	case hasStats:
		d.Stats = decodeStats(st32)
	}
	return d, nil
}
