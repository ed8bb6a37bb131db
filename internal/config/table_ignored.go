package config

import (
	"net/netip"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ignoredHelp ends the help of the kube-proxy flags kipvs accepts and ignores.
const ignoredHelp = " Accepted for compatibility with kube-proxy; kipvs ignores it."

// ignoredEntries are kube-proxy's settings kipvs accepts, so that existing files and
// command lines keep working, but does not act on (feature gates are kept and rendered).
// They are rendered as kube-proxy's defaults, except the other modes' sync periods, which
// kube-proxy writes as 0s in IPVS mode: it keeps one pair, the active mode's.
func ignoredEntries() []entry {
	zeroDuration := func(get func(*kpConfig) *metav1.Duration) func(*Config, *kpConfig) {
		return func(_ *Config, k *kpConfig) { *get(k) = metav1.Duration{} }
	}
	iptablesSync := func(k *kpConfig) *metav1.Duration { return &k.IPTables.SyncPeriod }
	iptablesMinSync := func(k *kpConfig) *metav1.Duration { return &k.IPTables.MinSyncPeriod }
	nftablesSync := func(k *kpConfig) *metav1.Duration { return &k.NFTables.SyncPeriod }
	nftablesMinSync := func(k *kpConfig) *metav1.Duration { return &k.NFTables.MinSyncPeriod }
	return []entry{
		{field: "iptables.syncPeriod", flag: "iptables-sync-period", kind: kindIgnored, sample: "10s",
			reason: "used in iptables mode only; kipvs uses ipvs.syncPeriod", flagReason: "used in iptables mode only; kipvs uses --ipvs-sync-period",
			help: "iptables mode only." + ignoredHelp, register: unusedFlag((*pflag.FlagSet).DurationVar, 30*time.Second),
			write: zeroDuration(iptablesSync), unused: func(k *kpConfig) any { return iptablesSync(k).Duration }},
		{field: "iptables.minSyncPeriod", flag: "iptables-min-sync-period", kind: kindIgnored, sample: "2s",
			reason: "used in iptables mode only; kipvs uses ipvs.minSyncPeriod", flagReason: "used in iptables mode only; kipvs uses --ipvs-min-sync-period",
			help: "iptables mode only." + ignoredHelp, register: unusedFlag((*pflag.FlagSet).DurationVar, time.Second),
			write: zeroDuration(iptablesMinSync), unused: func(k *kpConfig) any { return iptablesMinSync(k).Duration }},
		{field: "iptables.localhostNodePorts", flag: "iptables-localhost-nodeports", kind: kindIgnored, sample: "false",
			reason: "used in iptables mode only; IPVS mode never serves NodePorts on localhost",
			help:   "iptables mode only." + ignoredHelp, register: unusedFlag((*pflag.FlagSet).BoolVar, true),
			unused: func(k *kpConfig) any { return k.IPTables.LocalhostNodePorts }},
		{field: "nftables.masqueradeAll", kind: kindIgnored, sample: "true",
			reason: "used in nftables mode only; kipvs uses iptables.masqueradeAll",
			unused: func(k *kpConfig) any { return k.NFTables.MasqueradeAll }},
		{field: "nftables.masqueradeBit", kind: kindIgnored, sample: "5",
			reason: "used in nftables mode only; kipvs uses iptables.masqueradeBit",
			unused: func(k *kpConfig) any { return k.NFTables.MasqueradeBit }},
		{field: "nftables.syncPeriod", kind: kindIgnored, sample: "20s", reason: "used in nftables mode only; kipvs uses ipvs.syncPeriod",
			write: zeroDuration(nftablesSync), unused: func(k *kpConfig) any { return nftablesSync(k).Duration }},
		{field: "nftables.minSyncPeriod", kind: kindIgnored, sample: "3s", reason: "used in nftables mode only; kipvs uses ipvs.minSyncPeriod",
			write: zeroDuration(nftablesMinSync), unused: func(k *kpConfig) any { return nftablesMinSync(k).Duration }},
		{field: "winkernel", kind: kindIgnored, sample: "{networkName: vxlan0}", reason: "used on Windows only",
			unused: func(k *kpConfig) any { return k.Winkernel }},
		{field: "windowsRunAsService", kind: kindIgnored, sample: "true", reason: "used on Windows only",
			unused: func(k *kpConfig) any { return k.WindowsRunAsService }},
		{field: "portRange", kind: kindIgnored, sample: "30000-32767", reason: "not used by kube-proxy either",
			unused: func(k *kpConfig) any { return k.PortRange }},
		{field: "showHiddenMetricsForVersion", flag: "show-hidden-metrics-for-version", kind: kindIgnored,
			sample: "1.33", fileSample: `"1.33"`, reason: "kipvs has no hidden metrics",
			help: "Re-enable metrics hidden in this release." + ignoredHelp, register: unusedFlag((*pflag.FlagSet).StringVar, ""),
			unused: func(k *kpConfig) any { return k.ShowHiddenMetricsForVersion }},
		featureGatesEntry(),
	}
}

// ignoredLoggingEntries are the logging settings kipvs accepts and does not act on. As in
// kube-proxy, their flags apply with --config too.
func ignoredLoggingEntries() []entry {
	type routing struct {
		TextSplit, JSONSplit   bool
		TextBuffer, JSONBuffer int64
	}
	return []entry{
		{field: "logging.flushFrequency", flag: "log-flush-frequency", kind: kindIgnored, withConfig: true, sample: "10s",
			reason: "log buffering is not supported",
			help:   "Longest time log output is buffered." + ignoredHelp, register: unusedFlag((*pflag.FlagSet).DurationVar, 5*time.Second),
			unused: func(k *kpConfig) any { return k.Logging.FlushFrequency.Duration.Duration }},
		{field: "logging.options", kind: kindIgnored, sample: "{text: {splitStream: true}}",
			reason: "split output streams and buffering are not supported",
			unused: func(k *kpConfig) any {
				o := k.Logging.Options
				return routing{o.Text.SplitStream, o.JSON.SplitStream, o.Text.InfoBufferSize.Value(), o.JSON.InfoBufferSize.Value()}
			}},
		// Flags of logging.options.
		{flag: "log-text-split-stream", kind: kindIgnored, withConfig: true, sample: "true", reason: "split output streams are not supported",
			help: "Split text log output between stdout and stderr." + ignoredHelp, register: unusedFlag((*pflag.FlagSet).BoolVar, false)},
		{flag: "log-text-info-buffer-size", kind: kindIgnored, withConfig: true, sample: "1Mi", reason: "log buffering is not supported",
			help: "Buffer size of split text log output." + ignoredHelp, register: unusedFlag(textVar("quantity"), "0")},
		{flag: "log-json-split-stream", kind: kindIgnored, withConfig: true, sample: "true", reason: "split output streams are not supported",
			help: "Split JSON log output between stdout and stderr." + ignoredHelp, register: unusedFlag((*pflag.FlagSet).BoolVar, false)},
		{flag: "log-json-info-buffer-size", kind: kindIgnored, withConfig: true, sample: "1Mi", reason: "log buffering is not supported",
			help: "Buffer size of split JSON log output." + ignoredHelp, register: unusedFlag(textVar("quantity"), "0")},
	}
}

// documentEntries are the fields that are not settings: the file's type, and the fields
// older kube-proxy releases had in v1alpha1 that long-lived clusters (kubeadm's kube-proxy
// ConfigMap, for one) still carry. kube-proxy v1.34 reads such files through its lenient
// fallback; kipvs names these known fields in a notice with the reason, where any other
// unknown field gets a warning.
func documentEntries() []entry {
	return []entry{
		{field: "apiVersion", kind: kindTypeMeta},
		{field: "kind", kind: kindTypeMeta},
		{field: "udpIdleTimeout", kind: kindObsolete, sample: "250ms",
			reason: "an old kube-proxy field of the userspace proxy mode, since removed"},
		{field: "resourceContainer", kind: kindObsolete, sample: "/kube-proxy", reason: "an old kube-proxy field, since removed"},
		{field: "conntrack.max", kind: kindObsolete, sample: "0",
			reason: "an old kube-proxy field, since removed; conntrack.maxPerCore and conntrack.min set the limit"},
	}
}

// kipvsEntries are kipvs's own flags, which have no field in the file and apply with
// --config too.
func kipvsEntries() []entry {
	k := func(flag, sample, help string) entry {
		return entry{flag: flag, withConfig: true, sample: sample, help: help}
	}
	return []entry{
		flagOnly(k("kipvs-source-file", "/srv/services.yaml",
			"Read Services and EndpointSlices from this file instead of watching the API server, to run without a cluster. "+
				"--kubeconfig and --master are then not used."),
			(*pflag.FlagSet).StringVar, func(c *Config) *string { return &c.Kipvs.SourceFile }),
		kipvsCIDRs(k("kipvs-service-cidr", "10.96.0.0/12,fd00:96::/108",
			"The Service CIDR (the range ClusterIPs come from), or one IPv4 and one IPv6 CIDR separated by a comma. "+
				"A --cluster-cidr that equals or overlaps it is reported (ERROR, Node Event, metric) and not used to detect local traffic. Used until the Service CIDRs are known from the API server."),
			func(c *Config) *[]netip.Prefix { return &c.Kipvs.ServiceCIDRs }),
		flagOnly(k("kipvs-filter-backend", "nftables",
			"What writes the packet filter next to IPVS: \"iptables\" (the KUBE-* iptables chains and ipsets kube-proxy's IPVS mode writes) or \"nftables\" "+
				"(one nf_tables table per family, ip kipvs and ip6 kipvs, with nft: no iptables rule and no ipset). Starting with one removes what kipvs left with the other."),
			filterBackendVar, func(c *Config) *FilterBackend { return &c.Kipvs.FilterBackend }),
		flagOnly(k("kipvs-graceful-period", "5s",
			"How long a removed TCP endpoint keeps its IPVS real server at weight 0 so open connections can finish, before it is deleted. "+
				"UDP and SCTP real servers are deleted at once, as kube-proxy does. 0: no time limit, a removed TCP real server drains until its connections end, as kube-proxy does."),
			(*pflag.FlagSet).DurationVar, func(c *Config) *time.Duration { return &c.Kipvs.GracefulPeriod }),
		kipvsCIDRs(k("kipvs-external-ip-cidrs", "203.0.113.0/24,fd00:e::/64",
			"Comma-separated CIDRs (both families) that Services' spec.externalIPs may come from; an external IP outside them is not served "+
				"and gets a Warning Event on its Service. Empty (the default) allows every address, as kube-proxy does (see CVE-2020-8554)."),
			func(c *Config) *[]netip.Prefix { return &c.Kipvs.ExternalIPCIDRs }),
		kipvsCIDRs(k("kipvs-load-balancer-ip-cidrs", "192.0.2.0/24",
			"Comma-separated CIDRs (both families) that Services' status.loadBalancer.ingress IPs may come from; an ingress IP outside them is not served "+
				"and gets a Warning Event on its Service. Empty (the default) allows every address. A load balancer IP that is an address on one of the node's own links is served only inside these CIDRs."),
			func(c *Config) *[]netip.Prefix { return &c.Kipvs.LoadBalancerIPCIDRs }),
		flagOnly(k("kipvs-endpoint-metrics", "true",
			"Export IPVS traffic counters per endpoint (kipvs_endpoint_*, labelled with the endpoint's ip:port) as well as per Service port. "+
				"At most 10000 endpoints per scrape; the rest are dropped and counted in kipvs_endpoint_stats_dropped_total."),
			(*pflag.FlagSet).BoolVar, func(c *Config) *bool { return &c.Kipvs.EndpointMetrics }),
		flagOnly(k("kipvs-max-service-series", "70000",
			"The most kipvs_service_* series one scrape of /metrics exports (7 per Service port, IP family and VIP kind, the first in label order); "+
				"the rest are dropped and counted in kipvs_service_stats_dropped_total. 0: no limit."),
			(*pflag.FlagSet).IntVar, func(c *Config) *int { return &c.Kipvs.MaxServiceSeries }),
		flagOnly(k("kipvs-debug-endpoints", "true",
			"Serve /debug/kipvs/state and /debug/kipvs/virtualservers on the metrics server (what kipvs doctor's drift checks and kipvs status --services read). "+
				"Off by default: they list every Service, pod IP and rule of the node to anyone who can reach the metrics address."),
			(*pflag.FlagSet).BoolVar, func(c *Config) *bool { return &c.Kipvs.DebugEndpoints }),
		flagOnly(k("kipvs-max-service-set-members", "100",
			"The most ipset members one Service may need (its ports x cluster, external and load balancer IPs x source ranges, and its local endpoints x ports). "+
				"A larger Service is not programmed and gets a Warning Event naming the field; every other Service is. 0: no limit."),
			(*pflag.FlagSet).IntVar, func(c *Config) *int { return &c.Kipvs.MaxServiceSetMembers }),
		flagOnly(k("kipvs-max-set-members", "0",
			"The most members one ipset may hold, all Services together (sets grow past ipset's default maxelem of 65536 as needed, up to this). "+
				"A Service that would take a set beyond it is not programmed, with a Warning Event, until there is room. 0: no limit."),
			(*pflag.FlagSet).IntVar, func(c *Config) *int { return &c.Kipvs.MaxSetMembers }),
		flagOnly(k("kipvs-max-service-virtual-servers", "100",
			"The most IPVS virtual servers one Service may need (its ports x cluster, external and load balancer IPs, and its node ports x node addresses). "+
				"A larger Service is not programmed and gets a Warning Event naming the field; every other Service is. 0: no limit."),
			(*pflag.FlagSet).IntVar, func(c *Config) *int { return &c.Kipvs.MaxServiceVirtualServers }),
		flagOnly(k("kipvs-max-service-real-servers", "100",
			"The most IPVS real servers one Service may need (each of its virtual servers x its endpoints). "+
				"A larger Service is not programmed and gets a Warning Event naming the field; every other Service is. 0: no limit."),
			(*pflag.FlagSet).IntVar, func(c *Config) *int { return &c.Kipvs.MaxServiceRealServers }),
		flagOnly(k("kipvs-max-real-servers", "0",
			"The most IPVS real servers the node may have, all Services together; the last 1/16 is kept for kube-system and default. "+
				"A Service that would take the node beyond it is not programmed, with a Warning Event, until there is room. 0: no limit."),
			(*pflag.FlagSet).IntVar, func(c *Config) *int { return &c.Kipvs.MaxRealServers }),
	}
}

// kipvsCIDRs completes the entry of a --kipvs-* flag of comma-separated CIDRs.
func kipvsCIDRs(e entry, get func(*Config) *[]netip.Prefix) entry {
	e.register = cidrListFlag(get)
	e.target = func(c *Config) []any { return []any{get(c)} }
	return e
}

// filterBackendVar defines a --kipvs-filter-backend flag.
func filterBackendVar(fs *pflag.FlagSet, p *FilterBackend, name string, value FilterBackend, usage string) {
	fs.StringVar((*string)(p), name, string(value), usage)
}
