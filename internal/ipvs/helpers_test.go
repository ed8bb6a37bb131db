package ipvs

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipvs/kipvs/internal/inet"
)

// Helpers for the in-package tests (codec_test.go); the external tests have their own in
// ops_test.go.

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func tcp(s string) ServiceKey {
	a := ap(s)
	return ServiceKey{Protocol: inet.TCP, Addr: a.Addr(), Port: a.Port()}
}

func sctp(s string) ServiceKey {
	a := ap(s)
	return ServiceKey{Protocol: inet.SCTP, Addr: a.Addr(), Port: a.Port()}
}

func fwm(mark uint32, f inet.Family) ServiceKey {
	return ServiceKey{FWMark: mark, Family: f}
}

func diff(want, got any) string {
	return cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
