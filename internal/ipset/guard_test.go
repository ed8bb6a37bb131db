package ipset

import (
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/fieldguard"
)

// Replace leaves a set alone only when sameMembers finds every member the same, its
// comment included: a changed field of a member must make it rewrite the set.
func TestSameMembersGuard(t *testing.T) {
	base := Entry{IP: netip.MustParseAddr("10.96.0.10"), Protocol: inet.TCP, Port: 80, IP2: netip.MustParseAddr("10.244.1.5"),
		Net: netip.MustParsePrefix("10.0.0.0/8"), Comment: "default/web:http"}
	fieldguard.Check(t, base, nil, func(a, b Entry) bool {
		return !sameMembers([]Entry{a}, map[Entry]string{b.Key(): b.Comment})
	})
}
