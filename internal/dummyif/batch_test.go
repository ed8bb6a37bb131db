package dummyif

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The requests EnsureAddresses batches are the ones AddAddress sends: RTM_NEWADDR, created,
// exclusive, acked, the host prefix in IFA_LOCAL and IFA_ADDRESS on the link's index, no
// DAD for IPv6; one after the other in one buffer, numbered in turn. (The kernel test binds
// them.)
func TestAppendNewAddr(t *testing.T) {
	var b []byte
	ps := []netip.Prefix{netip.MustParsePrefix("10.96.0.1/32"), netip.MustParsePrefix("fd00::1/128")}
	for i, p := range ps {
		b = appendNewAddr(b, 40+uint32(i), 7, p)
	}
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil || len(msgs) != len(ps) {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	for i, m := range msgs {
		p := ps[i]
		h := m.Header
		if h.Type != unix.RTM_NEWADDR || h.Flags != unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL || h.Seq != 40+uint32(i) ||
			int(h.Len) != newAddrLen(p.Addr().Is6()) {
			t.Errorf("%s: header %+v", p, h)
		}
		family, flags := uint8(unix.AF_INET), uint8(0)
		if p.Addr().Is6() {
			family, flags = unix.AF_INET6, unix.IFA_F_NODAD
		}
		d := m.Data
		if d[0] != family || int(d[1]) != p.Bits() || d[2] != flags || d[3] != unix.RT_SCOPE_UNIVERSE || binary.NativeEndian.Uint32(d[4:8]) != 7 {
			t.Errorf("%s: ifaddrmsg % x", p, d[:unix.SizeofIfAddrmsg])
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil || len(attrs) != 2 {
			t.Fatalf("%s: %d attributes, %v", p, len(attrs), err)
		}
		for j, typ := range []uint16{unix.IFA_LOCAL, unix.IFA_ADDRESS} {
			if a, ok := netip.AddrFromSlice(attrs[j].Value); attrs[j].Attr.Type != typ || !ok || a != p.Addr() {
				t.Errorf("%s: attribute %d: type %d value % x", p, j, attrs[j].Attr.Type, attrs[j].Value)
			}
		}
	}
}
