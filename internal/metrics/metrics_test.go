package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Dashboards depend on these exact names and label sets.
func TestNamesAndLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	m.SyncProxyRulesLatency.WithLabelValues("IPv4").Observe(0.01)
	m.SyncFullProxyRulesLatency.WithLabelValues("IPv4").Observe(0.01)
	m.SyncPartialProxyRulesLatency.WithLabelValues("IPv4").Observe(0.01)
	m.SyncProxyRulesLastTimestamp.WithLabelValues("IPv4").SetToCurrentTime()
	m.SyncProxyRulesLastQueued.WithLabelValues("IPv4").SetToCurrentTime()
	m.NetworkProgrammingLatency.WithLabelValues("IPv4").Observe(1.2)
	m.EndpointChangesPending.Set(1)
	m.EndpointChangesTotal.Inc()
	m.ServiceChangesPending.Set(1)
	m.ServiceChangesTotal.Inc()
	m.IPTablesRestoreFailuresTotal.WithLabelValues("IPv4").Inc()
	m.IPTablesRulesTotal.WithLabelValues("nat", "IPv4").Set(3)
	m.IPTablesRulesLastSync.WithLabelValues("nat", "IPv4").Set(3)
	m.NoLocalEndpointsTotal.WithLabelValues("external", "IPv4").Set(0)
	m.ProxyHealthzTotal.WithLabelValues("200").Inc()
	m.ProxyLivezTotal.WithLabelValues("200").Inc()
	m.ConntrackReconcileLatency.WithLabelValues("IPv4").Observe(0.01)
	m.ConntrackDeletedEntries.WithLabelValues("IPv4").Add(0)
	m.ObjectsChanged.WithLabelValues("virtual_server", "add", "IPv4").Inc()
	m.DriftRepaired.WithLabelValues("ipset_member", "IPv4").Inc()
	m.SyncFull.WithLabelValues("IPv4").Inc()
	m.SyncIncr.WithLabelValues("IPv4").Inc()
	m.SyncErrors.WithLabelValues("IPv4").Inc()
	m.SourceErrors.WithLabelValues("file").Inc()
	m.SourceFileReloadErrors.Inc()
	m.SourceFileLastGood.SetToCurrentTime()

	families, err := reg.Gather() // the pedantic registry checks consistency
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		var labels []string
		if len(f.Metric) > 0 {
			for _, l := range f.Metric[0].Label {
				labels = append(labels, l.GetName())
			}
		}
		got[f.GetName()] = f.GetType().String() + "{" + strings.Join(labels, ",") + "}"
	}
	for name, want := range map[string]string{
		"kubeproxy_sync_proxy_rules_duration_seconds":                "HISTOGRAM{ip_family}",
		"kubeproxy_sync_full_proxy_rules_duration_seconds":           "HISTOGRAM{ip_family}",
		"kubeproxy_sync_partial_proxy_rules_duration_seconds":        "HISTOGRAM{ip_family}",
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds":          "GAUGE{ip_family}",
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds":   "GAUGE{ip_family}",
		"kubeproxy_network_programming_duration_seconds":             "HISTOGRAM{ip_family}",
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending":        "GAUGE{}",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total":          "COUNTER{}",
		"kubeproxy_sync_proxy_rules_service_changes_pending":         "GAUGE{}",
		"kubeproxy_sync_proxy_rules_service_changes_total":           "COUNTER{}",
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total": "COUNTER{ip_family}",
		"kubeproxy_sync_proxy_rules_iptables_total":                  "GAUGE{ip_family,table}",
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total":        "GAUGE{ip_family,traffic_policy}",
		"kubeproxy_proxy_healthz_total":                              "COUNTER{code}",
		"kubeproxy_proxy_livez_total":                                "COUNTER{code}",
		"kubeproxy_conntrack_reconciler_sync_duration_seconds":       "HISTOGRAM{ip_family}",
		"kubeproxy_conntrack_reconciler_deleted_entries_total":       "COUNTER{ip_family}",
		"kubernetes_build_info":                                      "GAUGE{build_date,compiler,git_commit,git_tree_state,git_version,go_version,major,minor,platform}",
		"kipvs_sync_objects_changed_total":                           "COUNTER{ip_family,kind,op}",
		"kipvs_kernel_drift_repaired_total":                          "COUNTER{ip_family,kind}",
		"kipvs_sync_full_total":                                      "COUNTER{ip_family}",
		"kipvs_sync_incremental_total":                               "COUNTER{ip_family}",
		"kipvs_source_errors_total":                                  "COUNTER{source}",
		"kipvs_source_file_reload_errors_total":                      "COUNTER{}",
		"kipvs_source_file_last_good_timestamp_seconds":              "GAUGE{}",
		"kipvs_cluster_cidr_overlaps_service_cidr":                   "GAUGE{}",
	} {
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
}

func TestNetworkProgrammingBuckets(t *testing.T) {
	b := networkProgrammingBuckets()
	if len(b) != 1+2+59+12+7 || b[0] != 0 || b[1] != 0.25 || b[3] != 1 || b[len(b)-1] != 300 {
		t.Errorf("buckets = %v", b)
	}
}

// Two instances on two registries must not collide: nothing is global.
func TestNoGlobalState(t *testing.T) {
	New(prometheus.NewRegistry())
	New(prometheus.NewRegistry())
}
