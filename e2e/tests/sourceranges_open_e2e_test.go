//go:build e2e

package tests

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
)

// loadBalancerSourceRanges 0.0.0.0/0 on one LoadBalancer and 192.168.100.2/32 on another,
// with a short --ipvs-sync-period: the /0 LoadBalancer IP is reachable from every client
// (both external clients and the node: a /0 covers every source, so it filters nothing),
// the /32 one from the client at that address only (the other client and the node are
// dropped). Both results hold across at least three periodic full syncs, every sync
// succeeds, and no full sync finds anything to repair (kipvs_kernel_drift_repaired_total
// stays 0: what kipvs wrote reads back as written).
//
// It runs once per filter backend (eachBackend).
func TestSourceRangesOpenAndSingleAddress(t *testing.T) {
	eachBackend(t, testSourceRangesOpenAndSingleAddress)
}

func testSourceRangesOpenAndSingleAddress(t *testing.T, s *scenario) {
	const period = 3 * time.Second
	backends := s.pods("so", 50, 2)
	allowed := s.topo.AddExternal(t)
	other := s.topo.AddClient(t, "ext2", "vx-ext2", netip.MustParsePrefix("192.168.101.1/24"), netip.MustParsePrefix("192.168.101.2/24"))
	openIP := netip.MustParseAddr("203.0.113.60")
	oneIP := netip.MustParseAddr("203.0.113.61")
	for _, c := range []struct {
		name   string
		vip    string
		lbIP   netip.Addr
		ranges []string
	}{
		{"i5-sr-open", "10.96.21.10", openIP, []string{"0.0.0.0/0"}},
		{"i5-sr-one", "10.96.21.11", oneIP, []string{harness.ExternalClientIP.Addr().String() + "/32"}},
	} {
		ranges := c.ranges
		svc := s.api.CreateService(t, harness.ServiceSpec{
			Name: c.name, Type: v1.ServiceTypeLoadBalancer, ClusterIP: netip.MustParseAddr(c.vip),
			Ports:  []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
			Mutate: func(svc *v1.Service) { svc.Spec.LoadBalancerSourceRanges = ranges },
		})
		svc = s.api.SetLoadBalancerIP(t, svc, c.lbIP)
		s.api.SetEndpoints(t, svc, backends...)
	}
	all := harness.Weights(1, backends...)
	k := s.startChecked("source-range LoadBalancers programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, openIP, 80): all,
		vs(harness.TCP, oneIP, 80):  all,
	}), "--ipvs-sync-period", period.String())
	expectHealthy(t, k)
	if s.backend == nftablesBackend {
		t.Logf("nft list set ip kipvs load-balancer-source-cidr:\n%s", harness.MustRun(t, "nft", "list", "set", "ip", "kipvs", "load-balancer-source-cidr"))
	} else {
		t.Logf("ipset save (KUBE-*):\n%s", harness.DumpSets(t))
	}

	short := 2 * time.Second
	type check struct {
		who    string
		c      harness.Client
		lb     netip.Addr
		passes bool
	}
	rangeOf := map[netip.Addr]string{openIP: "source range 0.0.0.0/0", oneIP: "source range 192.168.100.2/32"}
	var checks []check
	for _, cl := range []struct {
		who   string
		c     harness.Client
		inOne bool
	}{
		{"client 192.168.100.2 (in the /32)", harness.In(allowed).WithTimeout(short), true},
		{"client 192.168.101.2", harness.In(other).WithTimeout(short), false},
		{"node", s.topo.NodeClient().WithTimeout(short), false},
	} {
		checks = append(checks, check{cl.who, cl.c, openIP, true}, check{cl.who, cl.c, oneIP, cl.inOne})
	}
	// round checks every client against both LoadBalancer IPs and returns what went wrong.
	round := func() []string {
		var bad []string
		for _, c := range checks {
			what := fmt.Sprintf("%s -> %s (%s)", c.who, c.lb, rangeOf[c.lb])
			a, err := c.c.HTTP(ap(c.lb, 80))
			switch {
			case c.passes && err != nil:
				bad = append(bad, fmt.Sprintf("%s: %v, want an answer", what, err))
			case !c.passes && err == nil:
				bad = append(bad, fmt.Sprintf("%s: answered by %s, want the packets dropped", what, a))
			case !c.passes && !harness.IsTimeout(err):
				bad = append(bad, fmt.Sprintf("%s: %v, want a timeout (dropped), not a refusal", what, err))
			}
		}
		return bad
	}

	// A round now, then one after each of the next three periodic full syncs, each of
	// which reads the sets and rules back and would "repair" what reads back differently.
	expectRound := func(when string) {
		t.Helper()
		if bad := round(); len(bad) > 0 {
			t.Errorf("%s:\n  %s", when, strings.Join(bad, "\n  "))
		}
	}
	expectRound("before any periodic full sync")
	full := k.Metrics(t).Get("kipvs_sync_full_total", `ip_family="IPv4"`)
	for i := 1; i <= 3; i++ {
		target := full + 1
		waitProgrammed(t, k, period+programLimit, fmt.Sprintf("periodic full sync %d", i), func() (bool, string) {
			m, err := harness.FetchMetrics()
			if err != nil {
				return false, err.Error()
			}
			return m.Get("kipvs_sync_full_total", `ip_family="IPv4"`) >= target, "no full sync since the last round"
		})
		full = k.Metrics(t).Get("kipvs_sync_full_total", `ip_family="IPv4"`)
		expectRound(fmt.Sprintf("after periodic full sync %d", i))
	}
	t.Logf("%d requests (3 clients x 2 LoadBalancer IPs) before and after each of 3 periodic full syncs (--ipvs-sync-period %s)", len(checks), period)
	m := k.Metrics(t)
	if n := m.Get("kipvs_kernel_drift_repaired_total"); n != 0 {
		t.Errorf("kipvs_kernel_drift_repaired_total is %v, want 0 (nothing changed behind kipvs's back): %s", n, driftSamples(m))
	}
	expectHealthy(t, k)
}
