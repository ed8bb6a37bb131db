package proxy

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/inet"
)

// VSKey identifies a virtual server.
type VSKey struct {
	Protocol inet.Protocol
	Address  netip.Addr
	Port     uint16
}

func (k VSKey) String() string {
	return fmt.Sprintf("%s/%s", k.Protocol, netip.AddrPortFrom(k.Address, k.Port))
}

// Compare orders keys by address, port, protocol.
func (k VSKey) Compare(o VSKey) int {
	if c := k.Address.Compare(o.Address); c != 0 {
		return c
	}
	if k.Port != o.Port {
		if k.Port < o.Port {
			return -1
		}
		return 1
	}
	switch {
	case k.Protocol < o.Protocol:
		return -1
	case k.Protocol > o.Protocol:
		return 1
	}
	return 0
}

// ServicePortName names one port of one Service, as kube-proxy logs and labels it.
type ServicePortName struct {
	types.NamespacedName
	Port string
}

func (n ServicePortName) String() string {
	if n.Port == "" {
		return n.NamespacedName.String()
	}
	return n.NamespacedName.String() + ":" + n.Port
}

// VSKind says why a virtual server exists.
type VSKind uint8

const (
	kindClusterIP VSKind = iota
	kindExternalIP
	kindLoadBalancer
	kindNodePort
)

func (k VSKind) String() string {
	return [...]string{"ClusterIP", "ExternalIP", "LoadBalancer", "NodePort"}[k]
}

// rank orders the kinds of the claims of one virtual server: a cluster IP (0) wins over
// every other kind (1), which rank equal.
func (k VSKind) rank() int {
	if k == kindClusterIP {
		return 0
	}
	return 1
}

// field names the Service field a claim of this kind comes from.
func (k VSKind) field() string {
	return [...]string{"spec.clusterIPs", "spec.externalIPs", "status.loadBalancer.ingress", "spec.ports.nodePort"}[k]
}

// VirtualServer is one desired IPVS virtual server (NAT) with its real servers.
type VirtualServer struct {
	VSKey
	Scheduler string
	// SchedFlags are the scheduler flags by ipvsadm name (sh-fallback, sh-port, mh-fallback,
	// mh-port), sorted.
	SchedFlags []string
	// Persistent with Timeout seconds implements sessionAffinity ClientIP.
	Persistent bool
	Timeout    uint32
	// Destinations are sorted by address, then port; all use masquerading (NAT).
	Destinations []Destination
	Owner        ServicePortName
	Kind         VSKind
}

// Destination is one real server.
type Destination struct {
	Address netip.Addr
	Port    uint16
	Weight  int
}

// AddrPort returns the real server's address and port.
func (d Destination) AddrPort() netip.AddrPort { return netip.AddrPortFrom(d.Address, d.Port) }

// Equal reports whether two virtual servers would program the same kernel state. Owner and
// Kind are not kernel state (Desired.Update compares Owner itself); every other field is
// compared, and TestVirtualServerEqualChecksEveryField fails on a field added but not here.
func (v *VirtualServer) Equal(o *VirtualServer) bool {
	if v.VSKey != o.VSKey || v.Scheduler != o.Scheduler || v.Persistent != o.Persistent ||
		v.Timeout != o.Timeout || len(v.SchedFlags) != len(o.SchedFlags) || len(v.Destinations) != len(o.Destinations) {
		return false
	}
	for i := range v.SchedFlags {
		if v.SchedFlags[i] != o.SchedFlags[i] {
			return false
		}
	}
	for i := range v.Destinations {
		if v.Destinations[i] != o.Destinations[i] {
			return false
		}
	}
	return true
}
