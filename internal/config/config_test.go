package config

import (
	"bufio"
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/internal/ipvsmode"
)

// testdata/kube-proxy-v1.34-defaults.yaml is what kube-proxy v1.34.10's own defaulting
// makes of an empty KubeProxyConfiguration (see testdata/README.md).
func TestFileDefaultsEqualKubeProxyDefaults(t *testing.T) {
	for _, name := range []string{"kube-proxy-v1.34-defaults.yaml", "minimal.yaml"} {
		t.Run(name, func(t *testing.T) {
			c, err := Parse(readTestdata(t, name), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(FileDefaults(), c, cmpConfig()...); diff != "" {
				t.Errorf("(-FileDefaults +parsed):\n%s", diff)
			}
		})
	}
}

// defaultKubeProxyConfiguration (the base of every rendered file) must be exactly kube-proxy's
// defaulted object, including the fields kipvs ignores.
func TestDefaultKubeProxyConfigurationIsKubeProxys(t *testing.T) {
	got, err := yaml.Marshal(defaultKubeProxyConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	want := readTestdata(t, "kube-proxy-v1.34-defaults.yaml")
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("(-kube-proxy +kipvs):\n%s", diff)
	}
}

// Rendering FileDefaults gives kube-proxy's defaults except for the two values kube-proxy
// resolves later (mode, detectLocalMode), which kipvs writes out, and the iptables and
// nftables sync periods, which kube-proxy writes as 0s in IPVS mode (only the active mode's
// section carries them). The IPVS scheduler stays empty, as in kube-proxy.
func TestRenderedFileDefaultsDifferFromKubeProxyOnlyInResolvedValues(t *testing.T) {
	c := FileDefaults()
	got, err := c.RenderYAML()
	if err != nil {
		t.Fatal(err)
	}
	resolved := strings.NewReplacer(
		"\ndetectLocalMode: ClusterCIDR\n", "\ndetectLocalMode: \"\"\n",
		"\nmode: ipvs\n", "\nmode: \"\"\n",
		"\n  masqueradeBit: 14\n  minSyncPeriod: 0s\n  syncPeriod: 0s\n", "\n  masqueradeBit: 14\n  minSyncPeriod: 1s\n  syncPeriod: 30s\n",
	).Replace(string(got))
	if diff := cmp.Diff(string(readTestdata(t, "kube-proxy-v1.34-defaults.yaml")), resolved); diff != "" {
		t.Errorf("(-kube-proxy +kipvs):\n%s", diff)
	}
}

// testdata/kube-proxy-v1.34-flags.tsv lists kube-proxy v1.34.10's flags: name, shorthand,
// type, default, deprecated. kipvs must register each with the same type and default.
func TestFlagsMatchKubeProxy(t *testing.T) {
	fs := pflag.NewFlagSet("kipvs", pflag.ContinueOnError)
	AddFlags(fs)
	upstream := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(readTestdata(t, "kube-proxy-v1.34-flags.tsv")))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		col := strings.Split(line, "\t")
		if len(col) != 5 {
			t.Fatalf("bad golden line %q", line)
		}
		name, short, typ, def, deprecated := col[0], col[1], col[2], col[3], col[4] == "deprecated"
		upstream[name] = true
		fl := fs.Lookup(name)
		if fl == nil {
			t.Errorf("kube-proxy flag --%s is missing", name)
			continue
		}
		if fl.Shorthand != short || fl.Value.Type() != typ || fl.DefValue != def || (fl.Deprecated != "") != deprecated {
			t.Errorf("--%s: got shorthand %q type %q default %q deprecated %v; kube-proxy has %q %q %q %v",
				name, fl.Shorthand, fl.Value.Type(), fl.DefValue, fl.Deprecated != "", short, typ, def, deprecated)
		}
		if fl.Usage == "" {
			t.Errorf("--%s has no help", name)
		}
	}
	if len(upstream) < 50 {
		t.Fatalf("golden file lists only %d flags", len(upstream))
	}
	fs.VisitAll(func(fl *pflag.Flag) {
		if !upstream[fl.Name] && !strings.HasPrefix(fl.Name, "kipvs-") {
			t.Errorf("--%s is neither a kube-proxy flag nor named --kipvs-*", fl.Name)
		}
		if strings.HasPrefix(fl.Name, "kipvs-") && len(fl.Usage) < 40 {
			t.Errorf("--%s: help %q does not document the flag", fl.Name, fl.Usage)
		}
	})
	for name, def := range map[string]string{
		"kipvs-source-file": "", "kipvs-service-cidr": "", "kipvs-graceful-period": "30s", "kipvs-log-format": "text",
		"kipvs-endpoint-metrics": "false", "kipvs-debug-endpoints": "false", "kipvs-max-service-set-members": "32768", "kipvs-max-set-members": "1048576",
		"kipvs-max-service-virtual-servers": "32768", "kipvs-max-service-real-servers": "65536", "kipvs-max-real-servers": "1048576",
		"kipvs-max-service-series": "140000", "kipvs-external-ip-cidrs": "", "kipvs-load-balancer-ip-cidrs": "",
	} {
		fl := fs.Lookup(name)
		if fl == nil {
			t.Errorf("--%s is missing", name)
		} else if fl.DefValue != def {
			t.Errorf("--%s default %q, want %q", name, fl.DefValue, def)
		}
	}
}

// With no flags at all, Load gives Defaults: kube-proxy's flag defaults in IPVS mode.
func TestLoadWithoutArgumentsGivesDefaults(t *testing.T) {
	c, err := loadArgs(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Defaults(), c, cmpConfig()...); diff != "" {
		t.Errorf("(-Defaults +loaded):\n%s", diff)
	}
	// kube-proxy's --ipvs-min-sync-period default; a file's unset ipvs.minSyncPeriod is 0.
	if c.IPVS.MinSyncPeriod != time.Second || FileDefaults().IPVS.MinSyncPeriod != 0 {
		t.Errorf("min sync period: flags %s, file %s; want 1s and 0s", c.IPVS.MinSyncPeriod, FileDefaults().IPVS.MinSyncPeriod)
	}
	for _, d := range []Config{Defaults(), FileDefaults()} {
		if err := d.Validate(); err != nil {
			t.Errorf("defaults do not validate: %v", err)
		}
	}
}

func TestConntrackMax(t *testing.T) {
	for _, tc := range []struct {
		name            string
		perCore, min    int32
		cpus, wantLimit int
	}{
		{"scaled above the floor", 32768, 131072, 8, 262144},
		{"floor wins on small nodes", 32768, 131072, 2, 131072},
		{"per core 0 leaves the limit alone", 0, 131072, 64, 0},
		{"min 0", 1000, 0, 3, 3000},
		{"unknown CPU count counts as one", 200000, 131072, 0, 200000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Conntrack{MaxPerCore: tc.perCore, Min: tc.min}.Max(tc.cpus)
			if got != tc.wantLimit {
				t.Errorf("Max(%d) = %d, want %d", tc.cpus, got, tc.wantLimit)
			}
		})
	}
}

func TestHasLocalDetector(t *testing.T) {
	v4 := []netip.Prefix{mustPrefix("10.244.0.0/16")}
	dual := []netip.Prefix{mustPrefix("10.244.0.0/16"), mustPrefix("fd00:10:244::/56")}
	for _, tc := range []struct {
		name         string
		mode         LocalMode
		cidrs        []netip.Prefix
		bridge, pfx  string
		want4, want6 bool
	}{
		{"ClusterCIDR without CIDR", LocalModeClusterCIDR, nil, "", "", false, false},
		{"ClusterCIDR IPv4 only", LocalModeClusterCIDR, v4, "", "", true, false},
		{"ClusterCIDR dual-stack", LocalModeClusterCIDR, dual, "", "", true, true},
		{"NodeCIDR", LocalModeNodeCIDR, nil, "", "", true, true},
		{"BridgeInterface", LocalModeBridgeInterface, nil, "cbr0", "", true, true},
		{"BridgeInterface unset", LocalModeBridgeInterface, v4, "", "", false, false},
		{"InterfaceNamePrefix", LocalModeInterfaceNamePrefix, nil, "", "veth", true, true},
		{"InterfaceNamePrefix unset", LocalModeInterfaceNamePrefix, nil, "cbr0", "", false, false},
		{"unknown mode", "Magic", dual, "cbr0", "veth", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.DetectLocalMode, c.ClusterCIDRs, c.BridgeInterface, c.InterfaceNamePrefix = tc.mode, tc.cidrs, tc.bridge, tc.pfx
			if got := c.HasLocalDetector(false); got != tc.want4 {
				t.Errorf("IPv4: %v, want %v", got, tc.want4)
			}
			if got := c.HasLocalDetector(true); got != tc.want6 {
				t.Errorf("IPv6: %v, want %v", got, tc.want6)
			}
		})
	}
}

func TestClusterCIDRByFamily(t *testing.T) {
	c := Defaults()
	c.ClusterCIDRs = []netip.Prefix{mustPrefix("fd00:10:244::/56"), mustPrefix("10.244.0.0/16")}
	if p, ok := c.ClusterCIDR(false); !ok || p != mustPrefix("10.244.0.0/16") {
		t.Errorf("IPv4: %v %v", p, ok)
	}
	if p, ok := c.ClusterCIDR(true); !ok || p != mustPrefix("fd00:10:244::/56") {
		t.Errorf("IPv6: %v %v", p, ok)
	}
	c.ClusterCIDRs = c.ClusterCIDRs[:1]
	if _, ok := c.ClusterCIDR(false); ok {
		t.Error("IPv4 found in an IPv6-only list")
	}
}

func TestCloneIsDeep(t *testing.T) {
	c := Defaults()
	c.ClusterCIDRs = []netip.Prefix{mustPrefix("10.0.0.0/8")}
	c.FeatureGates = map[string]bool{"A": true}
	d := c.Clone()
	d.ClusterCIDRs[0] = mustPrefix("11.0.0.0/8")
	d.FeatureGates["A"] = false
	if c.ClusterCIDRs[0] != mustPrefix("10.0.0.0/8") || !c.FeatureGates["A"] {
		t.Error("Clone shares memory with the original")
	}
}

// SysctlOptions carries every setting the sysctls depend on, each from its own field.
func TestSysctlOptions(t *testing.T) {
	var c Config
	c.IPVS.StrictARP = true
	c.Conntrack = Conntrack{MaxPerCore: 1000, Min: 3000, TCPEstablishedTimeout: 1 * time.Second,
		TCPCloseWaitTimeout: 2 * time.Second, TCPBeLiberal: true, UDPTimeout: 3 * time.Second, UDPStreamTimeout: 4 * time.Second}
	want := ipvsmode.SysctlOptions{StrictARP: true, ConntrackMax: 4000, TCPEstablishedTimeout: 1 * time.Second,
		TCPCloseWaitTimeout: 2 * time.Second, TCPBeLiberal: true, UDPTimeout: 3 * time.Second, UDPStreamTimeout: 4 * time.Second}
	if diff := cmp.Diff(want, c.SysctlOptions(4)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
