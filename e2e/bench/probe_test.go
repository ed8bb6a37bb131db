package bench

import (
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func addrPorts(ss ...string) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	for _, s := range ss {
		out[netip.MustParseAddrPort(s)] = true
	}
	return out
}

func sortedKeys(m map[netip.AddrPort]bool) []string {
	var out []string
	for k := range maps.Keys(m) {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

var (
	vip0 = VIP{Addr: netip.MustParseAddr("10.96.16.0"), Proto: "tcp", Port: 80}
	vip1 = VIP{Addr: netip.MustParseAddr("10.96.16.1"), Proto: "tcp", Port: 80}
	eps0 = addrPorts("10.128.0.1:8080", "10.128.0.2:8080", "10.128.0.3:8080")
	eps1 = addrPorts("10.128.0.4:8080")
)

func checkProgrammed(t *testing.T, p Programmed, chain0, chain1 string) {
	t.Helper()
	if len(p.Endpoints) != 2 {
		t.Fatalf("%d Services, want 2: %v", len(p.Endpoints), p.Endpoints)
	}
	for vip, want := range map[VIP]map[netip.AddrPort]bool{vip0: eps0, vip1: eps1} {
		if got := p.Endpoints[vip]; !maps.Equal(got, want) {
			t.Errorf("%s: endpoints %v, want %v", vip, sortedKeys(got), sortedKeys(want))
		}
	}
	if p.Chains[vip0] != chain0 || p.Chains[vip1] != chain1 {
		t.Errorf("chains %v, want %s and %s", p.Chains, chain0, chain1)
	}
}

func TestPollCost(t *testing.T) {
	var c pollCost
	if got := c.String(); got != "no polls" {
		t.Errorf("%q", got)
	}
	c.add(3*time.Millisecond, 1)
	c.add(1*time.Millisecond, 2)
	if got, want := c.String(), "2 polls of 1.5 Services on average, 2ms per poll on average, 3ms at most"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
