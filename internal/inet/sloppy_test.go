package inet

import (
	"net/netip"
	"testing"

	netutils "k8s.io/utils/net"
)

// ParseAddrSloppy and ParsePrefixSloppy accept what kube-proxy's parsers
// (k8s.io/utils/net.ParseIPSloppy, ParseCIDRSloppy) accept, as the same address.
func TestSloppyMatchesKubeProxy(t *testing.T) {
	for _, s := range []string{
		"10.96.0.10", "010.096.000.010", "0010.0.0.1", "1.2.3.4", "001.002.003.004", "255.255.255.255", "256.0.0.1",
		"0256.0.0.1", "1.2.3", "1.2.3.4.5", "1..2.3", "1.2.3.a", "+1.2.3.4", " 1.2.3.4", "", "::1", "fd00::10",
		"::ffff:010.0.0.1", "fd00::010.0.0.1", "fe80::1%eth0", "FD00::1", "::ffff:1.2.3.4",
	} {
		want := netutils.ParseIPSloppy(s)
		got, ok := ParseAddrSloppy(s)
		if s == "fe80::1%eth0" {
			if !ok || got.Zone() != "eth0" {
				t.Errorf("ParseAddrSloppy(%q) = %v, %v; want the zoned address (its zone is refused later)", s, got, ok)
			}
			continue
		}
		if ok != (want != nil) {
			t.Errorf("ParseAddrSloppy(%q) ok %v; ParseIPSloppy %v", s, ok, want)
			continue
		}
		if ok {
			w, _ := netip.AddrFromSlice(want)
			if got.Unmap() != w.Unmap() {
				t.Errorf("ParseAddrSloppy(%q) = %v; ParseIPSloppy %v", s, got, want)
			}
		}
	}
	for _, s := range []string{
		"10.0.0.0/8", "010.0.0.0/8", "010.0.0.0/08", "010.000.000.000/008", "10.1.2.3/8", "0.0.0.0/0", "10.0.0.0/33",
		"10.0.0.0/", "10.0.0.0", "fd00::/64", "fd00::/0064", "::ffff:010.0.0.0/104", "fe80::1%eth0/64", "1.2.3.4/-1",
	} {
		_, want, err := netutils.ParseCIDRSloppy(s)
		got, ok := ParsePrefixSloppy(s)
		if ok != (err == nil) {
			t.Errorf("ParsePrefixSloppy(%q) ok %v; ParseCIDRSloppy %v, %v", s, ok, want, err)
			continue
		}
		if ok {
			w, _ := netip.AddrFromSlice(want.IP)
			bits, _ := want.Mask.Size()
			m := got.Masked()
			gotBits := m.Bits()
			if m.Addr().Is4In6() && len(want.IP) == 4 { // the mapped range, as 4 bytes upstream
				gotBits -= 96
			}
			if m.Addr().Unmap() != w.Unmap() || gotBits != bits {
				t.Errorf("ParsePrefixSloppy(%q) = %v; ParseCIDRSloppy %v", s, got, want)
			}
		}
	}
}
