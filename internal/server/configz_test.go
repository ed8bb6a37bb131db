package server

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// kube-proxy's /configz marshals its internal KubeProxyConfiguration, which has no JSON
// tags: the keys are Go field names, the Linux-only settings sit under "Linux", the sync
// periods of the active mode are top-level, and clusterCIDR is a list.
func TestConfigzShape(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	d := func(v time.Duration) metav1.Duration { return metav1.Duration{Duration: v} }
	lnp := true
	kp := &v1alpha1.KubeProxyConfiguration{
		TypeMeta:         metav1.TypeMeta{Kind: "KubeProxyConfiguration", APIVersion: "kubeproxy.config.k8s.io/v1alpha1"},
		FeatureGates:     map[string]bool{"Foo": true},
		Logging:          logsapi.LoggingConfiguration{Format: "text", Verbosity: 2},
		HostnameOverride: "node-a", BindAddress: "0.0.0.0", HealthzBindAddress: "0.0.0.0:10256", MetricsBindAddress: "127.0.0.1:10249",
		Mode:              "ipvs",
		IPTables:          v1alpha1.KubeProxyIPTablesConfiguration{MasqueradeBit: i32(14), MasqueradeAll: true, LocalhostNodePorts: &lnp, SyncPeriod: d(30 * time.Second), MinSyncPeriod: d(time.Second)},
		IPVS:              v1alpha1.KubeProxyIPVSConfiguration{SyncPeriod: d(45 * time.Second), MinSyncPeriod: d(2 * time.Second), Scheduler: "rr", ExcludeCIDRs: []string{"10.1.0.0/16"}, StrictARP: true},
		NFTables:          v1alpha1.KubeProxyNFTablesConfiguration{MasqueradeBit: i32(14), SyncPeriod: d(30 * time.Second), MinSyncPeriod: d(time.Second)},
		DetectLocalMode:   "ClusterCIDR",
		ClusterCIDR:       "10.244.0.0/16,fd00::/48",
		NodePortAddresses: []string{"primary"},
		OOMScoreAdj:       i32(-999),
		Conntrack:         v1alpha1.KubeProxyConntrackConfiguration{MaxPerCore: i32(32768), Min: i32(131072)},
		ConfigSyncPeriod:  d(15 * time.Minute),
		PortRange:         "ignored",
	}
	kp.ClientConnection.Kubeconfig = "/var/lib/kube-proxy/kubeconfig.conf"
	kp.ClientConnection.ContentType = "application/vnd.kubernetes.protobuf"
	kp.ClientConnection.QPS = 5
	kp.ClientConnection.Burst = 10

	got := do(MetricsHandler(prometheus.NewRegistry(), func() any { return kp }), "GET", "/configz")
	want := `{"kubeproxy.config.k8s.io":{` +
		`"Linux":{"Conntrack":{"MaxPerCore":32768,"Min":131072,"TCPEstablishedTimeout":null,"TCPCloseWaitTimeout":null,"TCPBeLiberal":false,"UDPTimeout":"0s","UDPStreamTimeout":"0s"},"MasqueradeAll":true,"OOMScoreAdj":-999},` +
		`"Windows":{"RunAsService":false},` +
		`"FeatureGates":{"Foo":true},` +
		`"ClientConnection":{"Kubeconfig":"/var/lib/kube-proxy/kubeconfig.conf","AcceptContentTypes":"","ContentType":"application/vnd.kubernetes.protobuf","QPS":5,"Burst":10},` +
		`"Logging":{"format":"text","flushFrequency":0,"verbosity":2,"options":{"text":{"infoBufferSize":"0"},"json":{"infoBufferSize":"0"}}},` +
		`"HostnameOverride":"node-a","BindAddress":"0.0.0.0","HealthzBindAddress":"0.0.0.0:10256","MetricsBindAddress":"127.0.0.1:10249",` +
		`"BindAddressHardFail":false,"EnableProfiling":false,"ShowHiddenMetricsForVersion":"","Mode":"ipvs",` +
		`"IPTables":{"MasqueradeBit":14,"LocalhostNodePorts":true},` +
		`"IPVS":{"Scheduler":"rr","ExcludeCIDRs":["10.1.0.0/16"],"StrictARP":true,"TCPTimeout":"0s","TCPFinTimeout":"0s","UDPTimeout":"0s"},` +
		`"Winkernel":{"NetworkName":"","SourceVip":"","EnableDSR":false,"RootHnsEndpointName":"","ForwardHealthCheckVip":false},` +
		`"NFTables":{"MasqueradeBit":14},` +
		`"DetectLocalMode":"ClusterCIDR","DetectLocal":{"BridgeInterface":"","ClusterCIDRs":["10.244.0.0/16","fd00::/48"],"InterfaceNamePrefix":""},` +
		`"NodePortAddresses":["primary"],"SyncPeriod":"45s","MinSyncPeriod":"2s","ConfigSyncPeriod":"15m0s"}}`
	if got.Code != 200 || got.ContentType != "application/json" {
		t.Errorf("/configz = %d %s", got.Code, got.ContentType)
	}
	if diff := cmp.Diff(indent(t, want), indent(t, got.Body)); diff != "" {
		t.Errorf("/configz (-want +got):\n%s", diff)
	}
	if got.Body != want {
		t.Errorf("/configz is not byte for byte kube-proxy's (field order):\n%s", got.Body)
	}
}

func indent(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return b.String()
}
