package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kipvs/kipvs/internal/version"
)

const (
	kubeProxy = "kubeproxy"
	kipvs     = "kipvs"
)

// Metrics holds every metric kipvs exports.
type Metrics struct {
	SyncProxyRulesLatency        *prometheus.HistogramVec // {ip_family}
	SyncFullProxyRulesLatency    *prometheus.HistogramVec // {ip_family}
	SyncPartialProxyRulesLatency *prometheus.HistogramVec // {ip_family}
	SyncProxyRulesLastTimestamp  *prometheus.GaugeVec     // {ip_family}
	SyncProxyRulesLastQueued     *prometheus.GaugeVec     // {ip_family}
	NetworkProgrammingLatency    *prometheus.HistogramVec // {ip_family}
	EndpointChangesPending       prometheus.Gauge
	EndpointChangesTotal         prometheus.Counter
	ServiceChangesPending        prometheus.Gauge
	ServiceChangesTotal          prometheus.Counter
	IPTablesRestoreFailuresTotal *prometheus.CounterVec   // {ip_family}
	NFTablesSyncFailuresTotal    *prometheus.CounterVec   // {ip_family}: the nftables filter backend's
	IPTablesRulesTotal           *prometheus.GaugeVec     // {table, ip_family}
	IPTablesRulesLastSync        *prometheus.GaugeVec     // {table, ip_family}
	NoLocalEndpointsTotal        *prometheus.GaugeVec     // {traffic_policy, ip_family}
	ProxyHealthzTotal            *prometheus.CounterVec   // {code}
	ProxyLivezTotal              *prometheus.CounterVec   // {code}
	ConntrackReconcileLatency    *prometheus.HistogramVec // {ip_family}
	ConntrackDeletedEntries      *prometheus.CounterVec   // {ip_family}

	ObjectsChanged *prometheus.CounterVec // kipvs_sync_objects_changed_total{kind, op, ip_family}
	DriftRepaired  *prometheus.CounterVec // kipvs_kernel_drift_repaired_total{kind, ip_family}
	SyncFull       *prometheus.CounterVec // kipvs_sync_full_total{ip_family}
	SyncIncr       *prometheus.CounterVec // kipvs_sync_incremental_total{ip_family}
	SyncErrors     *prometheus.CounterVec // kipvs_sync_errors_total{ip_family}
	SourceErrors   *prometheus.CounterVec // kipvs_source_errors_total{source}

	SourceFileReloadErrors prometheus.Counter // kipvs_source_file_reload_errors_total
	SourceFileLastGood     prometheus.Gauge   // kipvs_source_file_last_good_timestamp_seconds

	ClusterCIDROverlapsServiceCIDR prometheus.Gauge // kipvs_cluster_cidr_overlaps_service_cidr

	ServicesNotProgrammed *prometheus.GaugeVec   // kipvs_services_not_programmed{reason, ip_family}
	CapacityTopNamespace  *prometheus.GaugeVec   // kipvs_capacity_top_namespace{budget, namespace, ip_family}
	ObjectsOutOfSync      *prometheus.GaugeVec   // kipvs_sync_objects_out_of_sync{kind, ip_family}
	ObjectRetries         *prometheus.CounterVec // kipvs_sync_object_retries_total{kind, ip_family}
}

// alpha is help as component-base exports a metric of stability level ALPHA: kube-proxy's
// metrics all are, and their HELP lines start with "[ALPHA] ".
func alpha(help string) string { return "[ALPHA] " + help }

// buildInfo is component-base's kubernetes_build_info, which kube-proxy exports: a constant
// 1 labeled with the build's version information (here kipvs's own).
func buildInfo() prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubernetes_build_info",
		Help: alpha("A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running."),
	}, []string{"major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version", "compiler", "platform"})
	i := version.Get()
	g.WithLabelValues(i.Major, i.Minor, i.Version, i.GitCommit, i.GitTreeState, i.BuildDate, i.GoVersion, i.Compiler, i.Platform).Set(1)
	return g
}

// networkProgrammingBuckets are kube-proxy's: a 0 bucket, 0.25 s and 0.5 s, every second to
// 59 s, every 5 s to 115 s, every 30 s to 5 min.
func networkProgrammingBuckets() []float64 {
	b := []float64{0}
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	return append(b, prometheus.LinearBuckets(120, 30, 7)...)
}

// New creates the metrics and registers them (plus kubernetes_build_info and the Go and
// process collectors, as kube-proxy's legacy registry has them) on reg. client-go's
// rest_client_* metrics are separate: see NewRESTClient.
func New(reg prometheus.Registerer) *Metrics {
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	fam := []string{"ip_family"}
	m := &Metrics{
		SyncProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_duration_seconds",
			Help: alpha("SyncProxyRules latency in seconds"), Buckets: syncBuckets}, fam),
		SyncFullProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxy, Name: "sync_full_proxy_rules_duration_seconds",
			Help: alpha("SyncProxyRules latency in seconds for full resyncs"), Buckets: syncBuckets}, fam),
		SyncPartialProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxy, Name: "sync_partial_proxy_rules_duration_seconds",
			Help: alpha("SyncProxyRules latency in seconds for partial resyncs"), Buckets: syncBuckets}, fam),
		SyncProxyRulesLastTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_last_timestamp_seconds",
			Help: alpha("The last time proxy rules were successfully synced")}, fam),
		SyncProxyRulesLastQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_last_queued_timestamp_seconds",
			Help: alpha("The last time a sync of proxy rules was queued")}, fam),
		NetworkProgrammingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxy, Name: "network_programming_duration_seconds",
			Help: alpha("In Cluster Network Programming Latency in seconds"), Buckets: networkProgrammingBuckets()}, fam),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_endpoint_changes_pending",
			Help: alpha("Pending proxy rules Endpoint changes")}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_endpoint_changes_total",
			Help: alpha("Cumulative proxy rules Endpoint changes")}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_service_changes_pending",
			Help: alpha("Pending proxy rules Service changes")}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_service_changes_total",
			Help: alpha("Cumulative proxy rules Service changes")}),
		IPTablesRestoreFailuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_iptables_restore_failures_total",
			Help: alpha("Cumulative proxy iptables restore failures")}, fam),
		NFTablesSyncFailuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_nftables_sync_failures_total",
			Help: alpha("Cumulative proxy nftables sync failures")}, fam),
		IPTablesRulesTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_iptables_total",
			Help: alpha("Total number of iptables rules owned by kube-proxy")}, []string{"table", "ip_family"}),
		IPTablesRulesLastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_iptables_last",
			Help: alpha("Number of iptables rules written by kube-proxy in last sync")}, []string{"table", "ip_family"}),
		NoLocalEndpointsTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxy, Name: "sync_proxy_rules_no_local_endpoints_total",
			Help: alpha("Number of services with a Local traffic policy and no endpoints")}, []string{"traffic_policy", "ip_family"}),
		ProxyHealthzTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxy, Name: "proxy_healthz_total",
			Help: alpha("Cumulative proxy healthz HTTP status")}, []string{"code"}),
		ProxyLivezTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxy, Name: "proxy_livez_total",
			Help: alpha("Cumulative proxy livez HTTP status")}, []string{"code"}),
		ConntrackReconcileLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxy, Name: "conntrack_reconciler_sync_duration_seconds",
			Help: alpha("ReconcileConntrackFlowsLatency latency in seconds"), Buckets: syncBuckets}, fam),
		ConntrackDeletedEntries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxy, Name: "conntrack_reconciler_deleted_entries_total",
			Help: alpha("Cumulative conntrack flows deleted by conntrack reconciler")}, fam),

		ObjectsChanged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: kipvs, Name: "sync_objects_changed_total",
			Help: "Kernel objects kipvs created, updated or deleted, by kind (virtual_server, real_server, ipset_member, address, iptables_table) and op (add, update, delete)"},
			[]string{"kind", "op", "ip_family"}),
		DriftRepaired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: kipvs, Name: "kernel_drift_repaired_total",
			Help: "Kernel objects a full sync found changed behind kipvs's back and repaired, by kind"},
			[]string{"kind", "ip_family"}),
		SyncFull: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: kipvs, Name: "sync_full_total",
			Help: "Full syncs: the whole desired state compared with the kernel as read back"}, fam),
		SyncIncr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: kipvs, Name: "sync_incremental_total",
			Help: "Incremental syncs: only the objects of changed Services compared and applied"}, fam),
		SyncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: kipvs, Name: "sync_errors_total",
			Help: "Syncs that failed: a kernel read (a full sync with backoff follows) or some objects (each retried on its own, see kipvs_sync_objects_out_of_sync)"}, fam),
		SourceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: kipvs, Name: "source_errors_total",
			Help: "Objects from the standalone source file that could not be decoded and were skipped"}, []string{"source"}),
		SourceFileReloadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: kipvs, Name: "source_file_reload_errors_total",
			Help: "Revisions of the source file rejected whole (empty, unparseable, too big, not a regular file) and failures to read it; the last good revision stays in effect"}),
		SourceFileLastGood: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: kipvs, Name: "source_file_last_good_timestamp_seconds",
			Help: "When the source file revision in effect was applied"}),
		ClusterCIDROverlapsServiceCIDR: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: kipvs, Name: "cluster_cidr_overlaps_service_cidr",
			Help: "1 while a clusterCIDR is, contains or lies inside a Service CIDR (a misconfiguration; it is then not used to detect local traffic), else 0"}),
		ObjectsOutOfSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: kipvs, Name: "sync_objects_out_of_sync",
			Help: "Kernel objects whose last change failed and that wait for their own retry, by kind (virtual_server, ipset_member, address, ipset, iptables_ruleset)"},
			[]string{"kind", "ip_family"}),
		ObjectRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: kipvs, Name: "sync_object_retries_total",
			Help: "Retries scheduled, by kind: each failed change of a kernel object is retried for that object alone, with exponential backoff"},
			[]string{"kind", "ip_family"}),
		ServicesNotProgrammed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: kipvs, Name: "services_not_programmed",
			Help: "Services not programmed on this node because of a capacity limit, by reason: TooManySetMembers (--kipvs-max-service-set-members), SetCapacityExceeded (--kipvs-max-set-members), TooManyVirtualServers (--kipvs-max-service-virtual-servers), TooManyRealServers (--kipvs-max-service-real-servers), RealServerCapacityExceeded (--kipvs-max-real-servers)"},
			[]string{"reason", "ip_family"}),
		CapacityTopNamespace: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: kipvs, Name: "capacity_top_namespace",
			Help: "For each node-wide budget in use (an ipset by kind, cluster-ip, ...; real-servers), how much of it the namespace whose Services hold the most of it holds: one series per budget, labelled with that namespace"},
			[]string{"budget", "namespace", "ip_family"}),
	}
	reg.MustRegister(
		m.SyncProxyRulesLatency, m.SyncFullProxyRulesLatency, m.SyncPartialProxyRulesLatency,
		m.SyncProxyRulesLastTimestamp, m.SyncProxyRulesLastQueued, m.NetworkProgrammingLatency,
		m.EndpointChangesPending, m.EndpointChangesTotal, m.ServiceChangesPending, m.ServiceChangesTotal,
		m.IPTablesRestoreFailuresTotal, m.NFTablesSyncFailuresTotal, m.IPTablesRulesTotal, m.IPTablesRulesLastSync, m.NoLocalEndpointsTotal,
		m.ProxyHealthzTotal, m.ProxyLivezTotal, m.ConntrackReconcileLatency, m.ConntrackDeletedEntries,
		m.ObjectsChanged, m.DriftRepaired, m.SyncFull, m.SyncIncr, m.SyncErrors, m.SourceErrors,
		m.SourceFileReloadErrors, m.SourceFileLastGood, m.ClusterCIDROverlapsServiceCIDR, m.ServicesNotProgrammed,
		m.CapacityTopNamespace,
		m.ObjectsOutOfSync, m.ObjectRetries,
		buildInfo(),
		// component-base's legacy registry exports every runtime/metrics series besides the
		// go_memstats_* set.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}
