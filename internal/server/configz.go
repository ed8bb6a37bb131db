package server

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// internalConfig has the fields, in order, of kube-proxy's internal KubeProxyConfiguration
// (k8s.io/kubernetes/pkg/proxy/apis/config), the value kube-proxy's /configz marshals.
// That type has no JSON tags, so the keys are the Go field names; its TypeMeta is empty
// (a decoded internal object carries no kind), so there is no kind or apiVersion.
type internalConfig struct {
	Linux struct {
		Conntrack struct {
			MaxPerCore            *int32
			Min                   *int32
			TCPEstablishedTimeout *metav1.Duration
			TCPCloseWaitTimeout   *metav1.Duration
			TCPBeLiberal          bool
			UDPTimeout            metav1.Duration
			UDPStreamTimeout      metav1.Duration
		}
		MasqueradeAll bool
		OOMScoreAdj   *int32
	}
	Windows struct {
		RunAsService bool
	}
	FeatureGates     map[string]bool
	ClientConnection struct {
		Kubeconfig         string
		AcceptContentTypes string
		ContentType        string
		QPS                float32
		Burst              int32
	}
	Logging                     logsapi.LoggingConfiguration
	HostnameOverride            string
	BindAddress                 string
	HealthzBindAddress          string
	MetricsBindAddress          string
	BindAddressHardFail         bool
	EnableProfiling             bool
	ShowHiddenMetricsForVersion string
	Mode                        string
	IPTables                    struct {
		MasqueradeBit      *int32
		LocalhostNodePorts *bool
	}
	IPVS struct {
		Scheduler     string
		ExcludeCIDRs  []string
		StrictARP     bool
		TCPTimeout    metav1.Duration
		TCPFinTimeout metav1.Duration
		UDPTimeout    metav1.Duration
	}
	Winkernel struct {
		NetworkName           string
		SourceVip             string
		EnableDSR             bool
		RootHnsEndpointName   string
		ForwardHealthCheckVip bool
	}
	NFTables struct {
		MasqueradeBit *int32
	}
	DetectLocalMode string
	DetectLocal     struct {
		BridgeInterface     string
		ClusterCIDRs        []string
		InterfaceNamePrefix string
	}
	NodePortAddresses []string
	SyncPeriod        metav1.Duration
	MinSyncPeriod     metav1.Duration
	ConfigSyncPeriod  metav1.Duration
}

// configzValue is what /configz serves for the configuration in: kube-proxy's internal
// shape for a v1alpha1 KubeProxyConfiguration, converted as kube-proxy converts it (the
// Linux settings move under Linux, the active mode's sync periods become top-level,
// clusterCIDR is split into DetectLocal.ClusterCIDRs, portRange is dropped); any other
// value as it is.
func configzValue(in any) any {
	kp, ok := in.(*v1alpha1.KubeProxyConfiguration)
	if !ok || kp == nil {
		return in
	}
	var out internalConfig
	c := kp.Conntrack
	out.Linux.Conntrack.MaxPerCore, out.Linux.Conntrack.Min = c.MaxPerCore, c.Min
	out.Linux.Conntrack.TCPEstablishedTimeout, out.Linux.Conntrack.TCPCloseWaitTimeout = c.TCPEstablishedTimeout, c.TCPCloseWaitTimeout
	out.Linux.Conntrack.TCPBeLiberal = c.TCPBeLiberal
	out.Linux.Conntrack.UDPTimeout, out.Linux.Conntrack.UDPStreamTimeout = c.UDPTimeout, c.UDPStreamTimeout
	out.Linux.OOMScoreAdj = kp.OOMScoreAdj
	out.Windows.RunAsService = kp.WindowsRunAsService
	out.FeatureGates = kp.FeatureGates
	cc := kp.ClientConnection
	out.ClientConnection.Kubeconfig, out.ClientConnection.AcceptContentTypes = cc.Kubeconfig, cc.AcceptContentTypes
	out.ClientConnection.ContentType, out.ClientConnection.QPS, out.ClientConnection.Burst = cc.ContentType, cc.QPS, cc.Burst
	out.Logging = kp.Logging
	out.HostnameOverride, out.BindAddress = kp.HostnameOverride, kp.BindAddress
	out.HealthzBindAddress, out.MetricsBindAddress = kp.HealthzBindAddress, kp.MetricsBindAddress
	out.BindAddressHardFail, out.EnableProfiling = kp.BindAddressHardFail, kp.EnableProfiling
	out.ShowHiddenMetricsForVersion = kp.ShowHiddenMetricsForVersion
	out.Mode = string(kp.Mode)
	out.IPTables.MasqueradeBit, out.IPTables.LocalhostNodePorts = kp.IPTables.MasqueradeBit, kp.IPTables.LocalhostNodePorts
	out.IPVS.Scheduler, out.IPVS.ExcludeCIDRs, out.IPVS.StrictARP = kp.IPVS.Scheduler, kp.IPVS.ExcludeCIDRs, kp.IPVS.StrictARP
	out.IPVS.TCPTimeout, out.IPVS.TCPFinTimeout, out.IPVS.UDPTimeout = kp.IPVS.TCPTimeout, kp.IPVS.TCPFinTimeout, kp.IPVS.UDPTimeout
	w := kp.Winkernel
	out.Winkernel.NetworkName, out.Winkernel.SourceVip, out.Winkernel.EnableDSR = w.NetworkName, w.SourceVip, w.EnableDSR
	out.Winkernel.RootHnsEndpointName, out.Winkernel.ForwardHealthCheckVip = w.RootHnsEndpointName, w.ForwardHealthCheckVip
	out.NFTables.MasqueradeBit = kp.NFTables.MasqueradeBit
	out.DetectLocalMode = string(kp.DetectLocalMode)
	out.DetectLocal.BridgeInterface, out.DetectLocal.InterfaceNamePrefix = kp.DetectLocal.BridgeInterface, kp.DetectLocal.InterfaceNamePrefix
	if kp.ClusterCIDR != "" {
		out.DetectLocal.ClusterCIDRs = strings.Split(kp.ClusterCIDR, ",")
	}
	out.NodePortAddresses = kp.NodePortAddresses
	out.ConfigSyncPeriod = kp.ConfigSyncPeriod
	switch kp.Mode {
	case v1alpha1.ProxyMode("ipvs"):
		out.SyncPeriod, out.MinSyncPeriod = kp.IPVS.SyncPeriod, kp.IPVS.MinSyncPeriod
		out.Linux.MasqueradeAll = kp.IPTables.MasqueradeAll
	case v1alpha1.ProxyMode("nftables"):
		out.SyncPeriod, out.MinSyncPeriod = kp.NFTables.SyncPeriod, kp.NFTables.MinSyncPeriod
		out.Linux.MasqueradeAll = kp.NFTables.MasqueradeAll
	default:
		out.SyncPeriod, out.MinSyncPeriod = kp.IPTables.SyncPeriod, kp.IPTables.MinSyncPeriod
		out.Linux.MasqueradeAll = kp.IPTables.MasqueradeAll
	}
	return &out
}
