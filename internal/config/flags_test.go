package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestFlagParsing(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want func(c *Config)
	}{
		{"API connection", []string{"--kubeconfig=/etc/kp/kubeconfig", "--master=https://10.0.0.1:6443",
			"--kube-api-content-type=application/json", "--kube-api-qps=20.5", "--kube-api-burst=40", "--config-sync-period=5m"},
			func(c *Config) {
				c.ClientConnection = ClientConnection{Kubeconfig: "/etc/kp/kubeconfig", Master: "https://10.0.0.1:6443",
					ContentType: ContentTypeJSON, QPS: 20.5, Burst: 40}
				c.ConfigSyncPeriod = 5 * time.Minute
			}},
		{"node identity and servers", []string{"--hostname-override= Node-A ", "--bind-address=010.000.0.7",
			"--healthz-bind-address=[::]:9256", "--metrics-bind-address=0.0.0.0", "--bind-address-hard-fail", "--profiling"},
			func(c *Config) {
				c.HostnameOverride = "node-a"
				c.BindAddress = netip.MustParseAddr("10.0.0.7")
				c.HealthzBindAddress = mustAddrPort("[::]:9256")
				c.MetricsBindAddress = mustAddrPort("0.0.0.0:10249")
				c.BindAddressHardFail, c.EnableProfiling = true, true
			}},
		{"local traffic and masquerading", []string{"--cluster-cidr=10.244.0.0/16,fd00:10:244::/56", "--masquerade-all",
			"--iptables-masquerade-bit=13", "--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=cali",
			"--pod-bridge-interface=cbr0", "--nodeport-addresses=192.168.0.0/16,2001:db8::/64"},
			func(c *Config) {
				c.ClusterCIDRs = []netip.Prefix{mustPrefix("10.244.0.0/16"), mustPrefix("fd00:10:244::/56")}
				c.MasqueradeAll, c.MasqueradeBit = true, 13
				c.DetectLocalMode, c.InterfaceNamePrefix, c.BridgeInterface = LocalModeInterfaceNamePrefix, "cali", "cbr0"
				c.NodePortAddresses = []netip.Prefix{mustPrefix("192.168.0.0/16"), mustPrefix("2001:db8::/64")}
			}},
		{"nodeport primary", []string{"--nodeport-addresses=primary"}, func(c *Config) { c.NodePortPrimary = true }},
		{"IPVS", []string{"--proxy-mode=ipvs", "--ipvs-scheduler=mh", "--ipvs-strict-arp", "--ipvs-exclude-cidrs=10.1.0.0/16",
			"--ipvs-exclude-cidrs=fd00:1::/64", "--ipvs-sync-period=1m", "--ipvs-min-sync-period=0", "--ipvs-tcp-timeout=900s",
			"--ipvs-tcpfin-timeout=2m", "--ipvs-udp-timeout=300s"},
			func(c *Config) {
				c.IPVS = IPVS{SyncPeriod: time.Minute, MinSyncPeriod: 0, Scheduler: "mh", StrictARP: true,
					ExcludeCIDRs: []netip.Prefix{mustPrefix("10.1.0.0/16"), mustPrefix("fd00:1::/64")},
					TCPTimeout:   15 * time.Minute, TCPFinTimeout: 2 * time.Minute, UDPTimeout: 5 * time.Minute}
			}},
		{"empty proxy mode, scheduler and detect-local mode mean the defaults", []string{"--proxy-mode=", "--ipvs-scheduler=", "--detect-local-mode="},
			func(c *Config) {}},
		{"conntrack", []string{"--conntrack-max-per-core=0", "--conntrack-min=1000", "--conntrack-tcp-timeout-established=0",
			"--conntrack-tcp-timeout-close-wait=30m", "--conntrack-tcp-be-liberal", "--conntrack-udp-timeout=30s", "--conntrack-udp-timeout-stream=2m"},
			func(c *Config) {
				c.Conntrack = Conntrack{MaxPerCore: 0, Min: 1000, TCPEstablishedTimeout: 0, TCPCloseWaitTimeout: 30 * time.Minute,
					TCPBeLiberal: true, UDPTimeout: 30 * time.Second, UDPStreamTimeout: 2 * time.Minute}
			}},
		{"logging", []string{"-v", "4", "--logging-format=json"}, func(c *Config) { c.Verbosity, c.LogFormat = 4, LogFormatJSON }},
		{"long -v form", []string{"--v=2"}, func(c *Config) { c.Verbosity = 2 }},
		{"vmodule", []string{"--vmodule=proxier=4,sync*=2"}, func(c *Config) { c.VModule = "proxier=4,sync*=2" }},
		{"kipvs log format is an alias", []string{"--kipvs-log-format=console"}, func(c *Config) { c.LogFormat = LogFormatText }},
		{"kipvs log format wins", []string{"--logging-format=json", "--kipvs-log-format=console"}, func(c *Config) {}},
		{"kipvs flags", []string{"--kipvs-source-file=/srv/services.yaml", "--kipvs-service-cidr=10.96.0.0/12,fd00:96::/108",
			"--kipvs-graceful-period=0", "--kipvs-log-format=json", "--kipvs-endpoint-metrics", "--kipvs-debug-endpoints",
			"--kipvs-max-service-set-members=100", "--kipvs-max-set-members=0", "--kipvs-max-service-series=70000",
			"--kipvs-max-service-virtual-servers=200", "--kipvs-max-service-real-servers=300", "--kipvs-max-real-servers=0",
			"--kipvs-external-ip-cidrs=203.0.113.0/24,198.51.100.0/25,fd00:e::/64", "--kipvs-load-balancer-ip-cidrs=192.0.2.0/24", "--kipvs-filter-backend=nftables"},
			func(c *Config) {
				c.Kipvs = Kipvs{SourceFile: "/srv/services.yaml", GracefulPeriod: 0, EndpointMetrics: true, DebugEndpoints: true, MaxServiceSetMembers: 100, MaxServiceSeries: 70000,
					MaxServiceVirtualServers: 200, MaxServiceRealServers: 300, FilterBackend: FilterNFTables,
					ServiceCIDRs:        []netip.Prefix{mustPrefix("10.96.0.0/12"), mustPrefix("fd00:96::/108")},
					ExternalIPCIDRs:     []netip.Prefix{mustPrefix("203.0.113.0/24"), mustPrefix("198.51.100.0/25"), mustPrefix("fd00:e::/64")},
					LoadBalancerIPCIDRs: []netip.Prefix{mustPrefix("192.0.2.0/24")}}
				c.LogFormat = LogFormatJSON
			}},
		{"oom score adjustment", []string{"--oom-score-adj=-500"}, func(c *Config) { c.OOMScoreAdj = -500 }},
		{"invocation", []string{"--cleanup", "--init-only", "--write-config-to=/tmp/out.yaml"},
			func(c *Config) { c.Cleanup, c.InitOnly, c.WriteConfigTo = true, true, "/tmp/out.yaml" }},
		{"underscores stand for dashes", []string{"--ipvs_sync_period=2m", "--masquerade_all"},
			func(c *Config) { c.IPVS.SyncPeriod, c.MasqueradeAll = 2*time.Minute, true }},
		{"feature gates are kept", []string{"--feature-gates=A=true,B=false", "--feature-gates=C=true"},
			func(c *Config) { c.FeatureGates = map[string]bool{"A": true, "B": false, "C": true} }},
		{"ignored flags parse", []string{"--iptables-sync-period=10s", "--iptables-min-sync-period=0", "--iptables-localhost-nodeports=false",
			"--show-hidden-metrics-for-version=1.33", "--log-flush-frequency=1s",
			"--log-text-split-stream", "--log-text-info-buffer-size=1Mi", "--log-json-split-stream", "--log-json-info-buffer-size=1Mi"},
			func(c *Config) {}},
		// kube-proxy ignores an empty --hostname-override and --bind-address.
		{"empty hostname and bind address change nothing", []string{"--hostname-override=", "--bind-address="}, func(c *Config) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadArgs(t, nil, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			tc.want(&want)
			if diff := cmp.Diff(want, c, cmpConfig()...); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// kube-proxy's deprecated --healthz-port and --metrics-port: they give the port of a bare
// IP address, and 0 disables the server. An address set to "" changes nothing: kube-proxy's
// flag parser drops it (its help says it disables the server; it does not).
func TestServerAddressFlags(t *testing.T) {
	for _, tc := range []struct {
		name             string
		args             []string
		healthz, metrics netip.AddrPort
	}{
		{"defaults", nil, mustAddrPort("0.0.0.0:10256"), mustAddrPort("127.0.0.1:10249")},
		{"port flags alone do not move a default address", []string{"--healthz-port=1234", "--metrics-port=5678"},
			mustAddrPort("0.0.0.0:10256"), mustAddrPort("127.0.0.1:10249")},
		{"port flags give the port of a bare IP", []string{"--healthz-bind-address=10.0.0.1", "--healthz-port=1234",
			"--metrics-bind-address=::", "--metrics-port=5678"}, mustAddrPort("10.0.0.1:1234"), mustAddrPort("[::]:5678")},
		{"an explicit port wins over the port flag", []string{"--healthz-bind-address=10.0.0.1:80", "--healthz-port=1234"},
			mustAddrPort("10.0.0.1:80"), mustAddrPort("127.0.0.1:10249")},
		{"port 0 disables", []string{"--healthz-port=0", "--metrics-port=0"}, netip.AddrPort{}, netip.AddrPort{}},
		{"empty address keeps the default", []string{"--healthz-bind-address=", "--metrics-bind-address="},
			mustAddrPort("0.0.0.0:10256"), mustAddrPort("127.0.0.1:10249")},
		{"empty address keeps the port flag's effect", []string{"--healthz-bind-address=", "--healthz-port=0", "--metrics-bind-address=",
			"--metrics-port=1234"}, netip.AddrPort{}, mustAddrPort("127.0.0.1:10249")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := observed()
			c, err := loadArgs(t, log, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if c.HealthzBindAddress != tc.healthz || c.MetricsBindAddress != tc.metrics {
				t.Errorf("healthz %v metrics %v, want %v %v", c.HealthzBindAddress, c.MetricsBindAddress, tc.healthz, tc.metrics)
			}
			// An empty address is said to change nothing.
			var want []string
			for _, a := range tc.args {
				if strings.HasSuffix(a, "-bind-address=") {
					want = append(want, strings.TrimSuffix(a, "="))
				}
			}
			if got := noticeFields(logs); !slices.Equal(got, want) {
				t.Errorf("notices for %v, want %v", got, want)
			}
		})
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []FieldError
	}{
		{"proxy mode", []string{"--proxy-mode=nftables"}, []FieldError{
			{Field: "mode", Flag: "--proxy-mode", Value: "nftables", Detail: "kipvs implements only the IPVS proxy mode"}}},
		{"cluster CIDR syntax", []string{"--cluster-cidr=10.244.0.0/16,,fd00::/200"}, []FieldError{
			{Field: "clusterCIDR", Flag: "--cluster-cidr", Value: "", Detail: "empty entry"},
			{Field: "clusterCIDR", Flag: "--cluster-cidr", Value: "fd00::/200", Detail: "valid CIDR"}}},
		{"two IPv6 cluster CIDRs", []string{"--cluster-cidr=fd00:1::/64,fd00:2::/64"}, []FieldError{
			{Field: "clusterCIDR", Flag: "--cluster-cidr", Value: "fd00:1::/64,fd00:2::/64", Detail: "dual-stack pair"}}},
		{"three cluster CIDRs", []string{"--cluster-cidr=10.0.0.0/16,fd00::/64,11.0.0.0/16"}, []FieldError{
			{Field: "clusterCIDR", Flag: "--cluster-cidr", Value: "10.0.0.0/16,fd00::/64,11.0.0.0/16"}}},
		{"bind address", []string{"--bind-address=node-1"}, []FieldError{
			{Field: "bindAddress", Flag: "--bind-address", Value: "node-1", Detail: "IP address"}}},
		{"healthz address", []string{"--healthz-bind-address=0.0.0.0:http"}, []FieldError{
			{Field: "healthzBindAddress", Flag: "--healthz-bind-address", Value: "0.0.0.0:http", Detail: "between 1 and 65535"}}},
		{"metrics port out of range", []string{"--metrics-port=70000"}, []FieldError{
			{Field: "metricsBindAddress", Flag: "--metrics-port", Value: "70000"}}},
		{"hostname", []string{"--hostname-override=node_1"}, []FieldError{
			{Field: "hostnameOverride", Flag: "--hostname-override", Value: "node_1", Detail: "valid Node name"}}},
		{"nodeport addresses", []string{"--nodeport-addresses=primary,10.0.0.0/8"}, []FieldError{
			{Field: "nodePortAddresses", Flag: "--nodeport-addresses", Value: "primary,10.0.0.0/8", Detail: "cannot be combined"}}},
		{"nodeport CIDR", []string{"--nodeport-addresses=10.0.0.0/8,300.0.0.0/8"}, []FieldError{
			{Field: "nodePortAddresses", Flag: "--nodeport-addresses", Value: "300.0.0.0/8"}}},
		{"exclude CIDR", []string{"--ipvs-exclude-cidrs=10.0.0.0"}, []FieldError{
			{Field: "ipvs.excludeCIDRs", Flag: "--ipvs-exclude-cidrs", Value: "10.0.0.0"}}},
		{"sync periods", []string{"--ipvs-sync-period=0", "--ipvs-min-sync-period=-1s"}, []FieldError{
			{Field: "ipvs.syncPeriod", Flag: "--ipvs-sync-period", Value: "0s", Detail: "greater than 0"},
			{Field: "ipvs.minSyncPeriod", Flag: "--ipvs-min-sync-period", Value: "-1s", Detail: "greater than or equal to 0"}}},
		{"min sync above sync", []string{"--ipvs-sync-period=5s", "--ipvs-min-sync-period=10s"}, []FieldError{
			{Field: "ipvs.minSyncPeriod", Flag: "--ipvs-min-sync-period", Value: "10s", Detail: "ipvs.syncPeriod (5s)"}}},
		{"masquerade bit", []string{"--iptables-masquerade-bit=-1"}, []FieldError{
			{Field: "iptables.masqueradeBit", Flag: "--iptables-masquerade-bit", Value: "-1"}}},
		{"detect local mode", []string{"--detect-local-mode=Bridge"}, []FieldError{
			{Field: "detectLocalMode", Flag: "--detect-local-mode", Value: "Bridge"}}},
		{"interface prefix too long", []string{"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=averyveryverylongname"}, []FieldError{
			{Field: "detectLocal.interfaceNamePrefix", Flag: "--pod-interface-name-prefix", Value: "averyveryverylongname", Detail: "15 characters"}}},
		{"content type", []string{"--kube-api-content-type=application/yaml"}, []FieldError{
			{Field: "clientConnection.contentType", Flag: "--kube-api-content-type", Value: "application/yaml"}}},
		{"burst", []string{"--kube-api-burst=-1"}, []FieldError{
			{Field: "clientConnection.burst", Flag: "--kube-api-burst", Value: "-1"}}},
		{"config sync period", []string{"--config-sync-period=0"}, []FieldError{
			{Field: "configSyncPeriod", Flag: "--config-sync-period", Value: "0s"}}},
		{"logging format", []string{"--logging-format=xml"}, []FieldError{
			{Field: "logging.format", Flag: "--logging-format", Value: "xml"}}},
		{"kipvs log format", []string{"--kipvs-log-format=xml"}, []FieldError{
			{Field: "logging.format", Flag: "--kipvs-log-format", Value: "xml"}}},
		{"vmodule", []string{"--vmodule=proxier"}, []FieldError{
			{Field: "logging.vmodule", Flag: "--vmodule", Value: "proxier"}}},
		{"service CIDR syntax", []string{"--kipvs-service-cidr=10.96.0.0"}, []FieldError{
			{Flag: "--kipvs-service-cidr", Value: "10.96.0.0"}}},
		{"oom score adjustment", []string{"--oom-score-adj=1001"}, []FieldError{
			{Field: "oomScoreAdj", Flag: "--oom-score-adj", Value: "1001", Detail: "[-1000, 1000]"}}},
		{"graceful period", []string{"--kipvs-graceful-period=-1s"}, []FieldError{
			{Flag: "--kipvs-graceful-period", Value: "-1s"}}},
		{"member limits", []string{"--kipvs-max-service-set-members=-1"}, []FieldError{
			{Flag: "--kipvs-max-service-set-members", Value: "-1"}}},
		{"external IP CIDRs syntax", []string{"--kipvs-external-ip-cidrs=203.0.113.0/24,8.8.8.8"}, []FieldError{
			{Flag: "--kipvs-external-ip-cidrs", Value: "8.8.8.8"}}},
		{"load balancer IP CIDRs syntax", []string{"--kipvs-load-balancer-ip-cidrs=,"}, []FieldError{
			{Flag: "--kipvs-load-balancer-ip-cidrs", Value: ""}, {Flag: "--kipvs-load-balancer-ip-cidrs", Value: ""}}},
		{"several at once", []string{"--ipvs-sync-period=0", "--iptables-masquerade-bit=40", "--proxy-mode=userspace"}, []FieldError{
			{Field: "ipvs.syncPeriod", Flag: "--ipvs-sync-period", Value: "0s"},
			{Field: "iptables.masqueradeBit", Flag: "--iptables-masquerade-bit", Value: "40"},
			{Field: "mode", Flag: "--proxy-mode", Value: "userspace"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadArgs(t, nil, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			wantFieldErrors(t, err, tc.want...)
		})
	}
}

// Values pflag itself refuses never reach Load; the error still names the flag and value.
func TestFlagSyntaxErrors(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--ipvs-sync-period=30", `invalid argument "30" for "--ipvs-sync-period"`},
		{"-v=-1", `"-1"`},
		{"--conntrack-min=lots", `invalid argument "lots" for "--conntrack-min"`},
		{"--feature-gates=A", `"A" is not name=true|false`},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			_, err := loadArgs(t, nil, tc.arg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// With --config, kube-proxy v1.34 reads the file and applies over it only the invocation
// flags, --hostname-override, --master and the logging flags; every other flag given is
// ignored, and kipvs warns once for each. kipvs also applies its own --kipvs-* flags and
// --proxy-mode=ipvs.
func TestFlagsWithConfig(t *testing.T) {
	file := writeFile(t, `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: 10.244.0.0/16
hostnameOverride: from-file
ipvs:
  scheduler: wrr
  syncPeriod: 1m
conntrack:
  maxPerCore: 0
oomScoreAdj: -500
metricsBindAddress: 0.0.0.0:10249
logging:
  verbosity: 1
`)
	for _, tc := range []struct {
		name        string
		args        []string
		want        func(c *Config)
		wantIgnored []string
	}{
		{"the file alone", []string{"--proxy-mode=ipvs"}, func(c *Config) {}, nil},
		{"flags kube-proxy applies over the file", []string{"--proxy-mode=ipvs", "--hostname-override=Node-B", "--master=https://10.0.0.1:6443",
			"-v=4", "--logging-format=json", "--cleanup", "--init-only", "--write-config-to=/tmp/out.yaml"},
			func(c *Config) {
				c.HostnameOverride, c.ClientConnection.Master = "node-b", "https://10.0.0.1:6443"
				c.Verbosity, c.LogFormat = 4, LogFormatJSON
				c.Cleanup, c.InitOnly, c.WriteConfigTo = true, true, "/tmp/out.yaml"
			}, nil},
		{"kipvs's own flags apply", []string{"--proxy-mode=ipvs", "--kipvs-graceful-period=0", "--kipvs-log-format=json", "--kipvs-endpoint-metrics",
			"--kipvs-debug-endpoints"},
			func(c *Config) {
				c.Kipvs.GracefulPeriod, c.LogFormat, c.Kipvs.EndpointMetrics, c.Kipvs.DebugEndpoints = 0, LogFormatJSON, true, true
			}, nil},
		{"other flags are ignored", []string{"--proxy-mode=ipvs", "--ipvs-scheduler=sh", "--cluster-cidr=10.200.0.0/16",
			"--conntrack-max-per-core=1000", "--kubeconfig=/k", "--masquerade-all", "--oom-score-adj=10", "--healthz-port=0",
			"--metrics-bind-address=", "--feature-gates=A=true", "--iptables-sync-period=1s", "--ipvs_sync_period=2m"},
			func(c *Config) {},
			[]string{"--cluster-cidr", "--conntrack-max-per-core", "--feature-gates", "--healthz-port", "--iptables-sync-period",
				"--ipvs-scheduler", "--ipvs-sync-period", "--kubeconfig", "--masquerade-all", "--metrics-bind-address", "--oom-score-adj"}},
		{"--proxy-mode other than ipvs is ignored", []string{"--proxy-mode=iptables"}, func(c *Config) { c.Mode = "iptables" },
			[]string{"--proxy-mode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			c, err := loadArgs(t, zap.New(core), append([]string{"--config", file}, tc.args...)...)
			if c.Mode != ProxyModeIPVS {
				// Refused by validation, the mode being the file's.
				wantFieldErrors(t, err, FieldError{Field: "mode", Flag: "--proxy-mode", Value: "iptables"})
				c, err = loadArgs(t, nil, "--config", file, "--proxy-mode=ipvs")
				c.Mode = "iptables"
			}
			if err != nil {
				t.Fatal(err)
			}
			want := FileDefaults()
			want.ClusterCIDRs = []netip.Prefix{mustPrefix("10.244.0.0/16")}
			want.HostnameOverride = "from-file"
			want.IPVS.Scheduler = "wrr"
			want.IPVS.SyncPeriod = time.Minute
			want.Conntrack.MaxPerCore = 0
			want.OOMScoreAdj = -500
			want.MetricsBindAddress = mustAddrPort("0.0.0.0:10249")
			want.Verbosity = 1
			want.ConfigFile = file
			tc.want(&want)
			if diff := cmp.Diff(want, c, cmpConfig()...); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var ignored []string
			for _, e := range logs.All() {
				m := e.ContextMap()
				if m["file"] != file || !strings.Contains(e.Message, "--config") {
					t.Errorf("warning %q %v does not say why", e.Message, m)
				}
				ignored = append(ignored, m["flag"].(string))
			}
			if !slices.Equal(ignored, tc.wantIgnored) {
				t.Errorf("warned about %v, want %v", ignored, tc.wantIgnored)
			}
		})
	}
}

// Without --config, a flag given overrides the default even when set to the default value.
func TestFlagsWithoutConfig(t *testing.T) {
	c, err := loadArgs(t, nil, "--conntrack-max-per-core=32768", "--ipvs-min-sync-period=0", "--cluster-cidr=")
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.IPVS.MinSyncPeriod = 0
	if diff := cmp.Diff(want, c, cmpConfig()...); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// kube-proxy ignores --healthz-port and --metrics-port with --write-config-to too.
func TestPortFlagsIgnoredWithWriteConfigTo(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	c, err := loadArgs(t, zap.New(core), "--write-config-to=/tmp/x.yaml", "--healthz-port=0", "--metrics-bind-address=0.0.0.0", "--metrics-port=1234")
	if err != nil {
		t.Fatal(err)
	}
	if c.HealthzBindAddress != mustAddrPort("0.0.0.0:10256") || c.MetricsBindAddress != mustAddrPort("0.0.0.0:10249") {
		t.Errorf("healthz %v metrics %v", c.HealthzBindAddress, c.MetricsBindAddress)
	}
	var ignored []string
	for _, e := range logs.All() {
		ignored = append(ignored, e.ContextMap()["flag"].(string))
	}
	if want := []string{"--healthz-port", "--metrics-port"}; !slices.Equal(ignored, want) {
		t.Errorf("warned about %v, want %v", ignored, want)
	}
}

// A bad file and bad flags are reported together, the file's errors under its name.
func TestLoadReportsFileAndFlagErrorsTogether(t *testing.T) {
	file := writeFile(t, "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n"+
		"clusterCIDR: 10.0.0.0/40\niptables:\n  masqueradeBit: 40\n")
	_, err := loadArgs(t, nil, "--config", file, "--hostname-override=node_1")
	if err == nil {
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "config file "+file+": clusterCIDR") {
		t.Errorf("file errors are not attributed to the file:\n%v", err)
	}
	wantFieldErrors(t, err,
		FieldError{Field: "clusterCIDR", Value: "10.0.0.0/40"},
		FieldError{Field: "iptables.masqueradeBit", Flag: "--iptables-masquerade-bit", Value: "40"},
		FieldError{Field: "hostnameOverride", Flag: "--hostname-override", Value: "node_1"},
	)
}

func TestLoadFileProblems(t *testing.T) {
	_, err := loadArgs(t, nil, "--config", "/nonexistent/kube-proxy.yaml")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/kube-proxy.yaml") {
		t.Errorf("missing file: %v", err)
	}
	file := writeFile(t, "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvs:\n  syncPeriod: 1\n")
	_, err = loadArgs(t, nil, "--config", file)
	if err == nil || !strings.Contains(err.Error(), "config file "+file) || !strings.Contains(err.Error(), "ipvs.syncPeriod") {
		t.Errorf("wrong type: %v", err)
	}
}

func TestIgnoredFlagNotices(t *testing.T) {
	log, logs := observed()
	if _, err := loadArgs(t, log, "--iptables-sync-period=10s", "--oom-score-adj=-999", "--feature-gates=A=true", "--ipvs-sync-period=10s"); err != nil {
		t.Fatal(err)
	}
	got := noticeFields(logs)
	slices.Sort(got)
	want := []string{"--feature-gates", "--iptables-sync-period"}
	if !slices.Equal(got, want) {
		t.Errorf("notices for %v, want %v", got, want)
	}
}

func TestLoadLogsFileNotices(t *testing.T) {
	file := writeFile(t, "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nudpIdleTimeout: 250ms\n")
	log, logs := observed()
	if _, err := loadArgs(t, log, "--config", file); err != nil {
		t.Fatal(err)
	}
	entries := logs.All()
	if len(entries) != 1 || entries[0].ContextMap()["field"] != "udpIdleTimeout" || entries[0].ContextMap()["file"] != file {
		t.Errorf("notices: %v", entries)
	}
}

// kube-proxy's flag parser refuses a bad IP or ip:port in --bind-address,
// --healthz-bind-address and --metrics-bind-address before it looks at --config, so these
// are refused even when --config makes the flags ignored.
func TestIgnoredAddressFlagsStillParse(t *testing.T) {
	file := writeFile(t, "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n")
	_, err := loadArgs(t, nil, "--config", file, "--bind-address=node-1", "--healthz-bind-address=10.0.0.1:http",
		"--metrics-bind-address=localhost:10249")
	wantFieldErrors(t, err,
		FieldError{Field: "bindAddress", Flag: "--bind-address", Value: "node-1", Detail: "IP address"},
		FieldError{Field: "healthzBindAddress", Flag: "--healthz-bind-address", Value: "10.0.0.1:http", Detail: "ip or ip:port"},
		FieldError{Field: "metricsBindAddress", Flag: "--metrics-bind-address", Value: "localhost:10249", Detail: "ip or ip:port"})
	c, err := loadArgs(t, nil, "--config", file, "--bind-address=010.0.0.1", "--healthz-bind-address=10.0.0.1:0",
		"--metrics-bind-address=", "--healthz-port=-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := FileDefaults(); c.BindAddress != want.BindAddress || c.HealthzBindAddress != want.HealthzBindAddress ||
		c.MetricsBindAddress != want.MetricsBindAddress {
		t.Errorf("ignored flags changed the servers: %+v", c)
	}
}

// PreferSameTrafficDistribution is on unless a gate turns it off, on the command line or in
// the file; other gates change nothing.
func TestPreferSameTrafficDistributionGate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--feature-gates=AllAlpha=false"}, true},
		{[]string{"--feature-gates=PreferSameTrafficDistribution=true"}, true},
		{[]string{"--feature-gates=PreferSameTrafficDistribution=false"}, false},
	} {
		c, err := loadArgs(t, zap.NewNop(), tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.PreferSameTrafficDistribution(); got != tc.want {
			t.Errorf("%v: PreferSameTrafficDistribution() = %v, want %v", tc.args, got, tc.want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	file := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nfeatureGates:\n  PreferSameTrafficDistribution: false\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	c, err := loadArgs(t, zap.New(core), "--config="+path)
	if err != nil {
		t.Fatal(err)
	}
	if c.PreferSameTrafficDistribution() {
		t.Error("featureGates: {PreferSameTrafficDistribution: false} in the file left the gate on")
	}
	if n := logs.FilterField(zap.String("field", "featureGates")).Len(); n != 0 {
		t.Errorf("%d notices that featureGates is not acted on, want none: %v", n, logs.All())
	}
}
