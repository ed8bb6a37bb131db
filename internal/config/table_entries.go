package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/logging"
)

// The rows of the settings table, by section. Help texts are the flags' --help.

func invocationEntries() []entry {
	return []entry{
		flagOnly(entry{flag: "config", kind: kindInvocation, withConfig: true,
			help: "Path of a KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1, YAML or JSON). " +
				"As in kube-proxy, the other flags are then ignored, except --hostname-override, --master, the logging flags, " +
				"--cleanup, --init-only, --write-config-to, --proxy-mode=ipvs and the --kipvs-* flags. " +
				"kipvs exits when the file changes, to be restarted with it."},
			(*pflag.FlagSet).StringVar, func(c *Config) *string { return &c.ConfigFile }),
		flagOnly(entry{flag: "write-config-to", kind: kindInvocation, withConfig: true,
			help: "Write the effective configuration (defaults, then --config, then the flags given) to this file as a KubeProxyConfiguration, and exit."},
			(*pflag.FlagSet).StringVar, func(c *Config) *string { return &c.WriteConfigTo }),
		flagOnly(entry{flag: "cleanup", kind: kindInvocation, withConfig: true,
			help: "Remove the IPVS virtual servers, kube-ipvs0, ipsets and iptables chains kube-proxy or kipvs created, and exit."},
			(*pflag.FlagSet).BoolVar, func(c *Config) *bool { return &c.Cleanup }),
		flagOnly(entry{flag: "init-only", kind: kindInvocation, withConfig: true,
			help: "Apply the settings that need full root privileges (sysctls), then exit."},
			(*pflag.FlagSet).BoolVar, func(c *Config) *bool { return &c.InitOnly }),
	}
}

func apiEntries() []entry {
	return []entry{
		both(entry{field: "clientConnection.kubeconfig", flag: "kubeconfig", sample: "/etc/kubernetes/kube-proxy.kubeconfig",
			help: "Path of the kubeconfig file with the API server address and credentials. Empty: use the in-cluster service account."},
			(*pflag.FlagSet).StringVar, func(c *Config) *string { return &c.ClientConnection.Kubeconfig },
			func(k *kpConfig) *string { return &k.ClientConnection.Kubeconfig }, always, same),
		flagOnly(entry{flag: "master", withConfig: true, sample: "https://10.0.0.1:6443",
			help: "API server address; overrides the server in the kubeconfig."},
			(*pflag.FlagSet).StringVar, func(c *Config) *string { return &c.ClientConnection.Master }),
		fileField(entry{field: "clientConnection.acceptContentTypes", sample: "application/json"},
			func(c *Config) *string { return &c.ClientConnection.AcceptContentTypes },
			func(k *kpConfig) *string { return &k.ClientConnection.AcceptContentTypes }, always, same),
		both(entry{field: "clientConnection.contentType", flag: "kube-api-content-type", sample: "application/json",
			help: "Content type of requests to the API server: application/vnd.kubernetes.protobuf or application/json."},
			(*pflag.FlagSet).StringVar, func(c *Config) *string { return &c.ClientConnection.ContentType },
			func(k *kpConfig) *string { return &k.ClientConnection.ContentType }, ifNonZero, same),
		both(entry{field: "clientConnection.qps", flag: "kube-api-qps", sample: "7.5",
			help: "Steady rate of requests per second to the API server."},
			(*pflag.FlagSet).Float32Var, func(c *Config) *float32 { return &c.ClientConnection.QPS },
			func(k *kpConfig) *float32 { return &k.ClientConnection.QPS }, ifNonZero, same),
		both(entry{field: "clientConnection.burst", flag: "kube-api-burst", sample: "33",
			help: "Number of requests to the API server allowed in a burst above --kube-api-qps."},
			(*pflag.FlagSet).Int32Var, func(c *Config) *int32 { return &c.ClientConnection.Burst },
			func(k *kpConfig) *int32 { return &k.ClientConnection.Burst }, ifNonZero, same),
		both(entry{field: "configSyncPeriod", flag: "config-sync-period", sample: "7m",
			help: "How often the Services, EndpointSlices and Node are re-listed from the API server (e.g. '30s', '15m'). Must be greater than 0."},
			(*pflag.FlagSet).DurationVar, func(c *Config) *time.Duration { return &c.ConfigSyncPeriod },
			func(k *kpConfig) *metav1.Duration { return &k.ConfigSyncPeriod }, durationIfNonZero, toDuration),
	}
}

func nodeEntries() []entry {
	return []entry{
		hostnameEntry(), bindAddressEntry(),
		serverEntry(entry{field: "healthzBindAddress", flag: "healthz-bind-address", sample: "127.0.0.1:10257",
			help: fmt.Sprintf("IP address and port of the health check server (/healthz, /livez). A bare IP gets port %d. An empty value changes nothing, as in kube-proxy; --healthz-port=0 disables the server.", DefaultHealthzPort)},
			"healthz-port", DefaultHealthzPort, netip.AddrPortFrom(netip.IPv6Unspecified(), DefaultHealthzPort), func(c *Config) *netip.AddrPort { return &c.HealthzBindAddress },
			func(k *kpConfig) *string { return &k.HealthzBindAddress }),
		portEntry(entry{field: "healthzBindAddress", flag: "healthz-port", sample: "0",
			help: "Port of the health check server when --healthz-bind-address is a bare IP; 0 disables the server."},
			DefaultHealthzPort, "use --healthz-bind-address instead", func(c *Config) *netip.AddrPort { return &c.HealthzBindAddress }),
		serverEntry(entry{field: "metricsBindAddress", flag: "metrics-bind-address", sample: "[::1]:9999", fileSample: `"[::1]:9999"`,
			help: fmt.Sprintf("IP address and port of the metrics server (/metrics, /configz, /proxyMode). A bare IP gets port %d; use 0.0.0.0 or [::] to listen on every interface. An empty value changes nothing, as in kube-proxy.", DefaultMetricsPort)},
			"metrics-port", DefaultMetricsPort, netip.AddrPortFrom(netip.IPv6Loopback(), DefaultMetricsPort), func(c *Config) *netip.AddrPort { return &c.MetricsBindAddress },
			func(k *kpConfig) *string { return &k.MetricsBindAddress }),
		portEntry(entry{field: "metricsBindAddress", flag: "metrics-port", sample: "0",
			help: "Port of the metrics server when --metrics-bind-address is a bare IP; 0 disables the server."},
			DefaultMetricsPort, "use --metrics-bind-address instead", func(c *Config) *netip.AddrPort { return &c.MetricsBindAddress }),
		both(entry{field: "bindAddressHardFail", flag: "bind-address-hard-fail", sample: "true",
			help: "Exit when the health check or metrics server cannot listen on its address, instead of logging the error."},
			(*pflag.FlagSet).BoolVar, func(c *Config) *bool { return &c.BindAddressHardFail },
			func(k *kpConfig) *bool { return &k.BindAddressHardFail }, always, same),
		both(entry{field: "enableProfiling", flag: "profiling", sample: "true",
			help: "Serve Go profiles under /debug/pprof on the metrics server."},
			(*pflag.FlagSet).BoolVar, func(c *Config) *bool { return &c.EnableProfiling },
			func(k *kpConfig) *bool { return &k.EnableProfiling }, always, same),
	}
}

func proxyEntries() []entry {
	return []entry{
		modeEntry(),
		both(entry{field: "iptables.masqueradeAll", flag: "masquerade-all", sample: "true",
			help: "Masquerade (SNAT) every connection to a Service ClusterIP, not only those from outside the pod network. Some CNI plugins need this."},
			(*pflag.FlagSet).BoolVar, func(c *Config) *bool { return &c.MasqueradeAll },
			func(k *kpConfig) *bool { return &k.IPTables.MasqueradeAll }, always, same),
		both(entry{field: "iptables.masqueradeBit", flag: "iptables-masquerade-bit", sample: "12",
			help: "Bit of the packet mark (fwmark) that marks packets to masquerade, 0 to 31."},
			(*pflag.FlagSet).Int32Var, func(c *Config) *int32 { return &c.MasqueradeBit },
			func(k *kpConfig) **int32 { return &k.IPTables.MasqueradeBit }, ifSet, ptrTo),
		both(entry{field: "oomScoreAdj", flag: "oom-score-adj", sample: "-500",
			help: "OOM score adjustment of the kipvs process (written to /proc/self/oom_score_adj at start), -1000 to 1000."},
			(*pflag.FlagSet).Int32Var, func(c *Config) *int32 { return &c.OOMScoreAdj },
			func(k *kpConfig) **int32 { return &k.OOMScoreAdj }, ifSet, ptrTo),
	}
}

func ipvsEntries() []entry {
	dur := func(field, flag, sample, help string, get func(*IPVS) *time.Duration, kp func(*kpConfig) *metav1.Duration,
		from func(metav1.Duration) (time.Duration, bool)) entry {
		return both(entry{field: field, flag: flag, sample: sample, help: help}, (*pflag.FlagSet).DurationVar,
			func(c *Config) *time.Duration { return get(&c.IPVS) }, kp, from, toDuration)
	}
	return []entry{
		dur("ipvs.syncPeriod", "ipvs-sync-period", "17s",
			"Longest time between two full resyncs of the kernel state (e.g. '30s', '2m'). Must be greater than 0.",
			func(v *IPVS) *time.Duration { return &v.SyncPeriod }, func(k *kpConfig) *metav1.Duration { return &k.IPVS.SyncPeriod }, durationIfNonZero),
		dur("ipvs.minSyncPeriod", "ipvs-min-sync-period", "3s",
			"Shortest time between two resyncs (e.g. '1s', '500ms'); 0 resyncs on every Service or EndpointSlice change. At most --ipvs-sync-period.",
			func(v *IPVS) *time.Duration { return &v.MinSyncPeriod }, func(k *kpConfig) *metav1.Duration { return &k.IPVS.MinSyncPeriod }, fromDuration),
		both(entry{field: "ipvs.scheduler", flag: "ipvs-scheduler", sample: "wrr",
			help: "IPVS scheduler of every virtual server, any the kernel has (" + strings.Join(ipvsmode.Schedulers(), ", ") +
				"); kipvs loads its module ip_vs_<name> when it starts and exits if it cannot. Empty means rr."},
			(*pflag.FlagSet).StringVar, func(c *Config) *string { return &c.IPVS.Scheduler },
			func(k *kpConfig) *string { return &k.IPVS.Scheduler }, always, same),
		excludeCIDRsEntry(),
		both(entry{field: "ipvs.strictARP", flag: "ipvs-strict-arp", sample: "true",
			help: "Set the sysctls arp_ignore=1 and arp_announce=2 so the node does not answer ARP for the Service IPs on kube-ipvs0."},
			(*pflag.FlagSet).BoolVar, func(c *Config) *bool { return &c.IPVS.StrictARP },
			func(k *kpConfig) *bool { return &k.IPVS.StrictARP }, always, same),
		dur("ipvs.tcpTimeout", "ipvs-tcp-timeout", "15m", "IPVS timeout of idle TCP connections (e.g. '900s'); 0 leaves the kernel's value.",
			func(v *IPVS) *time.Duration { return &v.TCPTimeout }, func(k *kpConfig) *metav1.Duration { return &k.IPVS.TCPTimeout }, fromDuration),
		dur("ipvs.tcpFinTimeout", "ipvs-tcpfin-timeout", "2m", "IPVS timeout of TCP connections after a FIN (e.g. '120s'); 0 leaves the kernel's value.",
			func(v *IPVS) *time.Duration { return &v.TCPFinTimeout }, func(k *kpConfig) *metav1.Duration { return &k.IPVS.TCPFinTimeout }, fromDuration),
		dur("ipvs.udpTimeout", "ipvs-udp-timeout", "5m", "IPVS timeout of UDP flows (e.g. '300s'); 0 leaves the kernel's value.",
			func(v *IPVS) *time.Duration { return &v.UDPTimeout }, func(k *kpConfig) *metav1.Duration { return &k.IPVS.UDPTimeout }, fromDuration),
	}
}

func conntrackEntries() []entry {
	ct := func(get func(*Conntrack) *time.Duration) func(*Config) *time.Duration {
		return func(c *Config) *time.Duration { return get(&c.Conntrack) }
	}
	return []entry{
		both(entry{field: "conntrack.maxPerCore", flag: "conntrack-max-per-core", sample: "65536",
			help: "Conntrack entries per CPU: nf_conntrack_max becomes this times the CPU count, at least --conntrack-min. " +
				"0 leaves nf_conntrack_max alone (and ignores --conntrack-min)."},
			(*pflag.FlagSet).Int32Var, func(c *Config) *int32 { return &c.Conntrack.MaxPerCore },
			func(k *kpConfig) **int32 { return &k.Conntrack.MaxPerCore }, ifSet, ptrTo),
		both(entry{field: "conntrack.min", flag: "conntrack-min", sample: "1000",
			help: "Lowest nf_conntrack_max to set, whatever the CPU count (applies only when --conntrack-max-per-core is not 0)."},
			(*pflag.FlagSet).Int32Var, func(c *Config) *int32 { return &c.Conntrack.Min },
			func(k *kpConfig) **int32 { return &k.Conntrack.Min }, ifSet, ptrTo),
		both(entry{field: "conntrack.tcpEstablishedTimeout", flag: "conntrack-tcp-timeout-established", sample: "12h",
			help: "Conntrack timeout of idle established TCP connections; 0 leaves the kernel's value."},
			(*pflag.FlagSet).DurationVar, ct(func(c *Conntrack) *time.Duration { return &c.TCPEstablishedTimeout }),
			func(k *kpConfig) **metav1.Duration { return &k.Conntrack.TCPEstablishedTimeout }, durationIfSet, toDurationPtr),
		both(entry{field: "conntrack.tcpCloseWaitTimeout", flag: "conntrack-tcp-timeout-close-wait", sample: "30m",
			help: "Conntrack timeout of TCP connections in CLOSE_WAIT; 0 leaves the kernel's value."},
			(*pflag.FlagSet).DurationVar, ct(func(c *Conntrack) *time.Duration { return &c.TCPCloseWaitTimeout }),
			func(k *kpConfig) **metav1.Duration { return &k.Conntrack.TCPCloseWaitTimeout }, durationIfSet, toDurationPtr),
		both(entry{field: "conntrack.tcpBeLiberal", flag: "conntrack-tcp-be-liberal", sample: "true",
			help: "Set nf_conntrack_tcp_be_liberal=1, so out-of-window TCP packets are not marked INVALID."},
			(*pflag.FlagSet).BoolVar, func(c *Config) *bool { return &c.Conntrack.TCPBeLiberal },
			func(k *kpConfig) *bool { return &k.Conntrack.TCPBeLiberal }, always, same),
		both(entry{field: "conntrack.udpTimeout", flag: "conntrack-udp-timeout", sample: "30s",
			help: "Conntrack timeout of UDP flows that saw no reply; 0 leaves the kernel's value."},
			(*pflag.FlagSet).DurationVar, ct(func(c *Conntrack) *time.Duration { return &c.UDPTimeout }),
			func(k *kpConfig) *metav1.Duration { return &k.Conntrack.UDPTimeout }, fromDuration, toDuration),
		both(entry{field: "conntrack.udpStreamTimeout", flag: "conntrack-udp-timeout-stream", sample: "2m",
			help: "Conntrack timeout of UDP flows that saw traffic both ways; 0 leaves the kernel's value."},
			(*pflag.FlagSet).DurationVar, ct(func(c *Conntrack) *time.Duration { return &c.UDPStreamTimeout }),
			func(k *kpConfig) *metav1.Duration { return &k.Conntrack.UDPStreamTimeout }, fromDuration, toDuration),
	}
}

func localEntries() []entry {
	return []entry{
		detectLocalModeEntry(),
		both(entry{field: "detectLocal.bridgeInterface", flag: "pod-bridge-interface", sample: "cni0",
			help: "Bridge that pod traffic arrives on, for --detect-local-mode=BridgeInterface."},
			(*pflag.FlagSet).StringVar, func(c *Config) *string { return &c.BridgeInterface },
			func(k *kpConfig) *string { return &k.DetectLocal.BridgeInterface }, always, same),
		both(entry{field: "detectLocal.interfaceNamePrefix", flag: "pod-interface-name-prefix", sample: "cali",
			help: "Name prefix of the interfaces pod traffic arrives on, for --detect-local-mode=InterfaceNamePrefix."},
			(*pflag.FlagSet).StringVar, func(c *Config) *string { return &c.InterfaceNamePrefix },
			func(k *kpConfig) *string { return &k.DetectLocal.InterfaceNamePrefix }, always, same),
		clusterCIDREntry(), nodePortAddressesEntry(),
	}
}

func loggingEntries() []entry {
	return []entry{
		{field: "logging.format", flag: "logging-format", withConfig: true, sample: "json",
			help: `Log format: "text" (klog's lines, as kube-proxy's) or "json" (component-base's JSON lines, as kube-proxy's).`,
			register: parsedFlag((*pflag.FlagSet).StringVar, constant("text"), func(r *flagRun, s setting, v string) {
				lf, err := logFormatFromKubeProxy(s, v)
				r.add(err)
				r.c.LogFormat = lf
			}),
			read: func(r *fileRun, s setting) {
				lf, err := logFormatFromKubeProxy(s, r.kp.Logging.Format)
				r.add(err)
				r.c.LogFormat = lf
			},
			write: func(c *Config, k *kpConfig) {
				k.Logging.Format = "text"
				if c.LogFormat == LogFormatJSON {
					k.Logging.Format = "json"
				}
			},
			target: func(c *Config) []any { return []any{&c.LogFormat} }},
		// Applied after --logging-format, over which it takes precedence.
		{field: "logging.format", flag: "kipvs-log-format", withConfig: true, sample: "json",
			help: `Deprecated: use --logging-format ("console" is "text"). Takes precedence over --logging-format and logging.format.`,
			register: parsedFlag((*pflag.FlagSet).StringVar, func(d *Config) string { return string(d.LogFormat) },
				func(r *flagRun, s setting, v string) {
					if v == "console" {
						v = "text"
					}
					lf, err := logFormatFromKubeProxy(s, v)
					r.add(err)
					r.c.LogFormat = lf
				}),
			target: func(c *Config) []any { return []any{&c.LogFormat} }},
		{field: "logging.verbosity", flag: "v", withConfig: true, sample: "4",
			help: "Log verbosity: 0 logs the essentials, higher numbers log more detail.",
			register: func(fs *pflag.FlagSet, e *entry, _ *Config) func(*flagRun) {
				v := new(uint32)
				fs.VarP(&levelValue{v}, e.flag, "v", e.help)
				return func(r *flagRun) {
					if r.set(e.flag) {
						r.c.Verbosity = int(*v)
					}
				}
			},
			read:   func(r *fileRun, _ setting) { r.c.Verbosity = int(r.kp.Logging.Verbosity) },
			write:  func(c *Config, k *kpConfig) { k.Logging.Verbosity = logsapi.VerbosityLevel(max(c.Verbosity, 0)) },
			target: func(c *Config) []any { return []any{&c.Verbosity} }},
		vmoduleEntry(),
	}
}

// vmoduleEntry is --vmodule (klog's pattern=N,...) and the file's logging.vmodule list, kept
// in Config.VModule in the flag's syntax.
func vmoduleEntry() entry {
	return entry{field: "logging.vmodule", flag: "vmodule", withConfig: true,
		sample: "proxier=4", fileSample: "[{filePattern: proxier, verbosity: 4}]",
		help: "Per-file log verbosity: comma-separated pattern=N, a pattern matching a source file's base name without .go (as klog does).",
		register: parsedFlag(textVar("pattern=N,..."), constant(""), func(r *flagRun, s setting, v string) {
			if err := logging.CheckVModule(v); err != nil {
				r.add(s.wrap(v, err, "must be a comma-separated list of pattern=N"))
			}
			r.c.VModule = v
		}),
		read: func(r *fileRun, s setting) {
			items := make([]string, 0, len(r.kp.Logging.VModule))
			for _, it := range r.kp.Logging.VModule {
				if strings.ContainsAny(it.FilePattern, ",=") {
					r.add(s.invalid(it.FilePattern, "a filePattern cannot hold ',' or '='"))
					continue
				}
				items = append(items, fmt.Sprintf("%s=%d", it.FilePattern, it.Verbosity))
			}
			v := strings.Join(items, ",")
			if err := logging.CheckVModule(v); err != nil {
				r.add(s.wrap(v, err, "must be a list of filePattern and verbosity"))
			}
			r.c.VModule = v
		},
		write: func(c *Config, k *kpConfig) {
			k.Logging.VModule = nil
			for _, it := range strings.Split(c.VModule, ",") {
				pat, lv, _ := strings.Cut(it, "=")
				n, err := strconv.ParseUint(lv, 10, 32)
				if pat != "" && err == nil {
					k.Logging.VModule = append(k.Logging.VModule, logsapi.VModuleItem{FilePattern: pat, Verbosity: logsapi.VerbosityLevel(n)})
				}
			}
		},
		target: func(c *Config) []any { return []any{&c.VModule} }}
}
