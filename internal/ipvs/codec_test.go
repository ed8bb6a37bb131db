package ipvs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/inet"
)

func stats64Attr(typ int, s Stats) *nl.RtAttr {
	a := nl.NewRtAttr(typ|nlaFNested, nil)
	for i, v := range []uint64{s.Conns, s.InPkts, s.OutPkts, s.InBytes, s.OutBytes, s.CPS, s.InPPS, s.OutPPS, s.InBPS, s.OutBPS} {
		a.AddRtAttr(statsAttrConns+i, nl.Uint64Attr(v))
	}
	return a
}

// stats32Attr is the kernel's 32-bit flavour: u32 counters and rates, u64 bytes.
func stats32Attr(typ int, s Stats) *nl.RtAttr {
	a := nl.NewRtAttr(typ|nlaFNested, nil)
	for i, v := range []uint64{s.Conns, s.InPkts, s.OutPkts, s.InBytes, s.OutBytes, s.CPS, s.InPPS, s.OutPPS, s.InBPS, s.OutBPS} {
		if i == 3 || i == 4 {
			a.AddRtAttr(statsAttrConns+i, nl.Uint64Attr(v))
		} else {
			a.AddRtAttr(statsAttrConns+i, nl.Uint32Attr(uint32(v)))
		}
	}
	return a
}

var bigStats = Stats{Conns: 1<<32 + 1, InPkts: 1<<33 + 2, OutPkts: 1<<34 + 3, InBytes: 1<<40 + 4, OutBytes: 1<<41 + 5,
	CPS: 1<<32 + 6, InPPS: 1<<32 + 7, OutPPS: 1<<32 + 8, InBPS: 1<<35 + 9, OutBPS: 1<<36 + 10}

func TestServiceCodecRoundTrip(t *testing.T) {
	for _, in := range []Service{
		{ServiceKey: tcp("10.0.0.1:80"), Scheduler: "rr", Flags: FlagPersistent | FlagSched2, Timeout: 300, Netmask: 0xffff0000, PEName: "sip"},
		{ServiceKey: sctp("[fd00::1]:9"), Scheduler: "mh", Flags: FlagOnePacket | FlagSched1, Netmask: 64},
		{ServiceKey: fwm(7, inet.IPv6), Scheduler: "wlc"},
	} {
		s, err := in.Normalize()
		must(t, err)
		a := rtattrService(s, true)
		// As the kernel answers: both stats flavours, the 64-bit one must win.
		a.AddChild(stats32Attr(svcAttrStats, bigStats))
		a.AddChild(stats64Attr(svcAttrStats64, bigStats))
		got, err := decodeService(a.Serialize())
		must(t, err)
		want := s
		want.Stats = &bigStats
		if d := diff(want, got); d != "" {
			t.Errorf("service round trip (-want +got):\n%s", d)
		}
	}
}

func TestServiceCodecStats32Fallback(t *testing.T) {
	s, _ := Service{ServiceKey: tcp("10.0.0.1:80"), Scheduler: "rr"}.Normalize()
	a := rtattrService(s, true)
	a.AddChild(stats32Attr(svcAttrStats, bigStats))
	got, err := decodeService(a.Serialize())
	must(t, err)
	if got.Stats.Conns != 1 || got.Stats.InBytes != bigStats.InBytes || got.Stats.OutBPS != 10 {
		t.Errorf("32-bit stats: %+v", got.Stats)
	}
}

func TestDestinationCodecRoundTrip(t *testing.T) {
	for _, in := range []Destination{
		{Addr: ap("10.1.0.1:8080").Addr(), Port: 8080, Weight: 65535, UpperThreshold: 10, LowerThreshold: 2},
		{Addr: ap("[fd01::1]:80").Addr(), Port: 80, Forward: Tunnel, Weight: 1, TunnelType: TunnelGUE, TunnelPort: 6080, TunnelFlags: TunnelRemCsum},
		{Addr: ap("10.1.0.2:80").Addr(), Port: 80, Forward: Route, Weight: -3},
	} {
		d, err := in.Normalize()
		must(t, err)
		a := rtattrDestination(d, true)
		a.AddRtAttr(destAttrActiveConns, nl.Uint32Attr(4))
		a.AddRtAttr(destAttrInactConns, nl.Uint32Attr(5))
		a.AddRtAttr(destAttrPersistConns, nl.Uint32Attr(6))
		a.AddChild(stats64Attr(destAttrStats64, bigStats))
		got, err := decodeDestination(a.Serialize(), inet.IPv4)
		must(t, err)
		want := d
		want.ActiveConns, want.InactiveConns, want.PersistentConns, want.Stats = 4, 5, 6, &bigStats
		if diff := diff(want, got); diff != "" {
			t.Errorf("destination round trip (-want +got):\n%s", diff)
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	if _, err := decodeService([]byte{8, 0, 1, 0, 1}); err == nil {
		t.Error("truncated attribute accepted")
	}
	s, _ := Service{ServiceKey: tcp("10.0.0.1:80"), Scheduler: "rr"}.Normalize()
	b := rtattrService(s, false).Serialize() // no scheduler, flags, netmask
	if _, err := decodeService(b); !errors.Is(err, syscall.EBADMSG) {
		t.Errorf("incomplete service: %v", err)
	}
	if err := walkAttrs([]byte{200, 0, 1, 0, 0, 0, 0, 0}, func(uint16, []byte) error { return nil }); err == nil {
		t.Error("attribute longer than its buffer accepted")
	}
}

func TestAckError(t *testing.T) {
	msg := func(flags uint16, code int32, tail []byte) syscall.NetlinkMessage {
		data := native.AppendUint32(nil, uint32(code))
		data = append(data, make([]byte, unix.NLMSG_HDRLEN)...) // echoed header
		data = append(data, tail...)
		return syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.NLMSG_ERROR, Flags: flags}, Data: data}
	}
	if err := ackError(msg(0, 0, nil)); err != nil {
		t.Errorf("positive ack: %v", err)
	}
	if err := ackError(msg(0, -int32(syscall.ESRCH), nil)); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("plain error: %v", err)
	}
	tlv := nl.NewRtAttr(nlmsgerrMsg, nl.ZeroTerminated("bad thing")).Serialize()
	err := ackError(msg(unix.NLM_F_CAPPED|unix.NLM_F_ACK_TLVS, -int32(syscall.EINVAL), tlv))
	if !errors.Is(err, syscall.EINVAL) || err.Error() != "invalid argument (bad thing)" {
		t.Errorf("extended ack: %v", err)
	}
}

// rtattrService is the encoding of service s through vishvananda/netlink's attribute tree,
// as kipvs sent it until it appended attributes itself (appendService): the oracle of
// TestEncodingMatchesRtAttr.
func rtattrService(s Service, full bool) *nl.RtAttr {
	a := nl.NewRtAttr(cmdAttrService|nlaFNested, nil)
	a.AddRtAttr(svcAttrAF, nl.Uint16Attr(afOf(s.Family)))
	if s.FWMark != 0 {
		a.AddRtAttr(svcAttrFWMark, nl.Uint32Attr(s.FWMark))
	} else {
		a.AddRtAttr(svcAttrProtocol, nl.Uint16Attr(uint16(s.Protocol)))
		a.AddRtAttr(svcAttrAddr, s.Addr.AsSlice())
		a.AddRtAttr(svcAttrPort, binary.BigEndian.AppendUint16(nil, s.Port))
	}
	if !full {
		return a
	}
	a.AddRtAttr(svcAttrSchedName, nl.ZeroTerminated(s.Scheduler))
	if s.PEName != "" {
		a.AddRtAttr(svcAttrPEName, nl.ZeroTerminated(s.PEName))
	}
	a.AddRtAttr(svcAttrFlags, native.AppendUint32(native.AppendUint32(nil, uint32(s.Flags)), ^uint32(0)))
	a.AddRtAttr(svcAttrTimeout, nl.Uint32Attr(s.Timeout))
	if s.Family == inet.IPv6 {
		a.AddRtAttr(svcAttrNetmask, nl.Uint32Attr(s.Netmask))
	} else {
		a.AddRtAttr(svcAttrNetmask, binary.BigEndian.AppendUint32(nil, s.Netmask))
	}
	return a
}

// rtattrDestination is rtattrService for destination d.
func rtattrDestination(d Destination, full bool) *nl.RtAttr {
	a := nl.NewRtAttr(cmdAttrDest|nlaFNested, nil)
	a.AddRtAttr(destAttrAddr, d.Addr.AsSlice())
	a.AddRtAttr(destAttrPort, binary.BigEndian.AppendUint16(nil, d.Port))
	a.AddRtAttr(destAttrAddrFamily, nl.Uint16Attr(afOf(inet.FamilyOf(d.Addr))))
	if !full {
		return a
	}
	a.AddRtAttr(destAttrFwdMethod, nl.Uint32Attr(uint32(d.Forward)))
	a.AddRtAttr(destAttrWeight, nl.Uint32Attr(uint32(int32(d.Weight))))
	a.AddRtAttr(destAttrUThresh, nl.Uint32Attr(d.UpperThreshold))
	a.AddRtAttr(destAttrLThresh, nl.Uint32Attr(d.LowerThreshold))
	if d.Forward == Tunnel {
		a.AddRtAttr(destAttrTunType, nl.Uint8Attr(uint8(d.TunnelType)))
		a.AddRtAttr(destAttrTunPort, binary.BigEndian.AppendUint16(nil, d.TunnelPort))
		a.AddRtAttr(destAttrTunFlags, nl.Uint16Attr(uint16(d.TunnelFlags)))
	}
	return a
}

// Every op's attributes are byte for byte what the attribute tree serialized, for random
// services and destinations of both families, with and without the optional attributes.
func TestEncodingMatchesRtAttr(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 1))
	addr := func(v6 bool) netip.Addr {
		if v6 {
			var b [16]byte
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			b[0] = 0xfd
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{10, byte(rng.UintN(256)), byte(rng.UintN(256)), byte(1 + rng.UintN(254))})
	}
	scheds := []string{"rr", "wlc", "mh", "sh", "lc"}
	for i := range 2000 {
		v6 := rng.UintN(2) == 0
		fam := inet.IPv4
		if v6 {
			fam = inet.IPv6
		}
		s := Service{ServiceKey: ServiceKey{Family: fam, Protocol: inet.TCP, Addr: addr(v6), Port: uint16(1 + rng.UintN(65535))},
			Scheduler: scheds[rng.UintN(uint(len(scheds)))], Timeout: rng.Uint32N(100000)}
		switch rng.UintN(4) {
		case 0:
			s.ServiceKey = ServiceKey{Family: fam, FWMark: 1 + rng.Uint32N(1000)}
		case 1:
			s.Protocol = inet.UDP
		case 2:
			s.Protocol = inet.SCTP
		}
		if rng.UintN(3) == 0 {
			s.Flags, s.PEName = FlagPersistent, "sip"
		}
		if v6 {
			s.Netmask = 128
		}
		d := Destination{Addr: addr(v6), Port: uint16(rng.UintN(65536)), Weight: int(rng.Int32N(1000)) - 10,
			UpperThreshold: rng.Uint32N(10), LowerThreshold: rng.Uint32N(3)}
		if rng.UintN(4) == 0 {
			d.Forward, d.TunnelType, d.TunnelPort, d.TunnelFlags = Tunnel, TunnelGUE, uint16(rng.UintN(65536)), TunnelRemCsum
		}
		ns, err := s.Normalize()
		if err != nil {
			t.Fatalf("%d: %+v: %v", i, s, err)
		}
		nd, err := d.Normalize()
		if err != nil {
			t.Fatalf("%d: %+v: %v", i, d, err)
		}
		for _, full := range []bool{false, true} {
			if got, want := appendService(nil, ns, full), rtattrService(ns, full).Serialize(); !bytes.Equal(got, want) {
				t.Fatalf("%d: service %+v (full %t):\n got % x\nwant % x", i, ns, full, got, want)
			}
			if got, want := appendDestination(nil, nd, full), rtattrDestination(nd, full).Serialize(); !bytes.Equal(got, want) {
				t.Fatalf("%d: destination %+v (full %t):\n got % x\nwant % x", i, nd, full, got, want)
			}
		}
		op := Op{Kind: OpAddDestination, Service: ns, Destination: nd}
		want := append(rtattrService(ns, false).Serialize(), rtattrDestination(nd, true).Serialize()...)
		if got := appendOpAttrs([]byte{1, 2, 3}, op); !bytes.Equal(got[3:], want) || opCommand(op) != cmdNewDest {
			t.Fatalf("%d: %s: got % x\nwant % x", i, op, got[3:], want)
		}
	}
}

// The encoding of a first sync's commonest op, appended (as sent) and through the attribute
// tree (as sent until the append encoder): time and allocations per op.
func BenchmarkOpEncoding(b *testing.B) {
	s, _ := Service{ServiceKey: tcp("10.96.0.1:80"), Scheduler: "rr"}.Normalize()
	d, _ := Destination{Addr: ap("10.244.0.1:8080").Addr(), Port: 8080, Weight: 1}.Normalize()
	op := Op{Kind: OpAddDestination, Service: s, Destination: d}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = appendOpAttrs(buf[:0], op)
		}
	})
	b.Run("rtattr", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = buf[:0]
			for _, a := range []*nl.RtAttr{rtattrService(op.Service, false), rtattrDestination(op.Destination, true)} {
				buf = append(buf, a.Serialize()...)
			}
		}
	})
}
