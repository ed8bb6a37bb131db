//go:build e2e

package tests

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Scenario 7: state changed behind kipvs's back (the IPVS table flushed, a set flushed,
// a chain flushed) is restored by the next full sync, within one sync period, and counted
// in kipvs_kernel_drift_repaired_total by kind.
func TestDriftRepaired(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("dr", 10, 2)
	vip := netip.MustParseAddr("10.96.7.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "s7-drift", ClusterIP: vip})
	s.api.SetEndpoints(t, svc, backends...)
	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "s7 programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, vip, 80): harness.Weights(1, backends...),
		vs(harness.UDP, vip, 80): harness.Weights(1, backends...),
	}))
	good := harness.ReadDump(t)
	goodPart := map[string]string{"virtual_server": good.IPVS, "ipset_member": good.IPSets, "iptables_rules": good.IPTables}

	drifts := []struct {
		cmd   []string
		kind  string                  // label of kipvs_kernel_drift_repaired_total
		part  func(testing.TB) string // reads the part of the state the command changes
		broke string                  // what must be gone right after the command
	}{
		{[]string{"ipvsadm", "-C"}, "virtual_server", harness.DumpIPVS, "-A -t 10.96.7.10:80"},
		{[]string{"ipset", "flush", "KUBE-CLUSTER-IP"}, "ipset_member", harness.DumpSets, "add KUBE-CLUSTER-IP 10.96.7.10,tcp:80"},
		{[]string{"iptables", "-t", "nat", "-F", "KUBE-SERVICES"}, "iptables_rules", iptablesRules, "-A KUBE-SERVICES"},
	}
	for _, dr := range drifts {
		what := strings.Join(dr.cmd, " ")
		kind := `kind="` + dr.kind + `"`
		before := k.Metrics(t).Get("kipvs_kernel_drift_repaired_total", kind)
		harness.MustRun(t, dr.cmd[0], dr.cmd[1:]...)
		if strings.Contains(dr.part(t), dr.broke) {
			// Already repaired (a full sync in between) or the command did nothing; the
			// counter check below tells them apart.
			t.Logf("%s: %q present right after the command", what, dr.broke)
		}
		limit, fullSync := fullSyncLimit(t, k)
		took := poll.Until(t, limit, "repair after "+what, func() (bool, string) {
			got := dr.part(t)
			if got != goodPart[dr.kind] {
				return false, "still differs:\n" + lineDiff(goodPart[dr.kind], got)
			}
			return true, ""
		})
		// The counter is raised before the repair is applied.
		after := k.Metrics(t).Get("kipvs_kernel_drift_repaired_total", kind)
		if after <= before {
			t.Errorf("after %s: kipvs_kernel_drift_repaired_total{%s} is %v, was %v: the repair was not counted", what, kind, after, before)
		}
		t.Logf("%s: repaired in %.1fs (sync period %s, a full sync takes %.1fs, limit %.1fs); kipvs_kernel_drift_repaired_total{%s} %v -> %v",
			what, took.Seconds(), harness.SyncPeriod, fullSync.Seconds(), limit.Seconds(), kind, before, after)
	}
	if d := harness.ReadDump(t); d != good {
		t.Errorf("kernel state after the repairs differs:\n%s", lineDiff(good.String(), d.String()))
	}
	expectSpread(t, "node -> tcp ClusterIP after the repairs", s.topo.NodeClient(), harness.TCP, ap(vip, 80), 4, harness.PodGateway.Addr(), backends...)
}

func iptablesRules(t testing.TB) string { return harness.DumpRules(t, "iptables-save") }

// Foreign state of scenario 8: an IPVS virtual server on an address kipvs does not own,
// another on a node address with a port that is no NodePort, and iptables chains of
// someone else's with jumps from the built-in chains kipvs also jumps from.
var (
	foreignIPVS = []string{
		"-A -t 172.31.0.1:80 -s rr",
		"-a -t 172.31.0.1:80 -r 10.244.0.11:8080 -m -w 1",
		"-A -u 10.0.2.15:9999 -s wrr",
	}
	foreignRules = []string{
		"-A PREROUTING -j E2E-FOREIGN",
		"-A E2E-FOREIGN -s 198.18.0.0/15 -j RETURN",
		"-A INPUT -j E2E-FOREIGN-IN",
		"-A E2E-FOREIGN-IN -s 198.18.0.0/15 -j RETURN",
	}
)

func addForeign(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { removeForeign(t) })
	for _, line := range foreignIPVS {
		harness.MustRun(t, "ipvsadm", strings.Fields(line)...)
	}
	for _, args := range [][]string{
		{"-t", "nat", "-N", "E2E-FOREIGN"},
		{"-t", "nat", "-A", "E2E-FOREIGN", "-s", "198.18.0.0/15", "-j", "RETURN"},
		{"-t", "nat", "-I", "PREROUTING", "-j", "E2E-FOREIGN"},
		{"-t", "filter", "-N", "E2E-FOREIGN-IN"},
		{"-t", "filter", "-A", "E2E-FOREIGN-IN", "-s", "198.18.0.0/15", "-j", "RETURN"},
		{"-t", "filter", "-I", "INPUT", "-j", "E2E-FOREIGN-IN"},
	} {
		harness.MustRun(t, "iptables", args...)
	}
}

func removeForeign(t *testing.T) {
	for _, args := range [][]string{
		{"-t", "nat", "-D", "PREROUTING", "-j", "E2E-FOREIGN"},
		{"-t", "nat", "-F", "E2E-FOREIGN"},
		{"-t", "nat", "-X", "E2E-FOREIGN"},
		{"-t", "filter", "-D", "INPUT", "-j", "E2E-FOREIGN-IN"},
		{"-t", "filter", "-F", "E2E-FOREIGN-IN"},
		{"-t", "filter", "-X", "E2E-FOREIGN-IN"},
	} {
		_, _ = harness.Run("iptables", args...) // gone already when the test passed
	}
	for _, vs := range []string{"-t 172.31.0.1:80", "-u 10.0.2.15:9999"} {
		_, _ = harness.Run("ipvsadm", append([]string{"-D"}, strings.Fields(vs)...)...)
	}
}

// checkForeign fails the test unless every foreign object is still there.
func checkForeign(t *testing.T, when string) {
	t.Helper()
	ipvs := harness.MustRun(t, "ipvsadm", "-Sn")
	rules := harness.MustRun(t, "iptables-save")
	var missing []string
	for _, l := range foreignIPVS {
		if !strings.Contains(ipvs, l+"\n") {
			missing = append(missing, "ipvs: "+l)
		}
	}
	for _, l := range foreignRules {
		if !strings.Contains(rules, l+"\n") {
			missing = append(missing, "iptables: "+l)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s: foreign state removed:\n%s\n--- ipvsadm -Sn:\n%s", when, strings.Join(missing, "\n"), ipvs)
	}
	t.Logf("%s: foreign IPVS virtual servers and iptables chains intact", when)
}

// Scenario 8: IPVS virtual servers and iptables chains kipvs does not own survive its
// first sync (adoption), incremental and periodic full syncs, a restart, and `kipvs
// cleanup`, after which the whole kernel equals its dump from before kipvs first ran.
func TestForeignStateSurvives(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("fo", 10, 2)
	vip := netip.MustParseAddr("10.96.8.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "s8-foreign", Type: v1.ServiceTypeNodePort, ClusterIP: vip})
	s.api.SetEndpoints(t, svc, backends[0])
	addForeign(t)
	// The whole kernel before kipvs ever runs, foreign objects included (issue 5: cleanup
	// after a full proxy run leaves the kernel equal to its pre-run dump).
	before := harness.WholeKernel(t)

	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "s8 programmed", harness.IPVSHas(map[string]map[string]int{vs(harness.TCP, vip, 80): harness.Weights(1, backends[0])}))
	checkForeign(t, "after the first sync")

	s.api.SetEndpoints(t, svc, backends...)
	k.WaitSynced(t, programLimit, "s8 scaled", harness.IPVSHas(map[string]map[string]int{vs(harness.TCP, vip, 80): harness.Weights(1, backends...)}))
	checkForeign(t, "after an incremental sync")

	full := k.Metrics(t).Get("kipvs_sync_full_total", `ip_family="IPv4"`)
	limit, _ := fullSyncLimit(t, k)
	poll.Until(t, limit, "a periodic full sync", func() (bool, string) {
		m, err := harness.FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		return m.Get("kipvs_sync_full_total", `ip_family="IPv4"`) > full, "no full sync yet"
	})
	k.WaitSynced(t, programLimit, "the periodic full sync", nil)
	checkForeign(t, "after a periodic full sync")

	k.Stop(t)
	k = s.startKipvs()
	checkForeign(t, "after a restart")

	k.Stop(t)
	if out, err := harness.RunCleanup(s.env); err != nil {
		t.Fatalf("kipvs cleanup: %v\n%s", err, out)
	}
	checkForeign(t, "after kipvs cleanup")
	if after := harness.WholeKernel(t); after != before {
		t.Errorf("after kipvs cleanup the kernel differs from its pre-run dump:\n%s", lineDiff(before, after))
	} else {
		t.Logf("after kipvs cleanup the kernel equals its pre-run dump (%d lines)", strings.Count(before, "\n"))
	}
	var left []string
	for _, l := range harness.Leftovers(t) {
		foreign := false
		for _, f := range foreignIPVS {
			foreign = foreign || l == "ipvs: "+f
		}
		if !foreign {
			left = append(left, l)
		}
	}
	if len(left) > 0 {
		t.Errorf("kipvs cleanup with foreign state present left kipvs's own state behind:\n%s", strings.Join(left, "\n"))
	}
	removeForeign(t)
}
