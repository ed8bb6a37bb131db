package proxy

import (
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/fieldguard"
)

// A sync skips the reconciler when Touched.Empty: every kind of touched object must count.
func TestTouchedEmptyGuard(t *testing.T) {
	vs := VSKey{Protocol: inet.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80}
	full := Touched{
		VirtualServers: map[VSKey]struct{}{vs: {}},
		Members:        map[Member]struct{}{{Set: SetClusterIP, Addr: vs.Address, Proto: inet.TCP, Port: 80}: {}},
		Addresses:      map[netip.Addr]struct{}{vs.Address: {}},
	}
	fieldguard.CheckPresence(t, full, nil, func(x Touched) bool { return x.Empty() })
	fieldguard.CheckPresence(t, full, nil, func(x Touched) bool { return x.Len() == 0 })
}
