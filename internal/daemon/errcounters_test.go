package daemon

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// The error counters exist at 0 for every family from the start, before any sync: a counter
// that first appears at 1 is invisible to rate() and increase(), so an alert on them
// (deploy/monitoring) would miss the first error, and a scrape of a healthy kipvs would not
// show them at all.
func TestErrorCountersStartAtZero(t *testing.T) {
	node := newFakeNode()
	reg := prometheus.NewRegistry()
	newDaemon(t, testConfig(t), zaptest.NewLogger(t), node.deps(nil, reg))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string][]string{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "ip_family" && metricValue(m) == 0 {
					series[mf.GetName()] = append(series[mf.GetName()], l.GetValue())
				}
			}
		}
	}
	for _, name := range []string{"kipvs_sync_errors_total", "kubeproxy_sync_proxy_rules_iptables_restore_failures_total", "kubeproxy_sync_proxy_rules_nftables_sync_failures_total"} {
		if got := series[name]; len(got) != 1 || got[0] != "IPv4" {
			t.Errorf("%s at 0 before any sync: families %q, want [IPv4]", name, got)
		}
	}
}
