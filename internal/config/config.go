package config

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/kipvs/kipvs/internal/ipvsmode"
)

// ProxyModeIPVS is the only proxy mode kipvs implements.
const ProxyModeIPVS = "ipvs"

// APIVersion and Kind identify the configuration file format kipvs reads and writes.
const (
	APIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	Kind       = "KubeProxyConfiguration"
)

// Content types the API client can send.
const (
	ContentTypeProtobuf = "application/vnd.kubernetes.protobuf"
	ContentTypeJSON     = "application/json"
)

// Default ports of the health check and metrics servers (kube-proxy's).
const (
	DefaultHealthzPort = 10256
	DefaultMetricsPort = 10249
)

// DefaultOOMScoreAdj is kube-proxy's OOM score adjustment (the kubelet's for node-critical
// proxies).
const DefaultOOMScoreAdj = -999

// LocalMode is how pod traffic is told apart from other traffic (--detect-local-mode).
type LocalMode string

const (
	// LocalModeClusterCIDR: traffic whose source is in clusterCIDR comes from a pod.
	LocalModeClusterCIDR LocalMode = "ClusterCIDR"
	// LocalModeNodeCIDR: traffic whose source is in the Node's spec.podCIDRs comes from a pod.
	LocalModeNodeCIDR LocalMode = "NodeCIDR"
	// LocalModeBridgeInterface: traffic arriving on detectLocal.bridgeInterface comes from a pod.
	LocalModeBridgeInterface LocalMode = "BridgeInterface"
	// LocalModeInterfaceNamePrefix: traffic arriving on an interface whose name starts with
	// detectLocal.interfaceNamePrefix comes from a pod.
	LocalModeInterfaceNamePrefix LocalMode = "InterfaceNamePrefix"
)

// LocalModes returns the valid LocalMode values.
func LocalModes() []LocalMode {
	return []LocalMode{LocalModeClusterCIDR, LocalModeNodeCIDR, LocalModeBridgeInterface, LocalModeInterfaceNamePrefix}
}

// LogFormat is the format of kipvs's log (logging.format, --logging-format).
type LogFormat string

const (
	// LogFormatText is klog's text lines (kube-proxy's logging.format "text").
	LogFormatText LogFormat = "text"
	// LogFormatJSON is one JSON object per line (kube-proxy's logging.format "json").
	LogFormatJSON LogFormat = "json"
)

// Config is kipvs's effective configuration. Zero time.Duration values mean what they mean
// in kube-proxy: "leave the kernel's value as it is" for the IPVS and conntrack timeouts.
type Config struct {
	// Mode is the proxy mode; always "ipvs" after Load (kube-proxy's mode, --proxy-mode).
	Mode string

	ClientConnection ClientConnection
	// ConfigSyncPeriod is how often the informers resync from the API (configSyncPeriod,
	// --config-sync-period).
	ConfigSyncPeriod time.Duration

	// HostnameOverride is the Node name to use instead of the hostname (hostnameOverride,
	// --hostname-override); trimmed and lower-cased.
	HostnameOverride string
	// BindAddress overrides the node's primary IP; the unspecified address means "ask the
	// Node object" (bindAddress, --bind-address).
	BindAddress netip.Addr
	// HealthzBindAddress is where the health check server listens (healthzBindAddress,
	// --healthz-bind-address). The zero value disables the server.
	HealthzBindAddress netip.AddrPort
	// MetricsBindAddress is where the metrics server listens (metricsBindAddress,
	// --metrics-bind-address). The zero value disables the server.
	MetricsBindAddress netip.AddrPort
	// BindAddressHardFail makes a failure to listen on the health or metrics address fatal
	// (bindAddressHardFail, --bind-address-hard-fail).
	BindAddressHardFail bool
	// EnableProfiling serves /debug/pprof on the metrics server (enableProfiling, --profiling).
	EnableProfiling bool

	// ClusterCIDRs are the pod CIDRs, at most one per IP family (clusterCIDR, --cluster-cidr).
	ClusterCIDRs []netip.Prefix
	// DetectLocalMode selects how pod traffic is recognised (detectLocalMode,
	// --detect-local-mode).
	DetectLocalMode LocalMode
	// BridgeInterface is used with LocalModeBridgeInterface (detectLocal.bridgeInterface,
	// --pod-bridge-interface).
	BridgeInterface string
	// InterfaceNamePrefix is used with LocalModeInterfaceNamePrefix
	// (detectLocal.interfaceNamePrefix, --pod-interface-name-prefix).
	InterfaceNamePrefix string

	// NodePortAddresses restricts NodePorts to node IPs inside these CIDRs (nodePortAddresses,
	// --nodeport-addresses). Empty and NodePortPrimary false: every local IP.
	NodePortAddresses []netip.Prefix
	// NodePortPrimary is nodePortAddresses ["primary"]: NodePorts only on the node's IP of
	// each family (--bind-address, else the Node object's), every local IP of a family
	// without one, as kube-proxy.
	NodePortPrimary bool

	// MasqueradeAll SNATs all traffic to ClusterIPs (iptables.masqueradeAll, --masquerade-all).
	MasqueradeAll bool
	// MasqueradeBit is the fwmark bit marking packets for SNAT (iptables.masqueradeBit,
	// --iptables-masquerade-bit).
	MasqueradeBit int32

	IPVS      IPVS
	Conntrack Conntrack

	// OOMScoreAdj is written to /proc/self/oom_score_adj when kipvs runs (oomScoreAdj,
	// --oom-score-adj), -1000 to 1000.
	OOMScoreAdj int32

	// FeatureGates are kept so the configuration renders back unchanged; kipvs acts on
	// PreferSameTrafficDistribution only (Config.PreferSameTrafficDistribution).
	FeatureGates map[string]bool

	// LogFormat and Verbosity configure kipvs's logger (logging.format, --logging-format or
	// its deprecated alias --kipvs-log-format; logging.verbosity, -v).
	LogFormat LogFormat
	Verbosity int
	// VModule is the per-file verbosity (logging.vmodule, --vmodule) in the flag's syntax,
	// pattern=N,...
	VModule string

	Kipvs Kipvs

	// The invocation: flags that are not part of the configuration file.

	// ConfigFile is the --config path ("" when none).
	ConfigFile string
	// WriteConfigTo is the --write-config-to path: write the effective configuration there
	// and exit.
	WriteConfigTo string
	// Cleanup is --cleanup: remove everything kube-proxy or kipvs programmed and exit.
	Cleanup bool
	// InitOnly is --init-only: do the privileged initialisation (sysctls) and exit.
	InitOnly bool
}

// ClientConnection is how kipvs talks to the API server.
type ClientConnection struct {
	// Kubeconfig is the kubeconfig path; "" means in-cluster (clientConnection.kubeconfig,
	// --kubeconfig).
	Kubeconfig string
	// Master overrides the API server address of the kubeconfig (--master; no file field).
	Master string
	// AcceptContentTypes is the Accept header (clientConnection.acceptContentTypes).
	AcceptContentTypes string
	// ContentType is the content type of requests (clientConnection.contentType,
	// --kube-api-content-type).
	ContentType string
	// QPS and Burst are the client-side rate limit (clientConnection.qps/burst,
	// --kube-api-qps/--kube-api-burst). A negative QPS disables the limit, as in client-go.
	QPS   float32
	Burst int32
}

// IPVS is the ipvs section.
type IPVS struct {
	// SyncPeriod is the longest time between two full syncs (ipvs.syncPeriod,
	// --ipvs-sync-period).
	SyncPeriod time.Duration
	// MinSyncPeriod is the shortest time between two syncs; 0 syncs on every change
	// (ipvs.minSyncPeriod, --ipvs-min-sync-period).
	MinSyncPeriod time.Duration
	// Scheduler is the setting of the IPVS scheduler of every virtual server as given
	// (ipvs.scheduler, --ipvs-scheduler); empty means ipvsmode.DefaultScheduler. It is kept empty,
	// as kube-proxy keeps it, so that --write-config-to and /configz show what kube-proxy
	// shows; SchedulerName is the scheduler to program.
	Scheduler string
	// ExcludeCIDRs are left alone when deleting virtual servers kipvs does not want
	// (ipvs.excludeCIDRs, --ipvs-exclude-cidrs).
	ExcludeCIDRs []netip.Prefix
	// StrictARP sets arp_ignore=1 and arp_announce=2 (ipvs.strictARP, --ipvs-strict-arp).
	StrictARP bool
	// TCPTimeout, TCPFinTimeout and UDPTimeout are the IPVS connection timeouts; 0 leaves the
	// kernel's value (ipvs.tcpTimeout/tcpFinTimeout/udpTimeout, --ipvs-tcp-timeout,
	// --ipvs-tcpfin-timeout, --ipvs-udp-timeout).
	TCPTimeout    time.Duration
	TCPFinTimeout time.Duration
	UDPTimeout    time.Duration
}

// SchedulerName is the IPVS scheduler to program: Scheduler, or ipvsmode.DefaultScheduler when
// that is empty.
func (v IPVS) SchedulerName() string {
	if v.Scheduler == "" {
		return ipvsmode.DefaultScheduler
	}
	return v.Scheduler
}

// Conntrack is the conntrack section: sysctls set at start-up.
type Conntrack struct {
	// MaxPerCore is the nf_conntrack_max per CPU; 0 leaves nf_conntrack_max alone and ignores
	// Min (conntrack.maxPerCore, --conntrack-max-per-core).
	MaxPerCore int32
	// Min is the floor of nf_conntrack_max (conntrack.min, --conntrack-min).
	Min int32
	// TCPEstablishedTimeout and TCPCloseWaitTimeout set nf_conntrack_tcp_timeout_established
	// and _close_wait; 0 leaves them alone (--conntrack-tcp-timeout-established,
	// --conntrack-tcp-timeout-close-wait).
	TCPEstablishedTimeout time.Duration
	TCPCloseWaitTimeout   time.Duration
	// TCPBeLiberal sets nf_conntrack_tcp_be_liberal=1 (--conntrack-tcp-be-liberal).
	TCPBeLiberal bool
	// UDPTimeout and UDPStreamTimeout set nf_conntrack_udp_timeout and _stream; 0 leaves
	// them alone (--conntrack-udp-timeout, --conntrack-udp-timeout-stream).
	UDPTimeout       time.Duration
	UDPStreamTimeout time.Duration
}

// Max returns the nf_conntrack_max to set on a node with numCPU CPUs, computed as
// kube-proxy does: max(MaxPerCore*numCPU, Min). 0 means leave the kernel's value alone.
func (c Conntrack) Max(numCPU int) int {
	if c.MaxPerCore <= 0 {
		return 0
	}
	return max(int(c.MaxPerCore)*max(numCPU, 1), int(c.Min))
}

// SysctlOptions are the settings the sysctls kipvs sets depend on, on a node with numCPU
// CPUs (see ipvsmode.DesiredSysctls).
func (c *Config) SysctlOptions(numCPU int) ipvsmode.SysctlOptions {
	return ipvsmode.SysctlOptions{
		StrictARP:             c.IPVS.StrictARP,
		ConntrackMax:          c.Conntrack.Max(numCPU),
		TCPEstablishedTimeout: c.Conntrack.TCPEstablishedTimeout,
		TCPCloseWaitTimeout:   c.Conntrack.TCPCloseWaitTimeout,
		TCPBeLiberal:          c.Conntrack.TCPBeLiberal,
		UDPTimeout:            c.Conntrack.UDPTimeout,
		UDPStreamTimeout:      c.Conntrack.UDPStreamTimeout,
	}
}

// Kipvs holds the settings kube-proxy does not have (--kipvs-* flags only).
type Kipvs struct {
	// SourceFile, when set, is a file of Services and EndpointSlices read instead of the API
	// (--kipvs-source-file).
	SourceFile string
	// ServiceCIDRs are the Service (ClusterIP) CIDRs, used to refuse a clusterCIDR that is
	// really the service CIDR before the API says what it is (--kipvs-service-cidr).
	ServiceCIDRs []netip.Prefix
	// GracefulPeriod is the longest a removed TCP real server drains at weight 0 before
	// it is deleted; 0 means no limit: until its connections end, as kube-proxy
	// (--kipvs-graceful-period).
	GracefulPeriod time.Duration
	// EndpointMetrics adds per-endpoint traffic series (kipvs_endpoint_*, at most 10000
	// endpoints per scrape) to the per-Service ones (--kipvs-endpoint-metrics).
	EndpointMetrics bool
	// DebugEndpoints serves /debug/kipvs/state and /debug/kipvs/virtualservers on the
	// metrics server (--kipvs-debug-endpoints). Off by default: they list every Service,
	// pod IP and rule of the node to whoever reaches the metrics address.
	DebugEndpoints bool
	// MaxServiceSetMembers refuses, with a Warning Event, a Service that needs more ipset
	// members than this on its own; 0: no limit (--kipvs-max-service-set-members).
	MaxServiceSetMembers int
	// MaxSetMembers is the most members one ipset may hold, all Services together; a Service
	// that would take a set beyond it is held back with a Warning Event until there is room;
	// 0: no limit (--kipvs-max-set-members).
	MaxSetMembers int
	// MaxServiceVirtualServers and MaxServiceRealServers refuse, with a Warning Event, a
	// Service that needs more IPVS virtual servers or real servers than this on its own;
	// 0: no limit (--kipvs-max-service-virtual-servers, --kipvs-max-service-real-servers).
	MaxServiceVirtualServers int
	MaxServiceRealServers    int
	// MaxRealServers is the most IPVS real servers the node may have, all Services together;
	// a Service that would take it beyond is held back with a Warning Event until there is
	// room; 0: no limit (--kipvs-max-real-servers).
	MaxRealServers int
	// MaxServiceSeries bounds the kipvs_service_* series per scrape (7 per Service port,
	// family and VIP kind); the label sets beyond it are dropped and counted in
	// kipvs_service_stats_dropped_total; 0: no limit (--kipvs-max-service-series).
	MaxServiceSeries int
	// ExternalIPCIDRs and LoadBalancerIPCIDRs, when not empty, are the only ranges a
	// Service's spec.externalIPs and status.loadBalancer.ingress IPs may come from, in both
	// families; an address outside is refused with a Warning Event on the Service
	// (--kipvs-external-ip-cidrs, --kipvs-load-balancer-ip-cidrs). Empty allows all, as
	// kube-proxy does.
	ExternalIPCIDRs     []netip.Prefix
	LoadBalancerIPCIDRs []netip.Prefix
	// FilterBackend is what writes the packet filter next to IPVS: FilterIPTables (the
	// KUBE-* chains and ipsets, as kube-proxy's IPVS mode) or FilterNFTables (one nf_tables
	// table per family, no iptables rule and no ipset) (--kipvs-filter-backend).
	FilterBackend FilterBackend
}

// FilterBackend names a packet-filter backend (--kipvs-filter-backend).
type FilterBackend string

// The filter backends.
const (
	FilterIPTables FilterBackend = "iptables"
	FilterNFTables FilterBackend = "nftables"
)

// Defaults returns the configuration kube-proxy v1.34 runs with in IPVS mode when it is
// given no configuration file and no flag other than --proxy-mode=ipvs, plus kipvs's own
// defaults. Note ipvs.minSyncPeriod: kube-proxy's --ipvs-min-sync-period defaults to 1s,
// while a configuration file that leaves ipvs.minSyncPeriod unset gets 0s; kipvs keeps
// both behaviours (see FileDefaults).
func Defaults() Config {
	c := FileDefaults()
	c.IPVS.MinSyncPeriod = time.Second
	return c
}

// FileDefaults returns what kube-proxy v1.34 reads from a KubeProxyConfiguration file with
// mode: ipvs and nothing else set (plus kipvs's own defaults).
func FileDefaults() Config {
	return Config{
		Mode: ProxyModeIPVS,
		ClientConnection: ClientConnection{
			ContentType: ContentTypeProtobuf,
			QPS:         5,
			Burst:       10,
		},
		ConfigSyncPeriod:   15 * time.Minute,
		BindAddress:        netip.IPv4Unspecified(),
		HealthzBindAddress: netip.AddrPortFrom(netip.IPv4Unspecified(), DefaultHealthzPort),
		MetricsBindAddress: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), DefaultMetricsPort),
		DetectLocalMode:    LocalModeClusterCIDR,
		MasqueradeBit:      14,
		IPVS: IPVS{
			SyncPeriod: 30 * time.Second,
		},
		Conntrack: Conntrack{
			MaxPerCore:            32 * 1024,
			Min:                   128 * 1024,
			TCPEstablishedTimeout: 24 * time.Hour,
			TCPCloseWaitTimeout:   time.Hour,
		},
		OOMScoreAdj: DefaultOOMScoreAdj,
		LogFormat:   LogFormatText,
		Kipvs: Kipvs{
			GracefulPeriod:       30 * time.Second,
			MaxServiceSetMembers: 32768,
			MaxSetMembers:        1 << 20,
			MaxServiceSeries:     DefaultMaxServiceSeries,

			MaxServiceVirtualServers: 32768,
			MaxServiceRealServers:    1 << 16,
			MaxRealServers:           1 << 20,
			FilterBackend:            FilterIPTables,
		},
	}
}

// DefaultMaxServiceSeries is --kipvs-max-service-series's default: 20,000 Service label
// sets of 7 series, twice the 10,000 Services whose scrape docs/performance.md measures,
// while one Service of 32,767 ports (229,369 series, 60 MB of text at the longest names)
// is cut to about 36 MB.
const DefaultMaxServiceSeries = 140000

// Clone returns a deep copy of c.
func (c *Config) Clone() Config {
	out := *c
	out.ClusterCIDRs = slices.Clone(c.ClusterCIDRs)
	out.NodePortAddresses = slices.Clone(c.NodePortAddresses)
	out.IPVS.ExcludeCIDRs = slices.Clone(c.IPVS.ExcludeCIDRs)
	out.Kipvs.ServiceCIDRs = slices.Clone(c.Kipvs.ServiceCIDRs)
	out.Kipvs.ExternalIPCIDRs = slices.Clone(c.Kipvs.ExternalIPCIDRs)
	out.Kipvs.LoadBalancerIPCIDRs = slices.Clone(c.Kipvs.LoadBalancerIPCIDRs)
	out.FeatureGates = maps.Clone(c.FeatureGates)
	return out
}

// ClusterCIDR returns the cluster (pod) CIDR of one IP family, if one is configured.
func (c *Config) ClusterCIDR(ipv6 bool) (netip.Prefix, bool) {
	for _, p := range c.ClusterCIDRs {
		if p.Addr().Is6() == ipv6 {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// HasLocalDetector reports whether kipvs can tell traffic from local pods apart from other
// traffic for one IP family, which decides the masquerade rule for ClusterIPs: with a
// detector, traffic to a ClusterIP from outside the pod network is masqueraded; without
// one, only the node's own traffic is (kube-proxy's behaviour).
//
// ClusterCIDR mode needs a clusterCIDR of that family; NodeCIDR mode counts as configured,
// though it takes effect only once the Node object has a podCIDR of that family; the
// interface modes need their interface name or prefix.
func (c *Config) HasLocalDetector(ipv6 bool) bool {
	switch c.DetectLocalMode {
	case LocalModeClusterCIDR:
		_, ok := c.ClusterCIDR(ipv6)
		return ok
	case LocalModeNodeCIDR:
		return true
	case LocalModeBridgeInterface:
		return c.BridgeInterface != ""
	case LocalModeInterfaceNamePrefix:
		return c.InterfaceNamePrefix != ""
	}
	return false
}

// PreferSameTrafficDistribution is kube-proxy's feature gate of that name (on unless
// --feature-gates or featureGates turn it off): with it off, the node hints of
// EndpointSlices are not followed.
func (c *Config) PreferSameTrafficDistribution() bool {
	on, set := c.FeatureGates[preferSameTrafficDistribution]
	return !set || on
}
