package config

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/ipvsmode"
)

// Each case breaks one field of a valid configuration; Validate must return exactly one
// error, naming the field, its flag and the value.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(c *Config)
		want   FieldError
	}{
		{"mode", func(c *Config) { c.Mode = "iptables" },
			FieldError{Field: "mode", Flag: "--proxy-mode", Value: "iptables", Detail: "only the IPVS proxy mode"}},
		{"empty mode", func(c *Config) { c.Mode = "" },
			FieldError{Field: "mode", Flag: "--proxy-mode", Value: ""}},
		{"content type", func(c *Config) { c.ClientConnection.ContentType = "text/plain" },
			FieldError{Field: "clientConnection.contentType", Flag: "--kube-api-content-type", Value: "text/plain", Detail: ContentTypeProtobuf}},
		{"qps NaN", func(c *Config) { c.ClientConnection.QPS = float32(math.NaN()) },
			FieldError{Field: "clientConnection.qps", Flag: "--kube-api-qps", Value: "NaN", Detail: "finite"}},
		{"qps infinite", func(c *Config) { c.ClientConnection.QPS = float32(math.Inf(1)) },
			FieldError{Field: "clientConnection.qps", Flag: "--kube-api-qps", Value: "+Inf"}},
		{"burst negative", func(c *Config) { c.ClientConnection.Burst = -3 },
			FieldError{Field: "clientConnection.burst", Flag: "--kube-api-burst", Value: "-3"}},
		{"burst zero with a rate limit", func(c *Config) { c.ClientConnection.Burst = 0 },
			FieldError{Field: "clientConnection.burst", Flag: "--kube-api-burst", Value: "0", Detail: "clientConnection.qps"}},
		{"config sync period", func(c *Config) { c.ConfigSyncPeriod = -time.Second },
			FieldError{Field: "configSyncPeriod", Flag: "--config-sync-period", Value: "-1s"}},
		{"hostname", func(c *Config) { c.HostnameOverride = "Node.Example" },
			FieldError{Field: "hostnameOverride", Flag: "--hostname-override", Value: "Node.Example"}},
		{"bind address", func(c *Config) { c.BindAddress = netip.Addr{} },
			FieldError{Field: "bindAddress", Flag: "--bind-address", Value: "", Detail: "IP address"}},
		{"healthz port 0", func(c *Config) { c.HealthzBindAddress = mustAddrPort("0.0.0.0:0") },
			FieldError{Field: "healthzBindAddress", Flag: "--healthz-bind-address", Value: "0.0.0.0:0"}},
		{"metrics without address", func(c *Config) { c.MetricsBindAddress = netip.AddrPortFrom(netip.Addr{}, 10249) },
			FieldError{Field: "metricsBindAddress", Flag: "--metrics-bind-address", Value: "invalid AddrPort", Detail: "IP:port"}},
		{"cluster CIDRs of one family", func(c *Config) {
			c.ClusterCIDRs = []netip.Prefix{mustPrefix("10.0.0.0/16"), mustPrefix("10.1.0.0/16")}
		}, FieldError{Field: "clusterCIDR", Flag: "--cluster-cidr", Value: "10.0.0.0/16,10.1.0.0/16"}},
		{"invalid cluster CIDR", func(c *Config) { c.ClusterCIDRs = []netip.Prefix{{}} },
			FieldError{Field: "clusterCIDR", Flag: "--cluster-cidr", Value: "invalid Prefix"}},
		{"detect local mode", func(c *Config) { c.DetectLocalMode = "clustercidr" },
			FieldError{Field: "detectLocalMode", Flag: "--detect-local-mode", Value: "clustercidr"}},
		{"bridge interface required", func(c *Config) { c.DetectLocalMode = LocalModeBridgeInterface },
			FieldError{Field: "detectLocal.bridgeInterface", Flag: "--pod-bridge-interface", Value: "", Detail: "BridgeInterface"}},
		{"bridge interface name", func(c *Config) { c.DetectLocalMode, c.BridgeInterface = LocalModeBridgeInterface, "br/0" },
			FieldError{Field: "detectLocal.bridgeInterface", Flag: "--pod-bridge-interface", Value: "br/0"}},
		{"interface prefix required", func(c *Config) { c.DetectLocalMode = LocalModeInterfaceNamePrefix },
			FieldError{Field: "detectLocal.interfaceNamePrefix", Flag: "--pod-interface-name-prefix", Value: "", Detail: "InterfaceNamePrefix"}},
		{"primary and CIDRs", func(c *Config) {
			c.NodePortPrimary, c.NodePortAddresses = true, []netip.Prefix{mustPrefix("10.0.0.0/8")}
		}, FieldError{Field: "nodePortAddresses", Flag: "--nodeport-addresses", Value: "primary,10.0.0.0/8"}},
		{"masquerade bit", func(c *Config) { c.MasqueradeBit = 32 },
			FieldError{Field: "iptables.masqueradeBit", Flag: "--iptables-masquerade-bit", Value: "32", Detail: "[0, 31]"}},
		{"sync period", func(c *Config) { c.IPVS.SyncPeriod = 0 },
			FieldError{Field: "ipvs.syncPeriod", Flag: "--ipvs-sync-period", Value: "0s", Detail: "greater than 0"}},
		{"min sync period negative", func(c *Config) { c.IPVS.MinSyncPeriod = -time.Millisecond },
			FieldError{Field: "ipvs.minSyncPeriod", Flag: "--ipvs-min-sync-period", Value: "-1ms"}},
		{"min sync period above sync period", func(c *Config) { c.IPVS.MinSyncPeriod = time.Minute },
			FieldError{Field: "ipvs.minSyncPeriod", Flag: "--ipvs-min-sync-period", Value: "1m0s", Detail: "ipvs.syncPeriod (30s)"}},
		{"exclude CIDR", func(c *Config) { c.IPVS.ExcludeCIDRs = []netip.Prefix{{}} },
			FieldError{Field: "ipvs.excludeCIDRs", Flag: "--ipvs-exclude-cidrs", Value: "invalid Prefix"}},
		{"ipvs tcp timeout", func(c *Config) { c.IPVS.TCPTimeout = -time.Second },
			FieldError{Field: "ipvs.tcpTimeout", Flag: "--ipvs-tcp-timeout", Value: "-1s"}},
		{"ipvs tcpfin timeout", func(c *Config) { c.IPVS.TCPFinTimeout = -time.Second },
			FieldError{Field: "ipvs.tcpFinTimeout", Flag: "--ipvs-tcpfin-timeout", Value: "-1s"}},
		{"ipvs udp timeout", func(c *Config) { c.IPVS.UDPTimeout = -time.Second },
			FieldError{Field: "ipvs.udpTimeout", Flag: "--ipvs-udp-timeout", Value: "-1s"}},
		{"conntrack max per core", func(c *Config) { c.Conntrack.MaxPerCore = -1 },
			FieldError{Field: "conntrack.maxPerCore", Flag: "--conntrack-max-per-core", Value: "-1"}},
		{"conntrack min", func(c *Config) { c.Conntrack.Min = -1 },
			FieldError{Field: "conntrack.min", Flag: "--conntrack-min", Value: "-1"}},
		{"conntrack established", func(c *Config) { c.Conntrack.TCPEstablishedTimeout = -time.Hour },
			FieldError{Field: "conntrack.tcpEstablishedTimeout", Flag: "--conntrack-tcp-timeout-established", Value: "-1h0m0s"}},
		{"conntrack close wait", func(c *Config) { c.Conntrack.TCPCloseWaitTimeout = -time.Hour },
			FieldError{Field: "conntrack.tcpCloseWaitTimeout", Flag: "--conntrack-tcp-timeout-close-wait", Value: "-1h0m0s"}},
		{"conntrack udp", func(c *Config) { c.Conntrack.UDPTimeout = -time.Second },
			FieldError{Field: "conntrack.udpTimeout", Flag: "--conntrack-udp-timeout", Value: "-1s"}},
		{"conntrack udp stream", func(c *Config) { c.Conntrack.UDPStreamTimeout = -time.Second },
			FieldError{Field: "conntrack.udpStreamTimeout", Flag: "--conntrack-udp-timeout-stream", Value: "-1s"}},
		{"log format", func(c *Config) { c.LogFormat = "console" },
			FieldError{Field: "logging.format", Flag: "--logging-format", Value: "console"}},
		{"verbosity", func(c *Config) { c.Verbosity = -1 },
			FieldError{Field: "logging.verbosity", Flag: "-v", Value: "-1"}},
		{"service CIDRs of one family", func(c *Config) {
			c.Kipvs.ServiceCIDRs = []netip.Prefix{mustPrefix("fd00:1::/108"), mustPrefix("fd00:2::/108")}
		}, FieldError{Flag: "--kipvs-service-cidr", Value: "fd00:1::/108,fd00:2::/108"}},
		{"graceful period", func(c *Config) { c.Kipvs.GracefulPeriod = -time.Second },
			FieldError{Flag: "--kipvs-graceful-period", Value: "-1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.mutate(&c)
			wantFieldErrors(t, c.Validate(), tc.want)
		})
	}
}

// Valid corner values are accepted.
func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(c *Config)
	}{
		{"negative qps disables rate limiting", func(c *Config) { c.ClientConnection.QPS, c.ClientConnection.Burst = -1, 0 }},
		{"json content type", func(c *Config) { c.ClientConnection.ContentType = ContentTypeJSON }},
		{"servers disabled", func(c *Config) { c.HealthzBindAddress, c.MetricsBindAddress = netip.AddrPort{}, netip.AddrPort{} }},
		{"masquerade bits 0 and 31", func(c *Config) { c.MasqueradeBit = 31 }},
		{"min sync period equal to sync period", func(c *Config) { c.IPVS.MinSyncPeriod = c.IPVS.SyncPeriod }},
		{"every scheduler", func(c *Config) { c.IPVS.Scheduler = "mh" }},
		{"dual-stack cluster and service CIDRs apart", func(c *Config) {
			c.ClusterCIDRs = []netip.Prefix{mustPrefix("10.244.0.0/16"), mustPrefix("fd00:10:244::/56")}
			c.Kipvs.ServiceCIDRs = []netip.Prefix{mustPrefix("10.96.0.0/12"), mustPrefix("fd00:10:96::/108")}
		}},
		{"zero timeouts leave the kernel alone", func(c *Config) {
			c.Conntrack = Conntrack{}
			c.IPVS.TCPTimeout, c.IPVS.TCPFinTimeout, c.IPVS.UDPTimeout, c.Kipvs.GracefulPeriod = 0, 0, 0, 0
		}},
		{"NodeCIDR needs nothing more", func(c *Config) { c.DetectLocalMode = LocalModeNodeCIDR }},
		{"bridge", func(c *Config) { c.DetectLocalMode, c.BridgeInterface = LocalModeBridgeInterface, "cbr0" }},
		{"hostname", func(c *Config) { c.HostnameOverride = "ip-10-0-0-1.ec2.internal" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.set(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	for _, s := range ipvsmode.Schedulers() {
		c := Defaults()
		c.IPVS.Scheduler = s
		if err := c.Validate(); err != nil {
			t.Errorf("scheduler %s: %v", s, err)
		}
	}
}

func TestValidateReportsEveryBadField(t *testing.T) {
	c := Defaults()
	c.Mode, c.MasqueradeBit, c.IPVS.SyncPeriod = "nftables", 40, 0
	wantFieldErrors(t, c.Validate(),
		FieldError{Field: "mode", Flag: "--proxy-mode", Value: "nftables"},
		FieldError{Field: "iptables.masqueradeBit", Flag: "--iptables-masquerade-bit", Value: "40"},
		FieldError{Field: "ipvs.syncPeriod", Flag: "--ipvs-sync-period", Value: "0s"},
	)
}

func TestCheckClusterCIDR(t *testing.T) {
	p := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, mustPrefix(s))
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		cluster, svc  []netip.Prefix
		wantBad       []string // the cluster CIDRs refused
		wantInMessage string
	}{
		{"equal", p("10.96.0.0/12"), p("10.96.0.0/12"), []string{"10.96.0.0/12"}, "is the Service CIDR"},
		{"pod CIDR inside the service CIDR", p("10.100.0.0/16"), p("10.96.0.0/12"), []string{"10.100.0.0/16"}, "overlaps the Service CIDR 10.96.0.0/12"},
		{"service CIDR inside the pod CIDR", p("10.0.0.0/8"), p("10.96.0.0/12"), []string{"10.0.0.0/8"}, "overlaps"},
		{"IPv6 equal", p("fd00:10:96::/108"), p("fd00:10:96::/108"), []string{"fd00:10:96::/108"}, "is the Service CIDR"},
		{"dual-stack, only IPv6 overlaps", p("10.244.0.0/16", "fd00:10:96::/112"), p("10.96.0.0/12", "fd00:10:96::/108"),
			[]string{"fd00:10:96::/112"}, "overlaps"},
		{"disjoint", p("10.244.0.0/16"), p("10.96.0.0/12"), nil, ""},
		{"adjacent", p("10.112.0.0/12"), p("10.96.0.0/12"), nil, ""},
		{"different families never overlap", p("10.0.0.0/8"), p("fd00::/8"), nil, ""},
		{"no cluster CIDR", nil, p("10.96.0.0/12"), nil, ""},
		{"no service CIDR", p("10.96.0.0/12"), nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckClusterCIDR(tc.cluster, tc.svc)
			var want []FieldError
			for _, b := range tc.wantBad {
				want = append(want, FieldError{Field: "clusterCIDR", Flag: "--cluster-cidr", Value: b, Detail: tc.wantInMessage})
			}
			wantFieldErrors(t, err, want...)
			if err == nil {
				return
			}
			// The message must explain the difference between the two ranges.
			for _, s := range []string{"pod CIDR", "pod IPs", "masquerade", "ClusterIPs are allocated from", "cannot reach Services"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message does not explain %q:\n%v", s, err)
				}
			}
		})
	}
}

// Validate accepts a clusterCIDR overlapping the Service CIDR, as kube-proxy does: the
// daemon keeps running, leaves it out of local-traffic detection and reports it.
func TestValidateAcceptsClusterCIDROverlappingServiceCIDR(t *testing.T) {
	c := Defaults()
	c.ClusterCIDRs = []netip.Prefix{mustPrefix("10.96.128.0/17")}
	if err := c.Validate(); err != nil {
		t.Fatalf("without a service CIDR: %v", err)
	}
	c.Kipvs.ServiceCIDRs = []netip.Prefix{mustPrefix("10.96.0.0/12")}
	if err := c.Validate(); err != nil {
		t.Fatalf("with a service CIDR around it: %v", err)
	}
}

// The seed-001 file loads (kube-proxy runs with it); CheckClusterCIDR names the mistake.
func TestSeed001File(t *testing.T) {
	path := writeFile(t, string(readTestdata(t, "service-cidr-as-cluster-cidr.yaml")))
	c, err := loadArgs(t, nil, "--config", path)
	if err != nil {
		t.Fatalf("seed-001 file: %v", err)
	}
	wantFieldErrors(t, CheckClusterCIDR(c.ClusterCIDRs, []netip.Prefix{mustPrefix("10.96.0.0/12")}),
		FieldError{Field: "clusterCIDR", Flag: "--cluster-cidr", Value: "10.96.0.0/12", Detail: "is the Service CIDR 10.96.0.0/12"})
}

// ipvs.scheduler takes any name, as kube-proxy's validation does: the kernel's schedulers
// beyond kube-proxy's documented ones (fo, ovf, twos), and a name no kernel has, which the
// daemon's start-up probe refuses, naming the module, as kube-proxy's does.
func TestValidateAcceptsAnyScheduler(t *testing.T) {
	for _, s := range []string{"fo", "ovf", "twos", "fastest"} {
		c := Defaults()
		c.IPVS.Scheduler = s
		if err := c.Validate(); err != nil {
			t.Errorf("scheduler %s: %v", s, err)
		}
	}
}
