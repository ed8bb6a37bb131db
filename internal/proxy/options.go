package proxy

import (
	"net/netip"
	"reflect"
	"slices"

	"github.com/kipvs/kipvs/internal/inet"
)

// LocalMode is how the proxier tells traffic from local pods apart from other traffic
// (kube-proxy's --detect-local-mode); the zero LocalMode is none.
type LocalMode string

const (
	LocalClusterCIDR         LocalMode = "ClusterCIDR"
	LocalNodeCIDR            LocalMode = "NodeCIDR"
	LocalBridgeInterface     LocalMode = "BridgeInterface"
	LocalInterfaceNamePrefix LocalMode = "InterfaceNamePrefix"
)

// LocalDetector is the resolved local-traffic detector for one family: for the CIDR modes
// the pod CIDRs of this family (none means no detector), for the interface modes the name.
type LocalDetector struct {
	Mode      LocalMode
	CIDRs     []netip.Prefix
	Interface string
}

// Active reports whether the detector can tell pod traffic apart at all.
func (d LocalDetector) Active() bool {
	switch d.Mode {
	case LocalClusterCIDR, LocalNodeCIDR:
		return len(d.CIDRs) > 0
	case LocalBridgeInterface, LocalInterfaceNamePrefix:
		return d.Interface != ""
	}
	return false
}

// Options is everything outside the Service objects that shapes the desired state of one
// family. A change of Options means a full rebuild.
type Options struct {
	Family inet.Family
	// Scheduler is the global IPVS scheduler (--ipvs-scheduler; default rr).
	Scheduler string
	// NodeName is this node's name, used to find local endpoints.
	NodeName string
	// NodeLabels are this node's labels (topology zone).
	NodeLabels map[string]string
	// NodePortAddresses are this family's node addresses NodePort virtual servers listen on
	// (the kernel's addresses filtered by --nodeport-addresses; never kube-ipvs0's).
	NodePortAddresses []netip.Addr
	// NodeIP is this family's node IP as kube-proxy picks it: --bind-address when it is of
	// this family, else the Node's primary address of this family, else the loopback
	// address. A load balancer source range containing it lets the node itself reach the LB
	// IP (the -SOURCE-IP set), as kube-proxy's allowFromNode.
	NodeIP netip.Addr
	// LocalAddresses are addresses already assigned to links other than kube-ipvs0; a
	// LoadBalancer ingress IP among them is served but not bound again.
	LocalAddresses []netip.Addr

	// IgnoreNodeHints is --feature-gates=PreferSameTrafficDistribution=false: the node hints
	// of EndpointSlices (forNodes) are not followed, only their zone hints, as kube-proxy
	// with the gate off.
	IgnoreNodeHints bool

	MasqueradeAll bool
	// MasqueradeBit is the fwmark bit marking packets for SNAT (default 14 -> 0x4000).
	MasqueradeBit int
	// MasqueradeRandomFully fully randomizes the source ports of SNAT (KUBE-POSTROUTING's
	// MASQUERADE rule), as upstream does whenever the node's tools support it.
	MasqueradeRandomFully bool
	LocalDetector         LocalDetector
	// StrictARP only affects sysctls; it is here so a change triggers a rebuild.
	StrictARP bool
	// ServiceCIDRs are the cluster's Service (cluster IP) ranges: the ServiceCIDR objects,
	// --kipvs-service-cidr, and default/kubernetes's cluster IPs as single addresses. An
	// external or load balancer IP inside one is refused (only a Service's own cluster IP may
	// be a VIP there).
	ServiceCIDRs []netip.Prefix
	// NodeStatusAddresses are the addresses of this family in this node's Node status
	// (InternalIP, ExternalIP), on a link of the node or not (a cloud's NATed public
	// address); no external or load balancer IP may be one.
	NodeStatusAddresses []netip.Addr
	// APIServerAddresses are the apiserver's addresses: the host of the kubeconfig's server
	// URL (an IP, or the addresses its name resolved to at start) and the endpoints of
	// default/kubernetes (the apiservers' own addresses, followed as they move). An external
	// or load balancer IP equal to one is refused, whatever the allow lists say.
	APIServerAddresses []netip.Addr
	// PodCIDRs are this family's pod ranges: the cluster CIDRs (--cluster-cidr, but one
	// overlapping the Service CIDR) and this node's Node spec.podCIDRs. An external or load
	// balancer IP inside one is a pod's address and is refused unless the allow list of its
	// kind contains it.
	PodCIDRs []netip.Prefix
	// NodeLinkPrefixes are this family's prefixes on the node's links other than kube-ipvs0
	// (the routes they reach directly: the node's gateway and neighbours live there) and the
	// node's gateways as single addresses. An external or load balancer IP inside one is
	// refused unless the allow list of its kind contains it.
	NodeLinkPrefixes []netip.Prefix
	// ExternalIPCIDRs and LoadBalancerIPCIDRs, when not empty, are the only ranges external
	// IPs and load balancer IPs may come from, in both families (--kipvs-external-ip-cidrs,
	// --kipvs-load-balancer-ip-cidrs); empty allows every address, as kube-proxy does.
	ExternalIPCIDRs     []netip.Prefix
	LoadBalancerIPCIDRs []netip.Prefix
	// UnavailableSchedulers are scheduler names whose kernel module failed to load (found by
	// probing); a Service asking for one gets the global scheduler and a Problem. Sorted.
	UnavailableSchedulers []string
	// MaxServiceSetMembers refuses a Service with more set members than this (0: no
	// limit; --kipvs-max-service-set-members). MaxSetMembers is the limit of one set's
	// size, all Services together, that the daemon gives Desired.SetMemberLimit
	// (--kipvs-max-set-members). See capacity.go.
	MaxServiceSetMembers int
	MaxSetMembers        int
	// MaxServiceVirtualServers and MaxServiceRealServers refuse a Service with more virtual
	// servers or real servers than this (0: no limit; --kipvs-max-service-virtual-servers,
	// --kipvs-max-service-real-servers). MaxRealServers is the limit of the node's real
	// servers, all Services together, that the daemon gives Desired.RealServerLimit
	// (--kipvs-max-real-servers).
	MaxServiceVirtualServers int
	MaxServiceRealServers    int
	MaxRealServers           int
}

// Equal reports whether two Options would build the same state. Every field counts, so a
// field added to Options is compared without being listed here; an empty list or map equals
// a missing one.
func (o Options) Equal(p Options) bool { return reflect.DeepEqual(o.canonical(), p.canonical()) }

// canonical returns o with empty lists and maps made nil. (A list or map field added to
// Options and not listed here only makes empty and missing differ: a needless rebuild,
// never a missed one.)
func (o Options) canonical() Options {
	o.NodeLabels = nilIfEmptyMap(o.NodeLabels)
	o.NodePortAddresses = nilIfEmpty(o.NodePortAddresses)
	o.LocalAddresses = nilIfEmpty(o.LocalAddresses)
	o.LocalDetector.CIDRs = nilIfEmpty(o.LocalDetector.CIDRs)
	o.UnavailableSchedulers = nilIfEmpty(o.UnavailableSchedulers)
	o.ServiceCIDRs = nilIfEmpty(o.ServiceCIDRs)
	o.APIServerAddresses = nilIfEmpty(o.APIServerAddresses)
	o.NodeStatusAddresses = nilIfEmpty(o.NodeStatusAddresses)
	o.PodCIDRs = nilIfEmpty(o.PodCIDRs)
	o.NodeLinkPrefixes = nilIfEmpty(o.NodeLinkPrefixes)
	o.ExternalIPCIDRs = nilIfEmpty(o.ExternalIPCIDRs)
	o.LoadBalancerIPCIDRs = nilIfEmpty(o.LoadBalancerIPCIDRs)
	return o
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

func nilIfEmptyMap[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	return m
}

func (o Options) masqMark() uint32 { return 1 << uint(o.MasqueradeBit) }

func (o Options) isLocalAddress(a netip.Addr) bool { return slices.Contains(o.LocalAddresses, a) }
