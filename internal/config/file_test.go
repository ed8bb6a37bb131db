package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestParseSeedFiles(t *testing.T) {
	seedYAML := FileDefaults()
	seedYAML.ClientConnection = ClientConnection{
		Kubeconfig: "/var/lib/kube-proxy/kubeconfig.conf", ContentType: ContentTypeProtobuf, QPS: 10, Burst: 20,
	}
	seedYAML.ConfigSyncPeriod = 10 * time.Minute
	seedYAML.HostnameOverride = "worker-1.example.com"
	seedYAML.MetricsBindAddress = mustAddrPort("0.0.0.0:10249")
	seedYAML.ClusterCIDRs = []netip.Prefix{mustPrefix("10.244.0.0/16"), mustPrefix("fd00:10:244::/56")}
	seedYAML.NodePortAddresses = []netip.Prefix{mustPrefix("192.168.0.0/16"), mustPrefix("2001:db8::/64")}
	seedYAML.MasqueradeAll = true
	seedYAML.MasqueradeBit = 15
	seedYAML.IPVS = IPVS{
		SyncPeriod: 45 * time.Second, MinSyncPeriod: 2 * time.Second, Scheduler: "wrr",
		ExcludeCIDRs: []netip.Prefix{mustPrefix("192.168.100.0/24"), mustPrefix("fd00:1::/64")},
		StrictARP:    true, TCPTimeout: 15 * time.Minute, TCPFinTimeout: 2 * time.Minute, UDPTimeout: 5 * time.Minute,
	}
	seedYAML.Conntrack = Conntrack{
		MaxPerCore: 0, Min: 131072, TCPEstablishedTimeout: 12 * time.Hour, TCPCloseWaitTimeout: 30 * time.Minute,
		TCPBeLiberal: true, UDPTimeout: 30 * time.Second, UDPStreamTimeout: 2 * time.Minute,
	}
	seedYAML.Verbosity = 2

	seedJSON := FileDefaults()
	seedJSON.ClusterCIDRs = []netip.Prefix{mustPrefix("10.244.0.0/16")}
	seedJSON.MetricsBindAddress = mustAddrPort("0.0.0.0:10249") // a bare IP gets the default port
	seedJSON.Conntrack.MaxPerCore = 65536
	seedJSON.Conntrack.Min = 262144
	seedJSON.Conntrack.TCPEstablishedTimeout = 0 // explicitly "leave as is"
	seedJSON.IPVS.Scheduler = "lc"
	seedJSON.IPVS.SyncPeriod = time.Minute
	seedJSON.IPVS.StrictARP = true
	seedJSON.NodePortPrimary = true
	seedJSON.FeatureGates = map[string]bool{"SomeGate": true}

	for _, tc := range []struct {
		file        string
		want        Config
		wantNotices []string
	}{
		{"seed-ipvs.yaml", seedYAML, nil},
		{"seed-ipvs.json", seedJSON, []string{"featureGates"}},
		{"obsolete-fields.yaml", FileDefaults(), []string{"conntrack.max", "resourceContainer", "udpIdleTimeout"}},
		{"kube-proxy-v1.34-defaults.yaml", FileDefaults(), []string{"mode"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			log, logs := observed()
			c, err := Parse(readTestdata(t, tc.file), log)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c, cmpConfig()...); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			got := noticeFields(logs)
			slices.Sort(got)
			if !slices.Equal(got, tc.wantNotices) {
				t.Errorf("notices for %v, want %v", got, tc.wantNotices)
			}
		})
	}
}

func TestParseFileErrors(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []FieldError
	}{
		{"wrong-type.yaml", []FieldError{
			{Field: "ipvs.syncPeriod", Value: "30", Detail: `expected a duration such as "30s"`},
			{Field: "ipvs.strictARP", Value: "maybe", Detail: "expected true or false, got a string"},
			{Field: "conntrack.maxPerCore", Value: "32768", Detail: "expected a 32-bit integer, got a string"},
			{Field: "iptables.masqueradeBit", Value: "99999999999", Detail: "out of range"},
			{Field: "nodePortAddresses", Value: "10.0.0.0/8", Detail: "expected a list"},
		}},
		{"bad-values.yaml", []FieldError{
			{Field: "clusterCIDR", Flag: "--cluster-cidr", Value: "10.244.0.0/16,10.245.0.0/16", Detail: "dual-stack pair"},
			{Field: "iptables.masqueradeBit", Flag: "--iptables-masquerade-bit", Value: "32", Detail: "[0, 31]"},
			{Field: "ipvs.minSyncPeriod", Flag: "--ipvs-min-sync-period", Value: "1m0s", Detail: "ipvs.syncPeriod (10s)"},
			{Field: "ipvs.tcpTimeout", Flag: "--ipvs-tcp-timeout", Value: "-5s", Detail: "greater than or equal to 0"},
			{Field: "ipvs.excludeCIDRs", Value: "10.0.0.0/33", Detail: "valid CIDR"},
			{Field: "detectLocal.bridgeInterface", Flag: "--pod-bridge-interface", Value: "", Detail: "must be set when detectLocalMode is BridgeInterface"},
			{Field: "metricsBindAddress", Value: "localhost:10249", Detail: "not an IP address"},
		}},
		{"wrong-apiversion.yaml", []FieldError{
			{Field: "apiVersion", Value: "kubeproxy.config.k8s.io/v1beta1", Detail: "kubeproxy.config.k8s.io/v1alpha1"},
		}},
		{"iptables-mode.yaml", []FieldError{
			{Field: "mode", Flag: "--proxy-mode", Value: "iptables", Detail: "kipvs implements only the IPVS proxy mode"},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := Parse(readTestdata(t, tc.file), nil)
			if err == nil {
				t.Fatal("no error")
			}
			wantFieldErrors(t, err, tc.want...)
		})
	}
}

func TestParseInlineErrors(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	for _, tc := range []struct {
		name, doc string
		want      []FieldError
	}{
		{"missing apiVersion and kind", "mode: ipvs\n", []FieldError{
			{Field: "apiVersion", Detail: "missing"}, {Field: "kind", Detail: "missing"}}},
		{"wrong kind", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n", []FieldError{
			{Field: "kind", Value: "KubeletConfiguration"}}},
		{"apiVersion not a string", "apiVersion: 1\nkind: KubeProxyConfiguration\n", []FieldError{
			{Field: "apiVersion", Value: "1"}}},
		{"section of the wrong type", head + "conntrack: 5\n", []FieldError{
			{Field: "conntrack", Value: "5", Detail: "expected an object"}}},
		{"list item of the wrong type", head + "ipvs:\n  excludeCIDRs: [10.0.0.0/8, 7]\n", []FieldError{
			{Field: "ipvs.excludeCIDRs[1]", Value: "7", Detail: "expected a string, got a number"}}},
		{"feature gate of the wrong type", head + "featureGates:\n  A: yes-please\n", []FieldError{
			{Field: "featureGates.A", Value: "yes-please", Detail: "expected true or false"}}},
		{"bad duration text", head + "configSyncPeriod: soon\n", []FieldError{
			{Field: "configSyncPeriod", Value: "soon", Detail: "duration"}}},
		{"bad bind address", head + "bindAddress: 1.2.3\n", []FieldError{
			{Field: "bindAddress", Value: "1.2.3", Detail: "must be an IP address"}}},
		{"healthz port out of range", head + "healthzBindAddress: 0.0.0.0:70000\n", []FieldError{
			{Field: "healthzBindAddress", Value: "0.0.0.0:70000", Detail: "between 1 and 65535"}}},
		{"primary mixed with CIDRs", head + "nodePortAddresses: [primary, 10.0.0.0/8]\n", []FieldError{
			{Field: "nodePortAddresses", Value: "primary,10.0.0.0/8", Detail: "cannot be combined"}}},
		{"bad logging format", head + "logging:\n  format: xml\n", []FieldError{
			{Field: "logging.format", Value: "xml", Detail: `"text" or "json"`}}},
		{"blank hostname", head + "hostnameOverride: '   '\n", []FieldError{
			{Field: "hostnameOverride", Value: "   ", Detail: "blank"}}},
		{"bad detect-local mode", head + "detectLocalMode: PodCIDR\n", []FieldError{
			{Field: "detectLocalMode", Flag: "--detect-local-mode", Value: "PodCIDR", Detail: `"ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix"`}}},
		{"negative conntrack values", head + "conntrack:\n  maxPerCore: -1\n  min: -2\n  udpTimeout: -1s\n", []FieldError{
			{Field: "conntrack.maxPerCore", Flag: "--conntrack-max-per-core", Value: "-1"},
			{Field: "conntrack.min", Flag: "--conntrack-min", Value: "-2"},
			{Field: "conntrack.udpTimeout", Flag: "--conntrack-udp-timeout", Value: "-1s"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), nil)
			if err == nil {
				t.Fatal("no error")
			}
			wantFieldErrors(t, err, tc.want...)
		})
	}
}

// Unknown fields are ignored and of duplicate fields the last is used, as kube-proxy's
// lenient fallback does; each gets a warning, an unknown field with the closest known one.
func TestParseWarnsAboutUnknownAndDuplicateFields(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	c, err := Parse(readTestdata(t, "unknown-field.yaml"), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	want := FileDefaults()
	want.ClusterCIDRs = []netip.Prefix{mustPrefix("10.245.0.0/16")}
	if diff := cmp.Diff(want, c, cmpConfig()...); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	type entry struct {
		Level   zapcore.Level
		Message string
		Fields  map[string]any
	}
	var got []entry
	for _, e := range logs.All() {
		got = append(got, entry{e.Level, e.Message, e.ContextMap()})
	}
	const unknown = "unknown field in the config file, ignored as kube-proxy ignores it"
	wantLog := []entry{
		{zapcore.WarnLevel, unknown, map[string]any{"field": "ipvs.scheduller", "did_you_mean": "ipvs.scheduler", "line": int64(8)}},
		{zapcore.WarnLevel, unknown, map[string]any{"field": "ipvs.SyncPeriod", "did_you_mean": "ipvs.syncPeriod", "line": int64(9)}},
		{zapcore.WarnLevel, unknown, map[string]any{"field": "conntrackMax", "line": int64(10)}},
		{zapcore.WarnLevel, "duplicate field in the config file; the last one is used, as kube-proxy does",
			map[string]any{"field": "clusterCIDR", "line": int64(12)}},
	}
	if diff := cmp.Diff(wantLog, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

// Errors about the document as a whole (not a field) still explain themselves.
func TestParseDocumentErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"empty", "  \n", "empty"},
		{"not YAML", "apiVersion: [unclosed\n", "not valid YAML or JSON"},
		{"a list", "- a\n- b\n", "expected a KubeProxyConfiguration object"},
		{"YAML flow mapping", "{apiVersion: kubeproxy.config.k8s.io/v1alpha1, kind: KubeProxyConfiguration}", "read as JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// Unset and zero values get kube-proxy's defaults; explicit zeros of the pointer fields
// (conntrack) are kept, meaning "leave the kernel's value".
func TestParseDefaulting(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n"
	for _, tc := range []struct {
		name, doc string
		want      func(c *Config)
	}{
		{"zero values are unset", head + "ipvs:\n  syncPeriod: 0s\nconfigSyncPeriod: 0s\nclientConnection:\n  qps: 0\n  burst: 0\n  contentType: ''\n" +
			"iptables:\n  masqueradeBit: null\nbindAddress: ''\nhealthzBindAddress: ''\nmetricsBindAddress: ''\n", func(c *Config) {}},
		{"explicit conntrack zeros", head + "conntrack:\n  maxPerCore: 0\n  min: 0\n  tcpEstablishedTimeout: 0s\n  tcpCloseWaitTimeout: 0s\n", func(c *Config) {
			c.Conntrack.MaxPerCore, c.Conntrack.Min, c.Conntrack.TCPEstablishedTimeout, c.Conntrack.TCPCloseWaitTimeout = 0, 0, 0, 0
		}},
		{"masquerade bit 0 is kept", head + "iptables:\n  masqueradeBit: 0\n", func(c *Config) { c.MasqueradeBit = 0 }},
		{"IPv6 bind address moves the server defaults", head + "bindAddress: '::'\n", func(c *Config) {
			c.BindAddress = netip.IPv6Unspecified()
			c.HealthzBindAddress = mustAddrPort("[::]:10256")
			c.MetricsBindAddress = mustAddrPort("[::1]:10249")
		}},
		{"bare IPs get the default ports", head + "healthzBindAddress: 10.0.0.1\nmetricsBindAddress: 'fd00::1'\n", func(c *Config) {
			c.HealthzBindAddress = mustAddrPort("10.0.0.1:10256")
			c.MetricsBindAddress = mustAddrPort("[fd00::1]:10249")
		}},
		{"sloppy IPv4 and host bits", head + "clusterCIDR: ' 010.244.1.2/16 , fd00::1/64'\n", func(c *Config) {
			c.ClusterCIDRs = []netip.Prefix{mustPrefix("10.244.0.0/16"), mustPrefix("fd00::/64")}
		}},
		{"empty mode and scheduler", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ''\nipvs:\n  scheduler: ''\n", func(c *Config) {}},
		{"nulls leave defaults", head + "ipvs: null\nconntrack:\n  maxPerCore: null\nnodePortAddresses: null\n", func(c *Config) {}},
		{"json log format", head + "logging:\n  format: json\n  verbosity: 4\n", func(c *Config) { c.LogFormat, c.Verbosity = LogFormatJSON, 4 }},
		{"YAML flow mapping inside", head + "ipvs: {strictARP: true}\n", func(c *Config) { c.IPVS.StrictARP = true }},
		{"oomScoreAdj", head + "oomScoreAdj: -500\n", func(c *Config) { c.OOMScoreAdj = -500 }},
		{"oomScoreAdj null is the default", head + "oomScoreAdj: null\n", func(c *Config) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.doc), nil)
			if err != nil {
				t.Fatal(err)
			}
			want := FileDefaults()
			tc.want(&want)
			if diff := cmp.Diff(want, c, cmpConfig()...); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Ignored fields get a notice only when set to something that would have made a difference.
func TestParseIgnoredFieldNotices(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n"
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"defaults are silent", head + "iptables:\n  syncPeriod: 30s\n  minSyncPeriod: 1s\n  localhostNodePorts: true\noomScoreAdj: -999\n" +
			"nftables:\n  masqueradeBit: 14\n  syncPeriod: 30s\n  minSyncPeriod: 1s\nlogging:\n  flushFrequency: 5s\n", nil},
		{"changed values are reported", head + "iptables:\n  syncPeriod: 10s\n  localhostNodePorts: false\noomScoreAdj: -500\n" +
			"nftables:\n  masqueradeAll: true\nwinkernel:\n  enableDSR: true\nportRange: 30000-32767\n" +
			"showHiddenMetricsForVersion: '1.33'\nlogging:\n  vmodule:\n  - filePattern: proxier.go\n    verbosity: 4\n  options:\n    text:\n      splitStream: true\n",
			[]string{"iptables.localhostNodePorts", "iptables.syncPeriod", "logging.options", "nftables.masqueradeAll",
				"portRange", "showHiddenMetricsForVersion", "winkernel"}},
		// What kube-proxy's --write-config-to writes in IPVS mode: the other modes' sync
		// periods are 0s.
		{"kube-proxy's IPVS-mode output is silent", head + "iptables:\n  masqueradeBit: 14\n  syncPeriod: 0s\n  minSyncPeriod: 0s\n" +
			"nftables:\n  masqueradeAll: false\n  masqueradeBit: 14\n  syncPeriod: 0s\n  minSyncPeriod: 0s\n", nil},
		{"nftables settings are reported one by one", head + "nftables:\n  masqueradeBit: 3\n  syncPeriod: 1m\n", []string{"nftables.masqueradeBit", "nftables.syncPeriod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := observed()
			if _, err := Parse([]byte(tc.doc), log); err != nil {
				t.Fatal(err)
			}
			got := noticeFields(logs)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("notices for %v, want %v", got, tc.want)
			}
			for _, e := range logs.All() {
				if e.ContextMap()["reason"] == "" {
					t.Errorf("notice %v gives no reason", e.ContextMap())
				}
			}
		})
	}
}
