package nft

import (
	"errors"
	"slices"
	"testing"

	"github.com/kipvs/kipvs/internal/kerr"
)

// encode and decode are inverses over every field type and shape of source kipvs writes;
// bad elements are refused as invalid, never half-encoded. (The kernel test
// TestMembersRoundTripKernel checks the bytes against nf_tables through the nft program.)
func TestCodecRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		set  SetDef
		elem []string
		key  int // the key's length
	}{
		{SetDef{Type: "inet_service"}, []string{"30080"}, 2},
		{SetDef{Type: "ipv4_addr"}, []string{"10.96.0.1"}, 4},
		{SetDef{Type: "ipv6_addr"}, []string{"fd00::1"}, 16},
		{SetDef{Type: "ipv4_addr . inet_proto . inet_service"}, []string{"10.96.0.1", "tcp", "443"}, 12},
		{SetDef{Type: "ipv6_addr . inet_proto . inet_service"}, []string{"fd00::1", "sctp", "3868"}, 24},
		{SetDef{Type: "ipv4_addr . inet_proto . inet_service . ipv4_addr"}, []string{"10.0.0.1", "udp", "53", "10.244.0.5"}, 16},
		{SetDef{Type: "ipv4_addr . inet_proto . inet_service . ipv4_addr", Interval: true}, []string{"10.0.0.1", "tcp", "80", "0.0.0.0/0"}, 16},
		{SetDef{Type: "ipv4_addr . inet_proto . inet_service . ipv4_addr", Interval: true}, []string{"10.0.0.1", "tcp", "80", "192.168.0.0/16"}, 16},
		{SetDef{Type: "ipv4_addr . inet_proto . inet_service . ipv4_addr", Interval: true}, []string{"10.0.0.1", "tcp", "80", "192.168.1.1"}, 16},
		{SetDef{Type: "ipv6_addr . inet_proto . inet_service . ipv6_addr", Interval: true}, []string{"fd00::1", "tcp", "80", "2001:db8::/33"}, 40},
	} {
		c, err := newCodec(tc.set)
		if err != nil {
			t.Fatal(err)
		}
		key, end, err := c.encode(tc.elem)
		if err != nil {
			t.Errorf("%q: %v", tc.elem, err)
			continue
		}
		if len(key) != tc.key || (tc.set.Interval != (end != nil)) {
			t.Errorf("%q: key %d bytes, end %v", tc.elem, len(key), end)
		}
		got, err := c.decode(key, end)
		if err != nil || !slices.Equal(got, tc.elem) {
			t.Errorf("%q decodes as %q (%v)", tc.elem, got, err)
		}
	}
	c, _ := newCodec(SetDef{Type: "ipv4_addr . inet_proto . inet_service"})
	for _, bad := range [][]string{{"10.0.0.1", "tcp"}, {"fd00::1", "tcp", "80"}, {"10.0.0.1", "tcp", "70000"}, {"10.0.0.1", "nope", "80"}, {"10.0.0.0/8", "tcp", "80"}} {
		if _, _, err := c.encode(bad); !errors.Is(err, kerr.ErrInvalid) {
			t.Errorf("%q: %v, want invalid", bad, err)
		}
	}
	if _, err := newCodec(SetDef{Type: "ether_addr"}); !errors.Is(err, kerr.ErrInvalid) {
		t.Errorf("unknown field type: %v", err)
	}
}
