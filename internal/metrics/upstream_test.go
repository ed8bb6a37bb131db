package metrics

import (
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kipvs/kipvs/internal/version"
)

// upstreamHelp is the HELP line kube-proxy v1.34 exports for each kubeproxy_* metric kipvs
// exports, as component-base renders it: "[<stability level>] <help>" (every one of them is
// ALPHA). Read from pkg/proxy/metrics/metrics.go and component-base/metrics/opts.go.
var upstreamHelp = map[string]string{
	"kubeproxy_sync_proxy_rules_duration_seconds":                "[ALPHA] SyncProxyRules latency in seconds",
	"kubeproxy_sync_full_proxy_rules_duration_seconds":           "[ALPHA] SyncProxyRules latency in seconds for full resyncs",
	"kubeproxy_sync_partial_proxy_rules_duration_seconds":        "[ALPHA] SyncProxyRules latency in seconds for partial resyncs",
	"kubeproxy_sync_proxy_rules_last_timestamp_seconds":          "[ALPHA] The last time proxy rules were successfully synced",
	"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds":   "[ALPHA] The last time a sync of proxy rules was queued",
	"kubeproxy_network_programming_duration_seconds":             "[ALPHA] In Cluster Network Programming Latency in seconds",
	"kubeproxy_sync_proxy_rules_endpoint_changes_pending":        "[ALPHA] Pending proxy rules Endpoint changes",
	"kubeproxy_sync_proxy_rules_endpoint_changes_total":          "[ALPHA] Cumulative proxy rules Endpoint changes",
	"kubeproxy_sync_proxy_rules_service_changes_pending":         "[ALPHA] Pending proxy rules Service changes",
	"kubeproxy_sync_proxy_rules_service_changes_total":           "[ALPHA] Cumulative proxy rules Service changes",
	"kubeproxy_sync_proxy_rules_iptables_restore_failures_total": "[ALPHA] Cumulative proxy iptables restore failures",
	"kubeproxy_sync_proxy_rules_iptables_total":                  "[ALPHA] Total number of iptables rules owned by kube-proxy",
	"kubeproxy_sync_proxy_rules_iptables_last":                   "[ALPHA] Number of iptables rules written by kube-proxy in last sync",
	"kubeproxy_sync_proxy_rules_no_local_endpoints_total":        "[ALPHA] Number of services with a Local traffic policy and no endpoints",
	"kubeproxy_proxy_healthz_total":                              "[ALPHA] Cumulative proxy healthz HTTP status",
	"kubeproxy_proxy_livez_total":                                "[ALPHA] Cumulative proxy livez HTTP status",
	"kubeproxy_conntrack_reconciler_sync_duration_seconds":       "[ALPHA] ReconcileConntrackFlowsLatency latency in seconds",
	"kubeproxy_conntrack_reconciler_deleted_entries_total":       "[ALPHA] Cumulative conntrack flows deleted by conntrack reconciler",
	"kubernetes_build_info":                                      "[ALPHA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
}

// Every kubeproxy_* metric kipvs exports has kube-proxy's exact HELP text, stability prefix
// included, and kube-proxy's IPVS-mode metrics are all there.
func TestUpstreamHelpTexts(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	touchAll(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "kubeproxy_") || f.GetName() == "kubernetes_build_info" {
			got[f.GetName()] = f.GetHelp()
		}
	}
	if diff := cmp.Diff(upstreamHelp, got); diff != "" {
		t.Errorf("HELP texts differ from kube-proxy v1.34's (-upstream +kipvs):\n%s", diff)
	}
}

// The conntrack reconciler metrics have kube-proxy's labels and buckets.
func TestConntrackReconcilerMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	m.ConntrackReconcileLatency.WithLabelValues("IPv4").Observe(0.003)
	m.ConntrackDeletedEntries.WithLabelValues("IPv4").Add(2)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buckets []float64
	for _, f := range families {
		switch f.GetName() {
		case "kubeproxy_conntrack_reconciler_sync_duration_seconds":
			for _, b := range f.Metric[0].GetHistogram().GetBucket() {
				buckets = append(buckets, b.GetUpperBound())
			}
			if l := f.Metric[0].GetLabel(); len(l) != 1 || l[0].GetName() != "ip_family" {
				t.Errorf("%s labels %v", f.GetName(), l)
			}
		case "kubeproxy_conntrack_reconciler_deleted_entries_total":
			if l := f.Metric[0].GetLabel(); len(l) != 1 || l[0].GetName() != "ip_family" || f.Metric[0].GetCounter().GetValue() != 2 {
				t.Errorf("%s = %v", f.GetName(), f.Metric[0])
			}
		}
	}
	if diff := cmp.Diff(prometheus.ExponentialBuckets(0.001, 2, 15), buckets); diff != "" {
		t.Errorf("conntrack reconciler buckets (-want +got):\n%s", diff)
	}
}

// kubernetes_build_info carries component-base's labels, filled from kipvs's version.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	New(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		if f.GetName() != "kubernetes_build_info" {
			continue
		}
		if len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 1 {
			t.Fatalf("kubernetes_build_info = %v, want one series of value 1", f.Metric)
		}
		for _, l := range f.Metric[0].Label {
			got[l.GetName()] = l.GetValue()
		}
	}
	want := map[string]string{
		"major": "", "minor": "", "git_version": "dev", "git_commit": "unknown", "git_tree_state": "",
		"build_date": "unknown", "go_version": runtime.Version(), "compiler": runtime.Compiler,
		"platform": runtime.GOOS + "/" + runtime.GOARCH,
	}
	if version.Get().Version != "dev" {
		t.Skip("built with a stamped version")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kubernetes_build_info labels (-want +got):\n%s", diff)
	}
}

// The Go collector exports the runtime/metrics series as component-base's legacy registry
// does (collectors.MetricsAll), besides the go_memstats_* set.
func TestGoCollectorAsUpstream(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	New(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "go_gc_heap_allocs_bytes_total", "go_sched_goroutines_goroutines", "process_start_time_seconds", "process_open_fds"} {
		if !have[name] {
			t.Errorf("%s is not exported", name)
		}
	}
}

// touchAll gives every vector of m a series, so that Gather lists it.
func touchAll(m *Metrics) {
	for _, h := range []*prometheus.HistogramVec{m.SyncProxyRulesLatency, m.SyncFullProxyRulesLatency,
		m.SyncPartialProxyRulesLatency, m.NetworkProgrammingLatency, m.ConntrackReconcileLatency} {
		h.WithLabelValues("IPv4").Observe(0.01)
	}
	for _, g := range []*prometheus.GaugeVec{m.SyncProxyRulesLastTimestamp, m.SyncProxyRulesLastQueued} {
		g.WithLabelValues("IPv4").Set(1)
	}
	m.EndpointChangesPending.Set(1)
	m.EndpointChangesTotal.Inc()
	m.ServiceChangesPending.Set(1)
	m.ServiceChangesTotal.Inc()
	m.IPTablesRestoreFailuresTotal.WithLabelValues("IPv4").Inc()
	m.ConntrackDeletedEntries.WithLabelValues("IPv4").Inc()
	m.IPTablesRulesTotal.WithLabelValues("nat", "IPv4").Set(3)
	m.IPTablesRulesLastSync.WithLabelValues("nat", "IPv4").Set(3)
	m.NoLocalEndpointsTotal.WithLabelValues("external", "IPv4").Set(0)
	m.ProxyHealthzTotal.WithLabelValues("200").Inc()
	m.ProxyLivezTotal.WithLabelValues("200").Inc()
}
