package dummyif_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
)

// linkLocalTranscript binds link-local VIPs (169.254.169.254, fe80::1) on a new link, brings
// the link up and down with setUp, and records Addresses after each step. The link's own
// fe80::/64 address (random in the kernel) reads as "fe80::LINK/64". setUp must return once
// the kernel has processed the change.
func linkLocalTranscript(t *testing.T, impl dummyif.Interface, setUp func(up bool)) string {
	t.Helper()
	var b strings.Builder
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	record := func(what string) {
		t.Helper()
		ps, err := impl.Addresses()
		must(err)
		b.WriteString(what + ":")
		for _, p := range ps {
			s := p.String()
			if p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() && p.Bits() == 64 {
				s = "fe80::LINK/64"
			}
			b.WriteString(" " + s)
		}
		b.WriteString("\n")
	}
	_, err := impl.EnsureLink()
	must(err)
	for _, a := range []string{"169.254.169.254", "fe80::1"} {
		must(impl.AddAddress(netip.MustParseAddr(a)))
	}
	record("down with VIPs")
	setUp(true)
	record("up")
	for _, a := range []string{"169.254.169.254", "fe80::1"} {
		must(impl.DeleteAddress(netip.MustParseAddr(a)))
	}
	record("VIPs deleted")
	setUp(false)
	record("down")
	return b.String()
}

const linkLocalWant = `down with VIPs: 169.254.169.254/32 fe80::1/128
up: 169.254.169.254/32 fe80::1/128 fe80::LINK/64
VIPs deleted: fe80::LINK/64
down:
`

// The fake reports link-local addresses as the kernel does (TestLinkLocalKernel).
func TestLinkLocalFake(t *testing.T) {
	f := dummyiftest.NewFake(testLink)
	if got := linkLocalTranscript(t, f, f.SetUp); got != linkLocalWant {
		t.Errorf("transcript:\n%s\nwant:\n%s", got, linkLocalWant)
	}
}
