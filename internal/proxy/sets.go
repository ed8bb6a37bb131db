package proxy

import (
	"net/netip"

	"github.com/kipvs/kipvs/internal/inet"
)

// SetType is an ipset type name as the kernel and the ipset tool spell it.
type SetType string

const (
	HashIP        SetType = "hash:ip"
	HashIPPort    SetType = "hash:ip,port"
	HashIPPortIP  SetType = "hash:ip,port,ip"
	HashIPPortNet SetType = "hash:ip,port,net"
	HashNet       SetType = "hash:net"
	BitmapPort    SetType = "bitmap:port"
)

// Base names of the ipsets, as upstream kube-proxy names them for IPv4. IPv6 names carry the
// prefix KUBE-6- instead of KUBE- (see SetName).
const (
	SetLoopBack              = "KUBE-LOOP-BACK"
	SetClusterIP             = "KUBE-CLUSTER-IP"
	SetExternalIP            = "KUBE-EXTERNAL-IP"
	SetExternalIPLocal       = "KUBE-EXTERNAL-IP-LOCAL"
	SetLoadBalancer          = "KUBE-LOAD-BALANCER"
	SetLoadBalancerLocal     = "KUBE-LOAD-BALANCER-LOCAL"
	SetLoadBalancerFW        = "KUBE-LOAD-BALANCER-FW"
	SetLoadBalancerSourceIP  = "KUBE-LOAD-BALANCER-SOURCE-IP"
	SetLoadBalancerSourceNet = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	SetNodePortTCP           = "KUBE-NODE-PORT-TCP"
	SetNodePortLocalTCP      = "KUBE-NODE-PORT-LOCAL-TCP"
	SetNodePortUDP           = "KUBE-NODE-PORT-UDP"
	SetNodePortLocalUDP      = "KUBE-NODE-PORT-LOCAL-UDP"
	SetNodePortSCTP          = "KUBE-NODE-PORT-SCTP-HASH"
	SetNodePortLocalSCTP     = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	SetHealthCheckNodePort   = "KUBE-HEALTH-CHECK-NODE-PORT"
	SetIPVSIPs               = "KUBE-IPVS-IPS"
)

// SetSpec declares one ipset kipvs owns.
type SetSpec struct {
	Name    string // family-specific name
	Base    string // IPv4 name, as in the constants above
	Type    SetType
	Family  inet.Family
	Comment string
}

var setTable = []struct {
	base, comment string
	typ           SetType
}{
	{SetLoopBack, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose", HashIPPortIP},
	{SetClusterIP, "Kubernetes service cluster ip + port for masquerade purpose", HashIPPort},
	{SetExternalIP, "Kubernetes service external ip + port for masquerade and filter purpose", HashIPPort},
	{SetExternalIPLocal, "Kubernetes service external ip + port with externalTrafficPolicy=local", HashIPPort},
	{SetLoadBalancer, "Kubernetes service lb portal", HashIPPort},
	{SetLoadBalancerLocal, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local", HashIPPort},
	{SetLoadBalancerFW, "Kubernetes service load balancer ip + port for load balancer with sourceRange", HashIPPort},
	{SetLoadBalancerSourceIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose", HashIPPortIP},
	{SetLoadBalancerSourceNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose", HashIPPortNet},
	{SetNodePortTCP, "Kubernetes nodeport TCP port for masquerade purpose", BitmapPort},
	{SetNodePortLocalTCP, "Kubernetes nodeport TCP port with externalTrafficPolicy=local", BitmapPort},
	{SetNodePortUDP, "Kubernetes nodeport UDP port for masquerade purpose", BitmapPort},
	{SetNodePortLocalUDP, "Kubernetes nodeport UDP port with externalTrafficPolicy=local", BitmapPort},
	{SetNodePortSCTP, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'", HashIPPort},
	{SetNodePortLocalSCTP, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'", HashIPPort},
	{SetHealthCheckNodePort, "Kubernetes health check node port", BitmapPort},
	{SetIPVSIPs, "IPVS service ip", HashIP},
}

// maxSetNameLen is the longest ipset name the kernel accepts (IPSET_MAXNAMELEN - 1).
const maxSetNameLen = 31

// SetName returns the family-specific name of a base (IPv4) set name: IPv6 sets are named
// KUBE-6-... and truncated to 31 characters, as upstream does.
func SetName(f inet.Family, base string) string {
	if f != inet.IPv6 {
		return base
	}
	name := "KUBE-6-" + base[len("KUBE-"):]
	if len(name) > maxSetNameLen {
		name = name[:maxSetNameLen]
	}
	return name
}

// Sets returns every ipset kipvs owns for a family, in a fixed order. All of them exist
// while kipvs runs, empty or not (like upstream); rules reference only the non-empty ones.
func Sets(f inet.Family) []SetSpec {
	out := make([]SetSpec, 0, len(setTable))
	for _, s := range setTable {
		out = append(out, SetSpec{Name: SetName(f, s.base), Base: s.base, Type: s.typ, Family: f, Comment: s.comment})
	}
	return out
}

// netEntry renders a net as the last part of a hash:ip,port,net member, in the form the
// kernel lists it back (and ipset.Entry.String prints it): a host net (/32, /128) as its bare
// address. Desired members are compared with listed ones as text, so "…,198.51.100.7/32"
// would never match the listed "…,198.51.100.7" and every full sync would delete and re-add it.
func netEntry(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// allowsEverySource reports whether the source ranges of one family hold a range of length 0
// (0.0.0.0/0 or ::/0). Such a range means "allow every source": the LoadBalancer address then
// gets no source filtering in that family at all (no KUBE-LOAD-BALANCER-FW member, no
// -SOURCE-CIDR or -SOURCE-IP members, no KUBE-IPVS-OUT-FILTER rule), as upstream's iptables
// and nftables modes behave. A hash:ip,port,net set cannot hold a /0 (the kernel takes prefix
// lengths from 1), so upstream's IPVS mode fails to add that member and ends up dropping
// every source instead; kipvs does not copy that.
func allowsEverySource(ranges []netip.Prefix) bool {
	for _, p := range ranges {
		if p.Bits() == 0 {
			return true
		}
	}
	return false
}
