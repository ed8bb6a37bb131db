//go:build oracle

package configdiff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/e2e/oracle"
	"github.com/kipvs/kipvs/internal/config"
)

// kubeadmIPVS is the KubeProxyConfiguration kubeadm v1.34 writes into the kube-proxy
// ConfigMap (key config.conf) for a cluster with podSubnet 10.244.0.0/16 and an IPv4
// advertise address, with mode changed to ipvs as an operator does: kubeadm sets only
// bindAddress, clusterCIDR and clientConnection.kubeconfig
// (cmd/kubeadm/app/componentconfigs/kubeproxy.go) and marshals the v1alpha1 type without
// defaulting, so every other field is written as its zero value.
const kubeadmIPVS = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpBeLiberal: false
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: ""
hostnameOverride: ""
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
kind: KubeProxyConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: ""
mode: ipvs
nftables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
`

// head starts a YAML KubeProxyConfiguration.
const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

// jhead is the type of a JSON KubeProxyConfiguration.
const jhead = `"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration"`

// seedFlags are a systemd unit's kube-proxy command line in IPVS mode, without --config.
var seedFlags = []string{
	"--proxy-mode=ipvs",
	"--kubeconfig=/etc/kubernetes/kube-proxy.kubeconfig",
	"--cluster-cidr=10.244.0.0/16",
	"--hostname-override=Worker-1",
	"--ipvs-scheduler=wrr",
	"--ipvs-sync-period=15s",
	"--ipvs-min-sync-period=2s",
	"--masquerade-all",
	"--ipvs-strict-arp",
	"--ipvs-exclude-cidrs=10.250.0.0/16,192.168.100.0/24",
	"--nodeport-addresses=192.168.1.0/24,10.0.0.0/8",
	"--conntrack-max-per-core=0",
	"--ipvs-tcp-timeout=900s",
	"--ipvs-tcpfin-timeout=120s",
	"--ipvs-udp-timeout=300s",
	"--metrics-bind-address=0.0.0.0:10249",
	"--healthz-bind-address=0.0.0.0:10256",
	"--v=2",
}

// testCase is one row: an optional configuration file (passed as --config) and flags.
type testCase struct {
	name string
	// file is the configuration file's content ("": no --config); fileName its name
	// (default config.yaml).
	file, fileName string
	flags          []string
	// kubeProxyRejects is what kube-proxy v1.34.10 is known to decide, so that a case
	// cannot pass by both binaries failing for a reason the row is not about.
	kubeProxyRejects bool
}

func cases() []testCase {
	kubeadmNoMode := strings.Replace(kubeadmIPVS, "mode: ipvs\n", "mode: \"\"\n", 1)
	return []testCase{
		// Command lines.
		{name: "defaults"},
		{name: "proxy-mode-ipvs", flags: []string{"--proxy-mode=ipvs"}},
		{name: "seed-systemd-flags", flags: seedFlags},
		{name: "seed-systemd-flags-underscores", flags: []string{"--proxy_mode=ipvs", "--cluster_cidr=10.244.0.0/16", "--ipvs_scheduler=lc"}},
		{name: "api-and-server-flags", flags: []string{"--proxy-mode=ipvs", "--kube-api-qps=50", "--kube-api-burst=100",
			"--kube-api-content-type=application/json", "--config-sync-period=1m", "--bind-address=192.168.1.10",
			"--healthz-bind-address=127.0.0.1:10256", "--metrics-bind-address=[::1]:9999", "--bind-address-hard-fail", "--profiling",
			"--oom-score-adj=-500"}},
		{name: "bare-ip-server-address", flags: []string{"--proxy-mode=ipvs", "--healthz-bind-address=127.0.0.1"}, kubeProxyRejects: true},
		{name: "conntrack-flags", flags: []string{"--proxy-mode=ipvs", "--conntrack-max-per-core=65536", "--conntrack-min=1000",
			"--conntrack-tcp-timeout-established=12h", "--conntrack-tcp-timeout-close-wait=30m", "--conntrack-tcp-be-liberal",
			"--conntrack-udp-timeout=30s", "--conntrack-udp-timeout-stream=2m"}},
		{name: "detect-local-flags", flags: []string{"--proxy-mode=ipvs", "--detect-local-mode=InterfaceNamePrefix",
			"--pod-interface-name-prefix=cali", "--pod-bridge-interface=cni0"}},
		{name: "dual-stack-cluster-cidr", flags: []string{"--proxy-mode=ipvs", "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56"}},
		{name: "nodeport-addresses-primary", flags: []string{"--proxy-mode=ipvs", "--nodeport-addresses=primary"}},
		{name: "iptables-flags-in-ipvs-mode", flags: []string{"--proxy-mode=ipvs", "--iptables-sync-period=10s",
			"--iptables-min-sync-period=2s", "--iptables-masquerade-bit=12", "--iptables-localhost-nodeports=false"}},
		{name: "logging-flags", flags: []string{"--proxy-mode=ipvs", "--logging-format=json", "-v=4"}},
		{name: "deprecated-port-flags", flags: []string{"--proxy-mode=ipvs", "--healthz-port=12345", "--metrics-port=0"}},
		{name: "bind-address-ipv6", flags: []string{"--proxy-mode=ipvs", "--bind-address=::"}},
		{name: "bind-address-leading-zeros", flags: []string{"--proxy-mode=ipvs", "--bind-address=010.000.000.001"}},
		{name: "api-qps-burst-zero", flags: []string{"--proxy-mode=ipvs", "--kube-api-qps=0", "--kube-api-burst=0"}},
		{name: "master-flag", flags: []string{"--proxy-mode=ipvs", "--master=https://10.0.0.1:6443"}},
		{name: "detect-local-node-cidr", flags: []string{"--proxy-mode=ipvs", "--detect-local-mode=NodeCIDR"}},
		{name: "zero-min-sync-period", flags: []string{"--proxy-mode=ipvs", "--ipvs-min-sync-period=0"}},
		{name: "empty-server-address-flags", flags: []string{"--proxy-mode=ipvs", "--healthz-bind-address=", "--metrics-bind-address="}},
		{name: "empty-list-flags", flags: []string{"--proxy-mode=ipvs", "--nodeport-addresses=", "--ipvs-exclude-cidrs="}},
		{name: "sloppy-cidrs-flag", flags: []string{"--proxy-mode=ipvs", "--cluster-cidr=010.244.1.0/16",
			"--nodeport-addresses=192.168.1.1/24,FD00::1/64", "--ipvs-exclude-cidrs=10.0.0.1/8"}},
		{name: "proxy-mode-iptables", flags: []string{"--proxy-mode=iptables"}},
		{name: "proxy-mode-nftables", flags: []string{"--proxy-mode=nftables"}},

		// Configuration files.
		{name: "kubeadm-ipvs", file: kubeadmIPVS},
		{name: "kubeadm-ipvs-with-flags", file: kubeadmIPVS, flags: []string{"--hostname-override=Worker-2", "--v=3",
			"--ipvs-scheduler=lc", "--cluster-cidr=10.9.0.0/16", "--masquerade-all", "--conntrack-max-per-core=0",
			"--metrics-bind-address=0.0.0.0:10249"}},
		{name: "kubeadm-no-mode-proxy-mode-ipvs", file: kubeadmNoMode, flags: []string{"--proxy-mode=ipvs"}},
		{name: "file-mode-nftables-proxy-mode-ipvs", file: head + "mode: nftables\n", flags: []string{"--proxy-mode=ipvs"}},
		{name: "file-mode-ipvs-only", file: head + "mode: ipvs\n"},
		{name: "file-seed-settings", file: head + `mode: ipvs
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
hostnameOverride: worker-3
bindAddress: "::"
ipvs:
  scheduler: sh
  syncPeriod: 1m
  minSyncPeriod: 5s
  strictARP: true
  excludeCIDRs: [10.250.0.0/16]
  tcpTimeout: 900s
  tcpFinTimeout: 2m
  udpTimeout: 5m
iptables:
  masqueradeAll: true
  masqueradeBit: 10
conntrack:
  maxPerCore: 0
  min: 0
  tcpBeLiberal: true
nodePortAddresses: [192.168.0.0/16]
oomScoreAdj: -100
configSyncPeriod: 5m
`},
		{name: "file-bare-ip-server-address", file: head + "mode: ipvs\nhealthzBindAddress: 127.0.0.1\nmetricsBindAddress: \"::\"\n"},
		{name: "file-unused-settings", file: head + `mode: ipvs
iptables:
  syncPeriod: 10s
  minSyncPeriod: 2s
  localhostNodePorts: false
nftables:
  syncPeriod: 20s
  minSyncPeriod: 3s
  masqueradeAll: true
  masqueradeBit: 5
logging:
  flushFrequency: 10s
  vmodule:
  - filePattern: proxier.go
    verbosity: 4
  options:
    text:
      splitStream: true
showHiddenMetricsForVersion: "1.33"
portRange: 30000-32767
windowsRunAsService: true
winkernel:
  enableDSR: true
  networkName: vxlan0
`},
		{name: "client-connection-file", file: head + "mode: ipvs\nclientConnection:\n  qps: -1\n  burst: 0\n  contentType: application/json\n  acceptContentTypes: application/json\n"},
		{name: "logging-file", file: head + "mode: ipvs\nlogging:\n  format: json\n  verbosity: 5\n"},
		{name: "masquerade-file", file: head + "mode: ipvs\niptables:\n  masqueradeBit: null\n  masqueradeAll: true\nnftables:\n  masqueradeAll: true\n"},
		{name: "known-feature-gate", file: head + "mode: ipvs\nfeatureGates:\n  AllAlpha: false\n"},
		{name: "empty-server-address-file", file: head + "mode: ipvs\nmetricsBindAddress: \"\"\nhealthzBindAddress: \"\"\n"},
		{name: "sloppy-cidrs-file", file: head + "mode: ipvs\nclusterCIDR: 10.244.1.0/16,FD00:0::/48\nnodePortAddresses: [\"192.168.1.1/24\"]\nipvs:\n  excludeCIDRs: [\"010.0.0.1/8\"]\n"},
		{name: "hostname-override-file-upper-case", file: head + "mode: ipvs\nhostnameOverride: Worker-9\n"},
		{name: "json-file", fileName: "config.json", file: `{` + jhead + `, "mode": "ipvs", "clusterCIDR": "10.244.0.0/16",
 "ipvs": {"scheduler": "wrr", "strictARP": true, "syncPeriod": "20s"}, "conntrack": {"maxPerCore": 0}}`},
		{name: "unknown-field", file: head + "mode: ipvs\nconntrackMax: 1000\nipvs:\n  scheduler: wrr\n"},
		{name: "mistyped-field", file: head + "mode: ipvs\nipvs:\n  scheduller: wrr\n  strictArp: true\n  syncPeriod: 1m\n"},
		{name: "obsolete-fields", file: head + "mode: ipvs\nresourceContainer: /kube-proxy\nudpIdleTimeout: 250ms\nconntrack:\n  max: 0\n"},
		{name: "duplicate-key-yaml", file: head + "mode: ipvs\nclusterCIDR: 10.0.0.0/16\nclusterCIDR: 10.1.0.0/16\nipvs:\n  scheduler: wrr\n  scheduler: lc\n"},
		{name: "duplicate-section-yaml", file: head + "mode: ipvs\nipvs:\n  scheduler: wrr\n  strictARP: true\nipvs:\n  syncPeriod: 1m\n"},
		{name: "duplicate-key-json", fileName: "config.json",
			file: `{` + jhead + `, "mode": "ipvs", "clusterCIDR": "10.0.0.0/16", "clusterCIDR": "10.1.0.0/16"}`},
		{name: "duplicate-section-json", fileName: "config.json",
			file: `{` + jhead + `, "mode": "ipvs", "ipvs": {"scheduler": "wrr", "strictARP": true}, "ipvs": {"syncPeriod": "1m"}}`},
		{name: "file-no-mode", file: head + "clusterCIDR: 10.244.0.0/16\n"},
		{name: "file-mode-nftables", file: head + "mode: nftables\n"},

		// Files refused.
		{name: "wrong-apiversion", file: "apiVersion: kubeproxy.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\nmode: ipvs\n", kubeProxyRejects: true},
		{name: "wrong-kind", file: "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\nmode: ipvs\n", kubeProxyRejects: true},
		{name: "no-type", file: "mode: ipvs\n", kubeProxyRejects: true},
		{name: "empty-file", file: "\n", kubeProxyRejects: true},
		{name: "wrong-type-bool", file: head + "mode: ipvs\nipvs:\n  strictARP: maybe\n", kubeProxyRejects: true},
		{name: "wrong-type-duration", file: head + "mode: ipvs\nipvs:\n  syncPeriod: soon\n", kubeProxyRejects: true},
		{name: "wrong-type-section", file: head + "mode: ipvs\nconntrack: 5\n", kubeProxyRejects: true},
		{name: "wrong-type-number-as-string", file: head + "mode: ipvs\nconntrack:\n  maxPerCore: \"0\"\n", kubeProxyRejects: true},
		{name: "bad-yaml", file: head + "mode: ipvs\nipvs:\n  scheduler: [wrr\n", kubeProxyRejects: true},
		{name: "bad-json", fileName: "config.json", file: `{` + jhead + `, "mode": "ipvs",}`, kubeProxyRejects: true},
		{name: "missing-file", flags: []string{"--config=/nonexistent/kube-proxy.yaml"}, kubeProxyRejects: true},

		// Values refused, on the command line and in the file.
		{name: "negative-verbosity", flags: []string{"--proxy-mode=ipvs", "-v=-1"}, kubeProxyRejects: true},
		{name: "proxy-mode-upper-case", flags: []string{"--proxy-mode=IPVS"}, kubeProxyRejects: true},
		{name: "unknown-flag", flags: []string{"--proxy-mode=ipvs", "--no-such-flag"}, kubeProxyRejects: true},
		{name: "bad-cluster-cidr-flag", flags: []string{"--proxy-mode=ipvs", "--cluster-cidr=10.244.0.0/33"}, kubeProxyRejects: true},
		{name: "bad-cluster-cidr-file", file: head + "mode: ipvs\nclusterCIDR: 10.244.0.0\n", kubeProxyRejects: true},
		{name: "cluster-cidrs-same-family", flags: []string{"--proxy-mode=ipvs", "--cluster-cidr=10.1.0.0/16,10.2.0.0/16"}, kubeProxyRejects: true},
		{name: "empty-cluster-cidr-flag", flags: []string{"--proxy-mode=ipvs", "--cluster-cidr="}, kubeProxyRejects: true},
		{name: "cluster-cidr-with-space", flags: []string{"--proxy-mode=ipvs", "--cluster-cidr=10.1.0.0/16, fd00::/64"}, kubeProxyRejects: true},
		{name: "three-cluster-cidrs", flags: []string{"--proxy-mode=ipvs", "--cluster-cidr=10.1.0.0/16,10.2.0.0/16,fd00::/64"}, kubeProxyRejects: true},
		{name: "negative-sync-period-flag", flags: []string{"--proxy-mode=ipvs", "--ipvs-sync-period=-1s"}, kubeProxyRejects: true},
		{name: "negative-sync-period-file", file: head + "mode: ipvs\nipvs:\n  syncPeriod: -30s\n", kubeProxyRejects: true},
		{name: "zero-config-sync-period", flags: []string{"--proxy-mode=ipvs", "--config-sync-period=0"}, kubeProxyRejects: true},
		{name: "min-sync-above-sync", flags: []string{"--proxy-mode=ipvs", "--ipvs-sync-period=5s", "--ipvs-min-sync-period=10s"}, kubeProxyRejects: true},
		{name: "negative-ipvs-timeout", flags: []string{"--proxy-mode=ipvs", "--ipvs-tcp-timeout=-1s"}, kubeProxyRejects: true},
		{name: "negative-conntrack-timeout-file", file: head + "mode: ipvs\nconntrack:\n  udpTimeout: -1s\n", kubeProxyRejects: true},
		{name: "negative-conntrack-max-per-core", flags: []string{"--proxy-mode=ipvs", "--conntrack-max-per-core=-1"}, kubeProxyRejects: true},
		{name: "bad-exclude-cidr", flags: []string{"--proxy-mode=ipvs", "--ipvs-exclude-cidrs=10.0.0.0/8,nonsense"}, kubeProxyRejects: true},
		{name: "bad-nodeport-addresses", file: head + "mode: ipvs\nnodePortAddresses: [10.0.0.1]\n", kubeProxyRejects: true},
		{name: "nodeport-primary-and-cidr", flags: []string{"--proxy-mode=ipvs", "--nodeport-addresses=primary,10.0.0.0/8"}, kubeProxyRejects: true},
		{name: "masquerade-bit-out-of-range", flags: []string{"--proxy-mode=ipvs", "--iptables-masquerade-bit=32"}, kubeProxyRejects: true},
		{name: "oom-score-adj-out-of-range", file: head + "mode: ipvs\noomScoreAdj: -1001\n", kubeProxyRejects: true},
		{name: "bad-bind-address", flags: []string{"--proxy-mode=ipvs", "--bind-address=node-1"}, kubeProxyRejects: true},
		{name: "bad-metrics-bind-address-flag", flags: []string{"--proxy-mode=ipvs", "--metrics-bind-address=0:10249"}, kubeProxyRejects: true},
		{name: "bad-metrics-bind-address", file: head + "mode: ipvs\nmetricsBindAddress: 127.0.0.1:99999\n", kubeProxyRejects: true},
		{name: "bad-detect-local-mode", flags: []string{"--proxy-mode=ipvs", "--detect-local-mode=Magic"}, kubeProxyRejects: true},
		{name: "bridge-mode-without-interface", file: head + "mode: ipvs\ndetectLocalMode: BridgeInterface\n", kubeProxyRejects: true},
		{name: "negative-burst", flags: []string{"--proxy-mode=ipvs", "--kube-api-burst=-1"}, kubeProxyRejects: true},
		{name: "bad-mode-file", file: head + "mode: userspace\n", kubeProxyRejects: true},
		{name: "bad-logging-format", flags: []string{"--proxy-mode=ipvs", "--logging-format=xml"}, kubeProxyRejects: true},
		{name: "empty-hostname-override", flags: []string{"--proxy-mode=ipvs", "--hostname-override= "}, kubeProxyRejects: true},
		{name: "unknown-feature-gate", file: head + "mode: ipvs\nfeatureGates:\n  NoSuchGate: true\n", kubeProxyRejects: true},
		{name: "unknown-feature-gate-flag", flags: []string{"--proxy-mode=ipvs", "--feature-gates=NoSuchGate=true"}, kubeProxyRejects: true},
		{name: "vmodule-with-json-format", file: head + "mode: ipvs\nlogging:\n  format: json\n  vmodule:\n  - filePattern: proxier.go\n    verbosity: 2\n", kubeProxyRejects: true},
		{name: "logging-alpha-option", file: head + "mode: ipvs\nlogging:\n  options:\n    json:\n      infoBufferSize: 1Mi\n", kubeProxyRejects: true},
		{name: "logging-alpha-option-flag", flags: []string{"--proxy-mode=ipvs", "--log-text-info-buffer-size=1Mi"}, kubeProxyRejects: true},
		{name: "unknown-content-type", file: head + "mode: ipvs\nclientConnection:\n  contentType: text/plain\n"},
		{name: "hostname-override-not-a-node-name", flags: []string{"--proxy-mode=ipvs", "--hostname-override=bad_name"}},
		{name: "unknown-scheduler", flags: []string{"--proxy-mode=ipvs", "--ipvs-scheduler=fastest"}},
	}
}

// kubeProxyRejectsSample are the generated cases whose sample kube-proxy v1.34.10 refuses:
// any value but the default of a --log-* output routing flag while its LoggingAlphaOptions
// gate is off.
var kubeProxyRejectsSample = map[string]bool{
	"flag-log-text-split-stream": true, "config-flag-log-text-split-stream": true,
	"flag-log-text-info-buffer-size": true, "config-flag-log-text-info-buffer-size": true,
	"flag-log-json-split-stream": true, "config-flag-log-json-split-stream": true,
	"flag-log-json-info-buffer-size": true, "config-flag-log-json-info-buffer-size": true,
}

// generatedCases walk kipvs's settings table (config.Settings): every kube-proxy flag set
// to its entry's sample value, without --config ("flag-<name>") and next to one
// ("config-flag-<name>"), and every file field set to its sample ("file-<path>"). kipvs's
// own --kipvs-* flags are left out (kube-proxy does not have them), as are the invocation
// flags (--config, --cleanup, ...), which have no sample.
func generatedCases() []testCase {
	const ipvsFile = head + "mode: ipvs\n"
	var out []testCase
	add := func(c testCase) {
		c.kubeProxyRejects = kubeProxyRejectsSample[c.name]
		out = append(out, c)
	}
	for _, s := range config.Settings() {
		if s.Flag != "" && s.Sample != "" && !strings.HasPrefix(s.Flag, "kipvs-") {
			flags := []string{"--proxy-mode=ipvs"}
			if s.Flag != "proxy-mode" {
				flags = append(flags, "--"+s.Flag+"="+s.Sample)
			}
			add(testCase{name: "flag-" + s.Flag, flags: flags})
			add(testCase{name: "config-flag-" + s.Flag, file: ipvsFile, flags: flags[1:]})
		}
		if s.Field != "" && s.ReadsField && s.FileSample != "" {
			file := ipvsFile + s.FileSnippet()
			if s.Field == "mode" {
				file = head + s.FileSnippet()
			}
			add(testCase{name: "file-" + s.Field, file: file})
		}
	}
	return out
}

// result is what one binary did with one case.
type result struct {
	exit   int
	output []byte // the configuration written; nil when none
	stderr string
}

func (r result) accepted() bool { return r.exit == 0 && r.output != nil }

func (r result) String() string {
	if r.accepted() {
		return "accepted"
	}
	// The error: kube-proxy's "command failed" or "Error:" line, kipvs's "kipvs:" line.
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	msg := lines[len(lines)-1]
	for i, l := range lines {
		if strings.Contains(l, `"command failed"`) || strings.HasPrefix(l, "Error:") || strings.HasPrefix(l, "kipvs:") {
			msg = l
			if strings.HasSuffix(l, "err=<") && i+1 < len(lines) { // klog's multi-line value
				msg += " " + strings.TrimSpace(lines[i+1])
				i++
			}
			if i < len(lines)-1 {
				msg += " [...]"
			}
			break
		}
	}
	return fmt.Sprintf("rejected (exit %d): %s", r.exit, msg)
}

// binaries returns the paths of kube-proxy and kipvs from the environment.
func binaries(t *testing.T) (kubeProxy, kipvs string) {
	t.Helper()
	for _, b := range []struct {
		env string
		p   *string
	}{{"KIPVS_KUBE_PROXY_BIN", &kubeProxy}, {"KIPVS_BIN", &kipvs}} {
		*b.p = os.Getenv(b.env)
		if *b.p == "" {
			t.Fatalf("%s is not set: run make test-configdiff (it builds both binaries)", b.env)
		}
		fi, err := os.Stat(*b.p)
		if err != nil {
			t.Fatalf("%s: %v", b.env, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			t.Fatalf("%s=%s is not an executable file", b.env, *b.p)
		}
	}
	return kubeProxy, kipvs
}

// run runs one binary with args and --write-config-to, in dir.
func run(t *testing.T, dir, name, bin string, args []string) result {
	t.Helper()
	out := filepath.Join(dir, name+".yaml")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(slices.Clone(args), "--write-config-to="+out)...)
	cmd.Dir = dir
	// Nothing from the environment (KUBECONFIG, KUBERNETES_SERVICE_HOST, ...) may matter.
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	var r result
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		r.exit = exitErr.ExitCode()
	default:
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	r.stderr = stderr.String()
	b, err := os.ReadFile(out)
	switch {
	case err == nil:
		r.output = b
	case !errors.Is(err, os.ErrNotExist):
		t.Fatal(err)
	}
	if r.exit == 0 && r.output == nil {
		t.Errorf("%s exited 0 without writing %s\n%s", name, out, r.stderr)
	}
	if r.exit != 0 && r.output != nil {
		t.Errorf("%s exited %d but wrote %s\n%s", name, r.exit, out, r.stderr)
	}
	return r
}

// flatten maps every leaf of a decoded YAML document to its path ("ipvs.scheduler",
// "featureGates.Foo"). Lists and empty objects are leaves, compared whole.
func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		out[prefix] = v
		return
	}
	for k, x := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flatten(p, x, out)
	}
}

func fields(t *testing.T, side string, doc []byte) map[string]any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		t.Fatalf("%s wrote a configuration that is not YAML: %v\n%s", side, err, doc)
	}
	out := map[string]any{}
	flatten("", v, out)
	return out
}

// show renders a field value for a message as JSON; a missing field is "(absent)".
func show(v any, ok bool) string {
	if !ok {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// explained records which explanations of differences.yaml were used.
type explained struct {
	mu   sync.Mutex
	used map[oracle.ConfigMatch]bool
}

func (e *explained) explain(t *testing.T, ds oracle.Differences, c, field, what string) {
	t.Helper()
	d := ds.ExplainConfig(c, field)
	if d == nil {
		name := field
		if name == "" {
			name = "the accept/reject decision"
		}
		t.Errorf("%s differs: %s\n(not explained by e2e/oracle/differences.yaml: add a config entry {case: %s, field: %q} only for a deliberate difference)",
			name, what, c, field)
		return
	}
	name := field
	if name == "" {
		name = "accept/reject"
	}
	t.Logf("%s differs, explained by %s: %s", name, d.ID, what)
	e.mu.Lock()
	e.used[oracle.ConfigMatch{Case: c, Field: field}] = true
	e.mu.Unlock()
}

// TestConfigDifferential runs kube-proxy and kipvs over the same configuration files and
// command lines with --write-config-to and compares, for every case, the accept or reject
// decision and every field of the two configurations written.
func TestConfigDifferential(t *testing.T) {
	kubeProxy, kipvs := binaries(t)
	ds, err := oracle.Load()
	if err != nil {
		t.Fatal(err)
	}
	ex := &explained{used: map[oracle.ConfigMatch]bool{}}
	all := append(cases(), generatedCases()...)
	names := map[string]bool{}
	for _, c := range all {
		if names[c.name] {
			t.Fatalf("two cases are named %q", c.name)
		}
		names[c.name] = true
	}
	t.Run("cases", func(t *testing.T) {
		for _, c := range all {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				runCase(t, c, kubeProxy, kipvs, ds, ex)
			})
		}
	})

	// Explanations that matched nothing: stale, or naming a case that does not exist.
	var unused []string
	for _, d := range ds {
		for _, m := range d.Config {
			switch {
			case !names[m.Case]:
				t.Errorf("differences.yaml: %s explains case %q, which is not in the table", d.ID, m.Case)
			case !ex.used[m]:
				unused = append(unused, fmt.Sprintf("%s: {case: %s, field: %q}", d.ID, m.Case, m.Field))
			}
		}
	}
	sort.Strings(unused)
	for _, u := range unused {
		t.Logf("differences.yaml config match used by no difference: %s", u)
	}
}

func runCase(t *testing.T, c testCase, kubeProxy, kipvs string, ds oracle.Differences, ex *explained) {
	dir := t.TempDir()
	var args []string
	if c.file != "" {
		name := c.fileName
		if name == "" {
			name = "config.yaml"
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config="+path)
	}
	args = append(args, c.flags...)
	for _, a := range args {
		// Both would act on this host's kernel.
		if n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); n == "cleanup" || n == "init-only" || n == "init_only" {
			t.Fatalf("case %s: %s must never run here", c.name, a)
		}
	}

	kp := run(t, dir, "kube-proxy", kubeProxy, args)
	kv := run(t, dir, "kipvs", kipvs, append([]string{"run"}, args...))
	if kp.accepted() == c.kubeProxyRejects {
		t.Errorf("kube-proxy %s, the table says it %s; fix the table or the case\n%s",
			kp, map[bool]string{true: "rejects it", false: "accepts it"}[c.kubeProxyRejects], kp.stderr)
	}
	t.Logf("kube-proxy %s", kp)
	t.Logf("kipvs %s", kv)
	if kp.accepted() != kv.accepted() {
		ex.explain(t, ds, c.name, "", fmt.Sprintf("kube-proxy %s; kipvs %s", kp, kv))
		return
	}
	if !kp.accepted() {
		return
	}

	a, b := fields(t, "kube-proxy", kp.output), fields(t, "kipvs", kv.output)
	paths := maps.Clone(a)
	maps.Copy(paths, b)
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		va, oka := a[p]
		vb, okb := b[p]
		if oka == okb && reflect.DeepEqual(va, vb) {
			continue
		}
		ex.explain(t, ds, c.name, p, fmt.Sprintf("kube-proxy %s, kipvs %s", show(va, oka), show(vb, okb)))
	}
	if t.Failed() {
		t.Logf("--- kube-proxy wrote:\n%s--- kipvs wrote:\n%s", kp.output, kv.output)
	}
}
