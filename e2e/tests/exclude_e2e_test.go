//go:build e2e

package tests

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Issue 4, excludeCIDRs: a virtual server made by hand inside --ipvs-exclude-cidrs,
// looking like kipvs's own (its VIP bound on kube-ipvs0, a masquerading real server on a
// pod), is neither deleted nor changed by kipvs's first sync or by the full syncs after it,
// while a stale one just like it outside the excluded range is deleted.
func TestExcludeCIDRs(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("xc", 10, 2)
	excluded := []string{
		"-A -t 10.96.200.10:80 -s wrr",
		"-a -t 10.96.200.10:80 -r 10.244.0.11:8080 -m -w 3",
	}
	harness.MustRun(t, "ip", "link", "add", harness.DummyName, "type", "dummy")
	for _, a := range []string{"10.96.200.10/32", "10.96.201.10/32"} {
		harness.MustRun(t, "ip", "addr", "add", a, "dev", harness.DummyName)
	}
	for _, cmd := range [][]string{
		{"-A", "-t", "10.96.200.10:80", "-s", "wrr"},
		{"-a", "-t", "10.96.200.10:80", "-r", "10.244.0.11:8080", "-m", "-w", "3"},
		{"-A", "-t", "10.96.201.10:80", "-s", "rr"},
		{"-a", "-t", "10.96.201.10:80", "-r", "10.244.0.12:8080", "-m", "-w", "1"},
	} {
		harness.MustRun(t, "ipvsadm", cmd...)
	}
	t.Cleanup(func() {
		// kipvs cleanup without --ipvs-exclude-cidrs may not own it any more.
		_, _ = harness.Run("ipvsadm", "-D", "-t", "10.96.200.10:80")
	})
	vip := "10.96.18.10"
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-exclude", ClusterIP: mustAddr(vip)})
	s.api.SetEndpoints(t, svc, backends...)
	k := s.startKipvs("--ipvs-exclude-cidrs", "10.96.200.0/24")
	k.WaitSynced(t, programLimit, "exclude: Service programmed, stale virtual server deleted", func() (bool, string) {
		if ok, why := harness.IPVSHas(map[string]map[string]int{
			vs(harness.TCP, mustAddr(vip), 80): harness.Weights(1, backends...),
		})(); !ok {
			return false, why
		}
		tab, err := harness.ReadIPVS()
		if err != nil {
			return false, err.Error()
		}
		if _, ok := tab["tcp 10.96.201.10:80"]; ok {
			return false, "the stale virtual server tcp 10.96.201.10:80 outside the excluded range is still there"
		}
		return true, ""
	})
	checkExcluded := func(when string) {
		t.Helper()
		save := strings.Split(harness.DumpIPVS(t), "\n")
		var got []string
		for _, l := range save {
			if strings.Contains(l, "10.96.200.") {
				got = append(got, l)
			}
		}
		if !slices.Equal(got, excluded) {
			t.Errorf("%s: the excluded virtual server is\n%s\nwant\n%s", when, strings.Join(got, "\n"), strings.Join(excluded, "\n"))
		}
	}
	checkExcluded("after the first sync")

	// Two more full syncs (the periodic ones, every sync period).
	fam := `ip_family="IPv4"`
	n0 := k.Metrics(t).Get("kubeproxy_sync_full_proxy_rules_duration_seconds_count", fam)
	limit, _ := fullSyncLimit(t, k)
	poll.Until(t, 2*limit, "two more full syncs", func() (bool, string) {
		m, err := harness.FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		n := m.Get("kubeproxy_sync_full_proxy_rules_duration_seconds_count", fam)
		return n >= n0+2, fmt.Sprintf("%v full syncs so far", n-n0)
	})
	checkExcluded("after two more full syncs")
	// The excluded VIP's address on kube-ipvs0 is not protected: as upstream kube-proxy
	// (superfluous addresses are unbound), kipvs unbinds addresses no Service wants.
	t.Logf("%s after the syncs:\n%s", harness.DummyName, harness.DumpDummy(t))
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
