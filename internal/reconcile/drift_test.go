package reconcile

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/proxy"
)

// driftBothWays is drift as its definition reads: every object of either side looked up in
// the other.
func driftBothWays(applied, obs *state) map[string]int {
	out := map[string]int{}
	for k, a := range applied.vs {
		o, ok := obs.vs[k]
		if !ok {
			out["virtual_server"]++
			out["real_server"] += len(a.dests)
			continue
		}
		if !serviceSettingsEqual(a.svc, o.svc) {
			out["virtual_server"]++
		}
		for ap, ad := range a.dests {
			if od, ok := o.dests[ap]; !ok || od.weight != ad.weight {
				out["real_server"]++
			}
		}
		for ap := range o.dests {
			if _, ok := a.dests[ap]; !ok {
				out["real_server"]++
			}
		}
	}
	for k, o := range obs.vs {
		if _, ok := applied.vs[k]; !ok {
			out["virtual_server"]++
			out["real_server"] += len(o.dests)
		}
	}
	for m := range applied.members {
		if _, ok := obs.members[m]; !ok {
			out["ipset_member"]++
		}
	}
	for m := range obs.members {
		if _, ok := applied.members[m]; !ok {
			out["ipset_member"]++
		}
	}
	for a := range applied.addrs {
		if _, ok := obs.addrs[a]; !ok {
			out["address"]++
		}
	}
	for a := range obs.addrs {
		if _, ok := applied.addrs[a]; !ok {
			out["address"]++
		}
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

// randomState draws a small state from few enough keys that two draws overlap.
func randomState(rng *rand.Rand) *state {
	s := newState()
	addr := func() netip.Addr { return netip.AddrFrom4([4]byte{10, 96, 0, byte(rng.IntN(4))}) }
	for range rng.IntN(5) {
		k := proxy.VSKey{Protocol: inet.TCP, Address: addr(), Port: uint16(80 + rng.IntN(2))}
		v := &vsState{svc: ipvs.Service{ServiceKey: toIPVSKey(k), Scheduler: []string{"rr", "wrr"}[rng.IntN(2)]},
			dests: map[netip.AddrPort]destState{}}
		for range rng.IntN(5) {
			ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 0, byte(rng.IntN(4))}), 8080)
			v.dests[ap] = destState{weight: rng.IntN(2)}
		}
		s.vs[k] = v
	}
	for range rng.IntN(4) {
		s.members[proxy.Member{Set: proxy.SetClusterIP, Proto: inet.TCP, Port: 80, Addr: addr()}] = struct{}{}
	}
	for range rng.IntN(4) {
		s.addrs[addr()] = struct{}{}
	}
	return s
}

// drift, which walks each collection once, counts what the two-way definition counts:
// missing and extra virtual servers, real servers, members and addresses, changed settings
// and weights.
func TestDriftCountsBothWays(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 14))
	for i := range 20000 {
		applied, obs := randomState(rng), randomState(rng)
		if got, want := fmt.Sprint(drift(applied, obs, nil)), fmt.Sprint(driftBothWays(applied, obs)); got != want {
			t.Fatalf("case %d: drift %s, want %s", i, got, want)
		}
	}
}
