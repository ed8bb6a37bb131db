package ipvs

import (
	"errors"
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
		a := serviceAttr(s, true)
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
	a := serviceAttr(s, true)
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
		a := destAttr(d, true)
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
	b := serviceAttr(s, false).Serialize() // no scheduler, flags, netmask
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
