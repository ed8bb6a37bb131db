package config

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	netutils "k8s.io/utils/net"

	"github.com/kipvs/kipvs/internal/ipvsmode"
)

// Flags is the set of command-line flags AddFlags registered. Load reads them after the
// flag set has been parsed.
type Flags struct {
	fs *pflag.FlagSet

	configFile, writeConfigTo string
	cleanup, initOnly         bool

	kubeconfig, master, contentType string
	qps                             float32
	burst                           int32
	configSyncPeriod                time.Duration

	hostnameOverride                                 string
	bindAddress, healthzBindAddress, metricsBindAddr string
	healthzPort, metricsPort                         int32
	bindAddressHardFail, profiling                   bool

	proxyMode, clusterCIDR                                  string
	masqueradeAll                                           bool
	masqueradeBit                                           int32
	detectLocalMode, podBridgeInterface, podInterfacePrefix string
	nodePortAddresses                                       []string

	ipvsScheduler                                     string
	ipvsStrictARP                                     bool
	ipvsExcludeCIDRs                                  []string
	ipvsSyncPeriod, ipvsMinSyncPeriod                 time.Duration
	ipvsTCPTimeout, ipvsTCPFinTimeout, ipvsUDPTimeout time.Duration

	ctMaxPerCore, ctMin                            int32
	ctEstablished, ctCloseWait, ctUDP, ctUDPStream time.Duration
	ctBeLiberal                                    bool

	featureGates  map[string]bool
	verbosity     uint32
	loggingFormat string

	oomScoreAdj int32

	// kube-proxy flags kipvs accepts and ignores.
	iptablesSyncPeriod, iptablesMinSyncPeriod, logFlushFrequency time.Duration
	iptablesLocalhostNodePorts, logTextSplit, logJSONSplit       bool
	showHiddenMetrics, vmodule, logTextBuffer, logJSONBuffer     string

	sourceFile, serviceCIDR, logFormat  string
	externalIPCIDRs, lbIPCIDRs          string
	gracefulPeriod                      time.Duration
	endpointMetrics, debugEndpoints     bool
	maxServiceSetMembers, maxSetMembers int
}

// ignoredFlags are kube-proxy flags kipvs accepts, so that existing command lines keep
// working, but does not act on.
func ignoredFlags() []notice {
	return []notice{
		{"--iptables-sync-period", "used in iptables mode only; kipvs uses --ipvs-sync-period"},
		{"--iptables-min-sync-period", "used in iptables mode only; kipvs uses --ipvs-min-sync-period"},
		{"--iptables-localhost-nodeports", "used in iptables mode only; IPVS mode never serves NodePorts on localhost"},
		{"--show-hidden-metrics-for-version", "kipvs has no hidden metrics"},
		{"--feature-gates", "kipvs has no feature gates"},
		{"--vmodule", "per-file verbosity is not supported; use -v"},
		{"--log-flush-frequency", "log buffering is not supported"},
		{"--log-text-split-stream", "split output streams are not supported"},
		{"--log-text-info-buffer-size", "log buffering is not supported"},
		{"--log-json-split-stream", "split output streams are not supported"},
		{"--log-json-info-buffer-size", "log buffering is not supported"},
	}
}

// AddFlags registers kube-proxy's command-line flags (same names, types and defaults as
// kube-proxy v1.34 on Linux) and kipvs's own --kipvs-* flags on fs, and returns them for
// Load. Like kube-proxy, fs then accepts "_" in place of "-" in flag names.
//
// As in kube-proxy, most flags are ignored when --config is given (see AppliesWithConfig).
func AddFlags(fs *pflag.FlagSet) *Flags {
	d := Defaults()
	f := &Flags{fs: fs}
	fs.SetNormalizeFunc(wordSepNormalize)

	// The invocation.
	fs.StringVar(&f.configFile, "config", "",
		"Path of a KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1, YAML or JSON). "+
			"As in kube-proxy, the other flags are then ignored, except --hostname-override, --master, the logging flags, "+
			"--cleanup, --init-only, --write-config-to, --proxy-mode=ipvs and the --kipvs-* flags. "+
			"kipvs exits when the file changes, to be restarted with it.")
	fs.StringVar(&f.writeConfigTo, "write-config-to", "",
		"Write the effective configuration (defaults, then --config, then the flags given) to this file as a KubeProxyConfiguration, and exit.")
	fs.BoolVar(&f.cleanup, "cleanup", false,
		"Remove the IPVS virtual servers, kube-ipvs0, ipsets and iptables chains kube-proxy or kipvs created, and exit.")
	fs.BoolVar(&f.initOnly, "init-only", false,
		"Apply the settings that need full root privileges (sysctls), then exit.")

	// The API connection.
	fs.StringVar(&f.kubeconfig, "kubeconfig", "",
		"Path of the kubeconfig file with the API server address and credentials. Empty: use the in-cluster service account.")
	fs.StringVar(&f.master, "master", "",
		"API server address; overrides the server in the kubeconfig.")
	fs.StringVar(&f.contentType, "kube-api-content-type", d.ClientConnection.ContentType,
		"Content type of requests to the API server: application/vnd.kubernetes.protobuf or application/json.")
	fs.Float32Var(&f.qps, "kube-api-qps", d.ClientConnection.QPS,
		"Steady rate of requests per second to the API server.")
	fs.Int32Var(&f.burst, "kube-api-burst", d.ClientConnection.Burst,
		"Number of requests to the API server allowed in a burst above --kube-api-qps.")
	fs.DurationVar(&f.configSyncPeriod, "config-sync-period", d.ConfigSyncPeriod,
		"How often the Services, EndpointSlices and Node are re-listed from the API server (e.g. '30s', '15m'). Must be greater than 0.")

	// The node.
	fs.StringVar(&f.hostnameOverride, "hostname-override", "",
		"Name of this node's Node object, when it is not the host name.")
	fs.Var(newTextValue(&f.bindAddress, "ip", addrString(d.BindAddress)), "bind-address",
		"This node's primary IP address; 0.0.0.0 or :: means take it from the Node object. (No socket is bound to it; the name is historical.)")
	fs.Var(newTextValue(&f.healthzBindAddress, "ipport", d.HealthzBindAddress.String()), "healthz-bind-address",
		fmt.Sprintf("IP address and port of the health check server (/healthz, /livez). A bare IP gets port %d. An empty value changes nothing, as in kube-proxy; --healthz-port=0 disables the server.", DefaultHealthzPort))
	fs.Var(newTextValue(&f.metricsBindAddr, "ipport", d.MetricsBindAddress.String()), "metrics-bind-address",
		fmt.Sprintf("IP address and port of the metrics server (/metrics, /configz, /proxyMode). A bare IP gets port %d; use 0.0.0.0 or [::] to listen on every interface. An empty value changes nothing, as in kube-proxy.", DefaultMetricsPort))
	fs.Int32Var(&f.healthzPort, "healthz-port", DefaultHealthzPort,
		"Port of the health check server when --healthz-bind-address is a bare IP; 0 disables the server.")
	_ = fs.MarkDeprecated("healthz-port", "use --healthz-bind-address instead")
	fs.Int32Var(&f.metricsPort, "metrics-port", DefaultMetricsPort,
		"Port of the metrics server when --metrics-bind-address is a bare IP; 0 disables the server.")
	_ = fs.MarkDeprecated("metrics-port", "use --metrics-bind-address instead")
	fs.BoolVar(&f.bindAddressHardFail, "bind-address-hard-fail", false,
		"Exit when the health check or metrics server cannot listen on its address, instead of logging the error.")
	fs.BoolVar(&f.profiling, "profiling", false,
		"Serve Go profiles under /debug/pprof on the metrics server.")

	// What the proxy does.
	fs.Var(newTextValue(&f.proxyMode, "ProxyMode", ""), "proxy-mode",
		`Proxy mode. kipvs implements only "ipvs"; empty means ipvs, anything else is an error.`)
	fs.StringVar(&f.clusterCIDR, "cluster-cidr", "",
		"The pod CIDR (the range pod IPs come from), or one IPv4 and one IPv6 CIDR separated by a comma. "+
			"With --detect-local-mode=ClusterCIDR, traffic from this range counts as pod traffic when deciding what to masquerade. "+
			"Not the Service CIDR.")
	fs.BoolVar(&f.masqueradeAll, "masquerade-all", false,
		"Masquerade (SNAT) every connection to a Service ClusterIP, not only those from outside the pod network. Some CNI plugins need this.")
	fs.Int32Var(&f.masqueradeBit, "iptables-masquerade-bit", d.MasqueradeBit,
		"Bit of the packet mark (fwmark) that marks packets to masquerade, 0 to 31.")
	fs.Var(newTextValue(&f.detectLocalMode, "LocalMode", ""), "detect-local-mode",
		"How to recognise traffic from pods on this node: ClusterCIDR (source in --cluster-cidr), NodeCIDR (source in the Node's podCIDRs), "+
			"BridgeInterface (arrives on --pod-bridge-interface) or InterfaceNamePrefix (arrives on an interface named --pod-interface-name-prefix*). Empty means ClusterCIDR.")
	fs.StringVar(&f.podBridgeInterface, "pod-bridge-interface", "",
		"Bridge that pod traffic arrives on, for --detect-local-mode=BridgeInterface.")
	fs.StringVar(&f.podInterfacePrefix, "pod-interface-name-prefix", "",
		"Name prefix of the interfaces pod traffic arrives on, for --detect-local-mode=InterfaceNamePrefix.")
	fs.StringSliceVar(&f.nodePortAddresses, "nodeport-addresses", nil,
		`Comma-separated CIDRs: NodePorts are served only on node IPs inside them. The single word "primary" serves them only on the node's primary IPs from the Node object. Empty: every local IP.`)

	// IPVS.
	fs.StringVar(&f.ipvsScheduler, "ipvs-scheduler", "",
		"IPVS scheduler of every virtual server: "+strings.Join(ipvsmode.Schedulers(), ", ")+". Empty means rr.")
	fs.BoolVar(&f.ipvsStrictARP, "ipvs-strict-arp", false,
		"Set the sysctls arp_ignore=1 and arp_announce=2 so the node does not answer ARP for the Service IPs on kube-ipvs0.")
	fs.StringSliceVar(&f.ipvsExcludeCIDRs, "ipvs-exclude-cidrs", nil,
		"Comma-separated CIDRs: IPVS virtual servers with an address inside them are never deleted by kipvs.")
	fs.DurationVar(&f.ipvsSyncPeriod, "ipvs-sync-period", d.IPVS.SyncPeriod,
		"Longest time between two full resyncs of the kernel state (e.g. '30s', '2m'). Must be greater than 0.")
	fs.DurationVar(&f.ipvsMinSyncPeriod, "ipvs-min-sync-period", d.IPVS.MinSyncPeriod,
		"Shortest time between two resyncs (e.g. '1s', '500ms'); 0 resyncs on every Service or EndpointSlice change. At most --ipvs-sync-period.")
	fs.DurationVar(&f.ipvsTCPTimeout, "ipvs-tcp-timeout", 0,
		"IPVS timeout of idle TCP connections (e.g. '900s'); 0 leaves the kernel's value.")
	fs.DurationVar(&f.ipvsTCPFinTimeout, "ipvs-tcpfin-timeout", 0,
		"IPVS timeout of TCP connections after a FIN (e.g. '120s'); 0 leaves the kernel's value.")
	fs.DurationVar(&f.ipvsUDPTimeout, "ipvs-udp-timeout", 0,
		"IPVS timeout of UDP flows (e.g. '300s'); 0 leaves the kernel's value.")

	// Conntrack.
	fs.Int32Var(&f.ctMaxPerCore, "conntrack-max-per-core", d.Conntrack.MaxPerCore,
		"Conntrack entries per CPU: nf_conntrack_max becomes this times the CPU count, at least --conntrack-min. "+
			"0 leaves nf_conntrack_max alone (and ignores --conntrack-min).")
	fs.Int32Var(&f.ctMin, "conntrack-min", d.Conntrack.Min,
		"Lowest nf_conntrack_max to set, whatever the CPU count (applies only when --conntrack-max-per-core is not 0).")
	fs.DurationVar(&f.ctEstablished, "conntrack-tcp-timeout-established", d.Conntrack.TCPEstablishedTimeout,
		"Conntrack timeout of idle established TCP connections; 0 leaves the kernel's value.")
	fs.DurationVar(&f.ctCloseWait, "conntrack-tcp-timeout-close-wait", d.Conntrack.TCPCloseWaitTimeout,
		"Conntrack timeout of TCP connections in CLOSE_WAIT; 0 leaves the kernel's value.")
	fs.BoolVar(&f.ctBeLiberal, "conntrack-tcp-be-liberal", false,
		"Set nf_conntrack_tcp_be_liberal=1, so out-of-window TCP packets are not marked INVALID.")
	fs.DurationVar(&f.ctUDP, "conntrack-udp-timeout", 0,
		"Conntrack timeout of UDP flows that saw no reply; 0 leaves the kernel's value.")
	fs.DurationVar(&f.ctUDPStream, "conntrack-udp-timeout-stream", 0,
		"Conntrack timeout of UDP flows that saw traffic both ways; 0 leaves the kernel's value.")

	fs.Int32Var(&f.oomScoreAdj, "oom-score-adj", d.OOMScoreAdj,
		"OOM score adjustment of the kipvs process (written to /proc/self/oom_score_adj at start), -1000 to 1000.")

	// Logging.
	fs.VarP(&levelValue{&f.verbosity}, "v", "v", "Log verbosity: 0 logs the essentials, higher numbers log more detail.")
	fs.StringVar(&f.loggingFormat, "logging-format", "text",
		`kube-proxy's log format flag: "text" (kipvs's console format) or "json". --kipvs-log-format takes precedence.`)

	// Accepted for compatibility and ignored.
	const ignored = " Accepted for compatibility with kube-proxy; kipvs ignores it."
	fs.DurationVar(&f.iptablesSyncPeriod, "iptables-sync-period", 30*time.Second, "iptables mode only."+ignored)
	fs.DurationVar(&f.iptablesMinSyncPeriod, "iptables-min-sync-period", time.Second, "iptables mode only."+ignored)
	fs.BoolVar(&f.iptablesLocalhostNodePorts, "iptables-localhost-nodeports", true, "iptables mode only."+ignored)
	fs.StringVar(&f.showHiddenMetrics, "show-hidden-metrics-for-version", "", "Re-enable metrics hidden in this release."+ignored)
	fs.Var(&mapStringBool{&f.featureGates}, "feature-gates", "Feature gates, as name=true|false pairs separated by commas."+ignored)
	fs.Var(newTextValue(&f.vmodule, "pattern=N,...", ""), "vmodule", "Per-file log verbosity."+ignored)
	fs.DurationVar(&f.logFlushFrequency, "log-flush-frequency", 5*time.Second, "Longest time log output is buffered."+ignored)
	fs.BoolVar(&f.logTextSplit, "log-text-split-stream", false, "Split text log output between stdout and stderr."+ignored)
	fs.Var(newTextValue(&f.logTextBuffer, "quantity", "0"), "log-text-info-buffer-size", "Buffer size of split text log output."+ignored)
	fs.BoolVar(&f.logJSONSplit, "log-json-split-stream", false, "Split JSON log output between stdout and stderr."+ignored)
	fs.Var(newTextValue(&f.logJSONBuffer, "quantity", "0"), "log-json-info-buffer-size", "Buffer size of split JSON log output."+ignored)

	// kipvs's own flags.
	fs.StringVar(&f.sourceFile, "kipvs-source-file", "",
		"Read Services and EndpointSlices from this file instead of watching the API server, to run without a cluster. "+
			"--kubeconfig and --master are then not used.")
	fs.StringVar(&f.serviceCIDR, "kipvs-service-cidr", "",
		"The Service CIDR (the range ClusterIPs come from), or one IPv4 and one IPv6 CIDR separated by a comma. "+
			"A --cluster-cidr that equals or overlaps it is reported (ERROR, Node Event, metric) and not used to detect local traffic. Used until the Service CIDRs are known from the API server.")
	fs.DurationVar(&f.gracefulPeriod, "kipvs-graceful-period", d.Kipvs.GracefulPeriod,
		"How long a removed TCP or SCTP endpoint keeps its IPVS real server at weight 0 so open connections can finish, before it is deleted. "+
			"UDP real servers are deleted at once. 0 deletes at once.")
	fs.BoolVar(&f.endpointMetrics, "kipvs-endpoint-metrics", false,
		"Export IPVS traffic counters per endpoint (kipvs_endpoint_*, labelled with the endpoint's ip:port) as well as per Service port. "+
			"At most 10000 endpoints per scrape; the rest are dropped and counted in kipvs_endpoint_stats_dropped_total.")
	fs.BoolVar(&f.debugEndpoints, "kipvs-debug-endpoints", false,
		"Serve /debug/kipvs/state and /debug/kipvs/virtualservers on the metrics server (what `kipvs doctor`'s drift checks and `kipvs status --services` read). "+
			"Off by default: they list every Service, pod IP and rule of the node to anyone who can reach the metrics address.")
	fs.IntVar(&f.maxServiceSetMembers, "kipvs-max-service-set-members", d.Kipvs.MaxServiceSetMembers,
		"The most ipset members one Service may need (its ports x cluster, external and load balancer IPs x source ranges, and its local endpoints x ports). "+
			"A larger Service is not programmed and gets a Warning Event naming the field; every other Service is. 0: no limit.")
	fs.IntVar(&f.maxSetMembers, "kipvs-max-set-members", d.Kipvs.MaxSetMembers,
		"The most members one ipset may hold, all Services together (sets grow past ipset's default maxelem of 65536 as needed, up to this). "+
			"A Service that would take a set beyond it is not programmed, with a Warning Event, until there is room. 0: no limit.")
	fs.StringVar(&f.externalIPCIDRs, "kipvs-external-ip-cidrs", "",
		"Comma-separated CIDRs (both families) that Services' spec.externalIPs may come from; an external IP outside them is not served "+
			"and gets a Warning Event on its Service. Empty (the default) allows every address, as kube-proxy does (see CVE-2020-8554).")
	fs.StringVar(&f.lbIPCIDRs, "kipvs-load-balancer-ip-cidrs", "",
		"Comma-separated CIDRs (both families) that Services' status.loadBalancer.ingress IPs may come from; an ingress IP outside them is not served "+
			"and gets a Warning Event on its Service. Empty (the default) allows every address. A load balancer IP that is an address on one of the node's own links is served only inside these CIDRs.")
	fs.StringVar(&f.logFormat, "kipvs-log-format", string(d.LogFormat),
		`Log format: "console" (human-readable) or "json" (one object per line). Takes precedence over --logging-format and logging.format.`)
	return f
}

// AppliesWithConfig reports whether kube-proxy v1.34 still applies the flag name (without
// dashes) when a --config file is given: the invocation flags (--config, --write-config-to,
// --cleanup, --init-only), --hostname-override, --master and the logging flags (-v,
// --vmodule, --logging-format, --log-*), which kube-proxy copies over the file's settings.
// It ignores every other flag then. kipvs also applies its own --kipvs-* flags, which have
// no field in the file, and --proxy-mode=ipvs (see apply).
func AppliesWithConfig(name string) bool {
	switch name {
	case "config", "write-config-to", "cleanup", "init-only", "hostname-override", "master",
		"v", "vmodule", "logging-format", "log-flush-frequency", "log-text-split-stream",
		"log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size":
		return true
	}
	return strings.HasPrefix(name, "kipvs-")
}

// ignoredFlag is a flag given on the command line that does not apply because of --config.
type ignoredFlag struct {
	flag  string
	field string // the file field that holds the setting instead ("" when none)
}

// flagFields maps the flags kube-proxy ignores with --config to the file fields that hold
// the same setting.
func flagFields() map[string]string {
	return map[string]string{
		"kubeconfig": "clientConnection.kubeconfig", "kube-api-content-type": "clientConnection.contentType",
		"kube-api-qps": "clientConnection.qps", "kube-api-burst": "clientConnection.burst",
		"config-sync-period": "configSyncPeriod", "bind-address": "bindAddress",
		"healthz-bind-address": "healthzBindAddress", "healthz-port": "healthzBindAddress",
		"metrics-bind-address": "metricsBindAddress", "metrics-port": "metricsBindAddress",
		"bind-address-hard-fail": "bindAddressHardFail", "profiling": "enableProfiling",
		"proxy-mode": "mode", "cluster-cidr": "clusterCIDR", "masquerade-all": "iptables.masqueradeAll",
		"iptables-masquerade-bit": "iptables.masqueradeBit", "detect-local-mode": "detectLocalMode",
		"pod-bridge-interface": "detectLocal.bridgeInterface", "pod-interface-name-prefix": "detectLocal.interfaceNamePrefix",
		"nodeport-addresses": "nodePortAddresses", "ipvs-scheduler": "ipvs.scheduler", "ipvs-strict-arp": "ipvs.strictARP",
		"ipvs-exclude-cidrs": "ipvs.excludeCIDRs", "ipvs-sync-period": "ipvs.syncPeriod",
		"ipvs-min-sync-period": "ipvs.minSyncPeriod", "ipvs-tcp-timeout": "ipvs.tcpTimeout",
		"ipvs-tcpfin-timeout": "ipvs.tcpFinTimeout", "ipvs-udp-timeout": "ipvs.udpTimeout",
		"conntrack-max-per-core": "conntrack.maxPerCore", "conntrack-min": "conntrack.min",
		"conntrack-tcp-timeout-established": "conntrack.tcpEstablishedTimeout",
		"conntrack-tcp-timeout-close-wait":  "conntrack.tcpCloseWaitTimeout", "conntrack-tcp-be-liberal": "conntrack.tcpBeLiberal",
		"conntrack-udp-timeout": "conntrack.udpTimeout", "conntrack-udp-timeout-stream": "conntrack.udpStreamTimeout",
		"feature-gates": "featureGates", "oom-score-adj": "oomScoreAdj",
		"iptables-sync-period": "iptables.syncPeriod", "iptables-min-sync-period": "iptables.minSyncPeriod",
		"iptables-localhost-nodeports":    "iptables.localhostNodePorts",
		"show-hidden-metrics-for-version": "showHiddenMetricsForVersion",
	}
}

// apply copies the flags set explicitly on the command line that apply into c: all of
// them without --config; with it, those AppliesWithConfig names, plus --proxy-mode when it
// says ipvs (kipvs implements only IPVS mode, and --proxy-mode=ipvs is how it is told to read
// a file kube-proxy runs in another mode; kube-proxy itself ignores the flag). As in
// kube-proxy, --healthz-port and --metrics-port are also ignored with --write-config-to.
// apply returns one error per bad flag value, the notices for applied flags kipvs does not
// act on, and the flags given that do not apply.
func (f *Flags) apply(c *Config) ([]error, []notice, []ignoredFlag) {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	withConfig := f.configFile != ""
	applies := func(name string) bool {
		switch {
		case !withConfig:
			return name != "healthz-port" && name != "metrics-port" || f.writeConfigTo == ""
		case name == "proxy-mode":
			return f.proxyMode == "" || f.proxyMode == ProxyModeIPVS
		}
		return AppliesWithConfig(name)
	}
	set := func(name string) bool { return f.fs.Changed(name) && applies(name) }

	c.ConfigFile = f.configFile
	c.WriteConfigTo = f.writeConfigTo
	c.Cleanup = f.cleanup
	c.InitOnly = f.initOnly

	if set("kubeconfig") {
		c.ClientConnection.Kubeconfig = f.kubeconfig
	}
	if set("master") {
		c.ClientConnection.Master = f.master
	}
	if set("kube-api-content-type") {
		c.ClientConnection.ContentType = f.contentType
	}
	if set("kube-api-qps") {
		c.ClientConnection.QPS = f.qps
	}
	if set("kube-api-burst") {
		c.ClientConnection.Burst = f.burst
	}
	if set("config-sync-period") {
		c.ConfigSyncPeriod = f.configSyncPeriod
	}

	if set("hostname-override") && f.hostnameOverride != "" {
		h, err := normalizeHostname(sHostnameOverride, f.hostnameOverride)
		add(err)
		c.HostnameOverride = h
	}
	if set("bind-address") && f.bindAddress != "" {
		if ip, ok := parseIP(f.bindAddress); ok {
			c.BindAddress = ip
		} else {
			add(sBindAddress.invalid(f.bindAddress, "must be an IP address"))
		}
	}
	// kube-proxy's flag parser drops an empty address (its IPPortVar.Set("") changes
	// nothing), so the default stays, although its help says empty disables the server.
	var notices []notice
	emptyAddr := func(name, value string) bool {
		if set(name) && value == "" {
			notices = append(notices, notice{"--" + name, "empty: kube-proxy keeps the default address for an empty value, and so does kipvs"})
			return true
		}
		return false
	}
	add(applyServer(&c.HealthzBindAddress, sHealthzBindAddress, sHealthzPort, DefaultHealthzPort,
		set("healthz-bind-address") && !emptyAddr("healthz-bind-address", f.healthzBindAddress), set("healthz-port"),
		f.healthzBindAddress, f.healthzPort))
	add(applyServer(&c.MetricsBindAddress, sMetricsBindAddress, sMetricsPort, DefaultMetricsPort,
		set("metrics-bind-address") && !emptyAddr("metrics-bind-address", f.metricsBindAddr), set("metrics-port"),
		f.metricsBindAddr, f.metricsPort))
	if set("bind-address-hard-fail") {
		c.BindAddressHardFail = f.bindAddressHardFail
	}
	if set("profiling") {
		c.EnableProfiling = f.profiling
	}

	if set("proxy-mode") {
		c.Mode = f.proxyMode
		if c.Mode == "" {
			c.Mode = ProxyModeIPVS
		}
	}
	if set("cluster-cidr") {
		ps, perrs := splitCIDRList(sClusterCIDR, f.clusterCIDR)
		errs = append(errs, perrs...)
		c.ClusterCIDRs = ps
	}
	if set("masquerade-all") {
		c.MasqueradeAll = f.masqueradeAll
	}
	if set("iptables-masquerade-bit") {
		c.MasqueradeBit = f.masqueradeBit
	}
	if set("detect-local-mode") {
		c.DetectLocalMode = LocalMode(f.detectLocalMode)
		if c.DetectLocalMode == "" {
			c.DetectLocalMode = LocalModeClusterCIDR
		}
	}
	if set("pod-bridge-interface") {
		c.BridgeInterface = f.podBridgeInterface
	}
	if set("pod-interface-name-prefix") {
		c.InterfaceNamePrefix = f.podInterfacePrefix
	}
	if set("nodeport-addresses") {
		ps, primary, perrs := parseNodePortAddresses(sNodePortAddresses, f.nodePortAddresses)
		errs = append(errs, perrs...)
		c.NodePortAddresses, c.NodePortPrimary = ps, primary
	}

	if set("ipvs-scheduler") {
		c.IPVS.Scheduler = f.ipvsScheduler
	}
	if set("ipvs-strict-arp") {
		c.IPVS.StrictARP = f.ipvsStrictARP
	}
	if set("ipvs-exclude-cidrs") {
		ps, perrs := parseCIDRs(sIPVSExcludeCIDRs, f.ipvsExcludeCIDRs)
		errs = append(errs, perrs...)
		c.IPVS.ExcludeCIDRs = ps
	}
	setDuration := func(name string, dst *time.Duration, v time.Duration) {
		if set(name) {
			*dst = v
		}
	}
	setDuration("ipvs-sync-period", &c.IPVS.SyncPeriod, f.ipvsSyncPeriod)
	setDuration("ipvs-min-sync-period", &c.IPVS.MinSyncPeriod, f.ipvsMinSyncPeriod)
	setDuration("ipvs-tcp-timeout", &c.IPVS.TCPTimeout, f.ipvsTCPTimeout)
	setDuration("ipvs-tcpfin-timeout", &c.IPVS.TCPFinTimeout, f.ipvsTCPFinTimeout)
	setDuration("ipvs-udp-timeout", &c.IPVS.UDPTimeout, f.ipvsUDPTimeout)

	if set("conntrack-max-per-core") {
		c.Conntrack.MaxPerCore = f.ctMaxPerCore
	}
	if set("conntrack-min") {
		c.Conntrack.Min = f.ctMin
	}
	setDuration("conntrack-tcp-timeout-established", &c.Conntrack.TCPEstablishedTimeout, f.ctEstablished)
	setDuration("conntrack-tcp-timeout-close-wait", &c.Conntrack.TCPCloseWaitTimeout, f.ctCloseWait)
	setDuration("conntrack-udp-timeout", &c.Conntrack.UDPTimeout, f.ctUDP)
	setDuration("conntrack-udp-timeout-stream", &c.Conntrack.UDPStreamTimeout, f.ctUDPStream)
	if set("conntrack-tcp-be-liberal") {
		c.Conntrack.TCPBeLiberal = f.ctBeLiberal
	}

	if set("oom-score-adj") {
		c.OOMScoreAdj = f.oomScoreAdj
	}
	if set("feature-gates") {
		c.FeatureGates = f.featureGates
	}
	if set("v") {
		c.Verbosity = int(f.verbosity)
	}
	if set("logging-format") {
		lf, err := logFormatFromKubeProxy(sLoggingFormat, f.loggingFormat)
		add(err)
		c.LogFormat = lf
	}
	if set("kipvs-log-format") {
		c.LogFormat = LogFormat(f.logFormat)
	}

	if set("kipvs-source-file") {
		c.Kipvs.SourceFile = f.sourceFile
	}
	if set("kipvs-service-cidr") {
		ps, perrs := splitCIDRList(sServiceCIDR, f.serviceCIDR)
		errs = append(errs, perrs...)
		c.Kipvs.ServiceCIDRs = ps
	}
	setDuration("kipvs-graceful-period", &c.Kipvs.GracefulPeriod, f.gracefulPeriod)
	if set("kipvs-external-ip-cidrs") {
		ps, perrs := splitCIDRList(sExternalIPCIDRs, f.externalIPCIDRs)
		errs = append(errs, perrs...)
		c.Kipvs.ExternalIPCIDRs = ps
	}
	if set("kipvs-load-balancer-ip-cidrs") {
		ps, perrs := splitCIDRList(sLoadBalancerIPCIDRs, f.lbIPCIDRs)
		errs = append(errs, perrs...)
		c.Kipvs.LoadBalancerIPCIDRs = ps
	}
	if set("kipvs-endpoint-metrics") {
		c.Kipvs.EndpointMetrics = f.endpointMetrics
	}
	if set("kipvs-debug-endpoints") {
		c.Kipvs.DebugEndpoints = f.debugEndpoints
	}
	if set("kipvs-max-service-set-members") {
		c.Kipvs.MaxServiceSetMembers = f.maxServiceSetMembers
	}
	if set("kipvs-max-set-members") {
		c.Kipvs.MaxSetMembers = f.maxSetMembers
	}

	for _, n := range ignoredFlags() {
		if set(strings.TrimPrefix(n.field, "--")) {
			notices = append(notices, n)
		}
	}
	if withConfig {
		// kube-proxy's flag parser checks these before it looks at --config.
		for _, a := range []struct {
			s      setting
			value  string
			ipPort bool
		}{{sBindAddress, f.bindAddress, false}, {sHealthzBindAddress, f.healthzBindAddress, true}, {sMetricsBindAddress, f.metricsBindAddr, true}} {
			if f.fs.Changed(strings.TrimPrefix(a.s.flag(), "--")) && !applies(strings.TrimPrefix(a.s.flag(), "--")) {
				add(checkAddressSyntax(a.s, a.value, a.ipPort))
			}
		}
	}
	var ignored []ignoredFlag
	fields := flagFields()
	f.fs.Visit(func(fl *pflag.Flag) {
		if fl.Name != "help" && !applies(fl.Name) {
			ignored = append(ignored, ignoredFlag{flag: "--" + fl.Name, field: fields[fl.Name]})
		}
	})
	return errs, notices, ignored
}

// checkAddressSyntax checks an address flag the way kube-proxy's flag parser does: empty,
// an IP, or (with ipPort) an ip:port with a port number from 0 to 65535.
func checkAddressSyntax(s setting, v string, ipPort bool) error {
	if v == "" || netutils.ParseIPSloppy(v) != nil {
		return nil
	}
	if !ipPort {
		return s.invalid(v, "must be an IP address")
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return s.wrap(v, err, "must be an ip or ip:port")
	}
	if netutils.ParseIPSloppy(host) == nil {
		return s.invalid(v, "must be an ip or ip:port; %q is not an IP address", host)
	}
	if _, err := netutils.ParsePort(port, true); err != nil {
		return s.wrap(v, err, "must be an ip or ip:port; %q is not a port number", port)
	}
	return nil
}

// logIgnoredFlags logs, once each, the flags given on the command line that do not apply.
func logIgnoredFlags(log *zap.Logger, file string, ignored []ignoredFlag) {
	if log == nil {
		return
	}
	for _, i := range ignored {
		fields := []zap.Field{zap.String("flag", i.flag)}
		if i.field != "" {
			fields = append(fields, zap.String("field", i.field))
		}
		if file == "" {
			// Only --healthz-port and --metrics-port, with --write-config-to.
			log.Warn("flag ignored with --write-config-to, as kube-proxy ignores it", fields...)
			continue
		}
		fields = append(fields, zap.String("file", file))
		log.Warn("flag ignored because --config is given, as kube-proxy ignores it; set the field in the file instead", fields...)
	}
}

// applyServer applies --X-bind-address and the deprecated --X-port (each when it was set
// and applies) the way kube-proxy combines them: the port flag gives the port of a bare IP,
// and a port of 0 disables the server.
func applyServer(dst *netip.AddrPort, addrS, portS setting, defPort uint16, addrSet, portSet bool, addr string, port int32) error {
	if portSet && (port < 0 || port > 65535) {
		return portS.invalid(strconv.Itoa(int(port)), "must be between 0 and 65535 (0 disables the server)")
	}
	if portSet && port > 0 {
		defPort = uint16(port)
	}
	switch {
	case portSet && port == 0:
		*dst = netip.AddrPort{}
	case !addrSet:
	default:
		v, err := parseHostPort(addrS, addr, defPort)
		if err != nil {
			return err
		}
		*dst = v
	}
	return nil
}

// textValue is a string flag with a kube-proxy type name; its value is parsed by Load so
// that every bad value is reported together.
type textValue struct {
	p   *string
	typ string
}

func newTextValue(p *string, typ, def string) *textValue {
	*p = def
	return &textValue{p: p, typ: typ}
}

func (v *textValue) String() string     { return *v.p }
func (v *textValue) Set(s string) error { *v.p = s; return nil }
func (v *textValue) Type() string       { return v.typ }

// levelValue is the -v flag: a klog verbosity level.
type levelValue struct{ p *uint32 }

func (v *levelValue) String() string { return strconv.FormatUint(uint64(*v.p), 10) }
func (v *levelValue) Type() string   { return "Level" }
func (v *levelValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return fmt.Errorf("verbosity must be a number between 0 and 2147483647: %w", err)
	}
	*v.p = uint32(n)
	return nil
}

// mapStringBool is the --feature-gates flag: name=bool pairs separated by commas; repeated
// flags add up.
type mapStringBool struct{ m *map[string]bool }

func (v *mapStringBool) Type() string { return "mapStringBool" }
func (v *mapStringBool) String() string {
	if *v.m == nil {
		return ""
	}
	keys := make([]string, 0, len(*v.m))
	for k := range *v.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = fmt.Sprintf("%s=%t", k, (*v.m)[k])
	}
	return strings.Join(pairs, ",")
}
func (v *mapStringBool) Set(s string) error {
	if *v.m == nil {
		*v.m = map[string]bool{}
	}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("%q is not name=true|false", pair)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("%q is not name=true|false: %w", pair, err)
		}
		(*v.m)[strings.TrimSpace(k)] = b
	}
	return nil
}

// wordSepNormalize lets "_" stand for "-" in flag names, as kube-proxy does.
func wordSepNormalize(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}
