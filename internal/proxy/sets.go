package proxy

import (
	"cmp"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
)

// Set is one of the sets of addresses and ports the packet filter matches traffic against
// (kube-proxy's IPVS mode keeps them as ipsets; the dataplane, internal/dataplane, decides
// how a backend names, types and creates them). Which fields of a Member a set uses is
// listed on Member.
//
// The constants are declared in the order of upstream kube-proxy's names for the sets
// (KUBE-CLUSTER-IP, ...), so members sort as those names do.
type Set uint8

const (
	SetClusterIP             Set = iota // cluster IP, protocol, port: masquerade, and the VIP is kipvs's
	SetExternalIP                       // external IP, protocol, port (externalTrafficPolicy Cluster)
	SetExternalIPLocal                  // external IP, protocol, port (externalTrafficPolicy Local)
	SetHealthCheckNodePort              // port: a health check node port to accept
	SetIPVSIPs                          // address: every address bound on kube-ipvs0
	SetLoadBalancer                     // LoadBalancer ingress IP, protocol, port
	SetLoadBalancerFW                   // LoadBalancer ingress IP, protocol, port that has source ranges
	SetLoadBalancerLocal                // LoadBalancer ingress IP, protocol, port (externalTrafficPolicy Local)
	SetLoadBalancerSourceNet            // LoadBalancer ingress IP, protocol, port, allowed source range
	SetLoadBalancerSourceIP             // LoadBalancer ingress IP, protocol, port, the ingress IP as source (the node itself)
	SetLoopBack                         // endpoint, protocol, port, the endpoint as source (hairpin)
	SetNodePortLocalSCTP                // node address, SCTP, node port (externalTrafficPolicy Local)
	SetNodePortLocalTCP                 // TCP node port (externalTrafficPolicy Local)
	SetNodePortLocalUDP                 // UDP node port (externalTrafficPolicy Local)
	SetNodePortSCTP                     // node address, SCTP, node port
	SetNodePortTCP                      // TCP node port
	SetNodePortUDP                      // UDP node port
	numSets
)

// claimed reports whether the members of s belong to one virtual server (its address,
// protocol and port): only the claim that wins the virtual server puts them in (Desired).
func (s Set) claimed() bool {
	switch s {
	case SetClusterIP, SetExternalIP, SetExternalIPLocal, SetLoadBalancer, SetLoadBalancerFW, SetLoadBalancerLocal,
		SetLoadBalancerSourceNet, SetLoadBalancerSourceIP:
		return true
	}
	return false
}

// claimKind is the kind of virtual server whose claim puts members in claimed set s.
func (s Set) claimKind() VSKind {
	switch s {
	case SetExternalIP, SetExternalIPLocal:
		return kindExternalIP
	case SetLoadBalancer, SetLoadBalancerFW, SetLoadBalancerLocal, SetLoadBalancerSourceNet, SetLoadBalancerSourceIP:
		return kindLoadBalancer
	}
	return kindClusterIP
}

// AllSets returns every set, in the order upstream kube-proxy creates them.
func AllSets() []Set {
	return []Set{SetLoopBack, SetClusterIP, SetExternalIP, SetExternalIPLocal, SetLoadBalancer, SetLoadBalancerLocal,
		SetLoadBalancerFW, SetLoadBalancerSourceIP, SetLoadBalancerSourceNet, SetNodePortTCP, SetNodePortLocalTCP,
		SetNodePortUDP, SetNodePortLocalUDP, SetNodePortSCTP, SetNodePortLocalSCTP, SetHealthCheckNodePort, SetIPVSIPs}
}

// String names the set by its kind ("cluster-ip", "node-port-tcp"), for plans, logs and
// messages. The kernel's names are a backend's business (internal/dataplane/iptables
// names them as upstream kube-proxy does: KUBE-CLUSTER-IP, KUBE-6-CLUSTER-IP).
func (s Set) String() string {
	if s >= numSets {
		return "set-" + strconv.Itoa(int(s))
	}
	return [...]string{
		"cluster-ip", "external-ip", "external-ip-local", "health-check-node-port", "ipvs-ips",
		"load-balancer", "load-balancer-fw", "load-balancer-local", "load-balancer-source-cidr",
		"load-balancer-source-ip", "loop-back", "node-port-local-sctp", "node-port-local-tcp",
		"node-port-local-udp", "node-port-sctp", "node-port-tcp", "node-port-udp",
	}[s]
}

// Member is one member of a set, as typed values. Which fields it uses depends on the set
// (see the Set constants); the others are zero:
//
//	Addr                        SetIPVSIPs
//	Port                        SetNodePort(Local)TCP, SetNodePort(Local)UDP, SetHealthCheckNodePort
//	Addr, Proto, Port           the other VIP, ingress and SCTP node port sets
//	Addr, Proto, Port, Source   SetLoopBack, SetLoadBalancerSourceIP (a single address, full
//	                            length), SetLoadBalancerSourceNet (a range, masked)
//
// Addr and Port are matched as the packet's destination, Source as its source. Member is
// comparable: equal members are the same kernel object.
type Member struct {
	Set    Set
	Proto  inet.Protocol
	Port   uint16
	Addr   netip.Addr
	Source netip.Prefix
}

// HostSource returns a as a Source of a single address.
func HostSource(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// String renders the member for logs, plans and tests, in the notation kube-proxy's ipset
// members are written in ("10.96.0.1,tcp:80", "30080"). Nothing parses it.
func (m Member) String() string {
	var b strings.Builder
	if m.Addr.IsValid() {
		b.WriteString(m.Addr.String())
	}
	if m.Proto != 0 {
		b.WriteString("," + m.Proto.String() + ":" + strconv.Itoa(int(m.Port)))
	} else if !m.Addr.IsValid() {
		b.WriteString(strconv.Itoa(int(m.Port)))
	}
	if m.Source.IsValid() {
		b.WriteString(",")
		if m.Source.IsSingleIP() {
			b.WriteString(m.Source.Addr().String())
		} else {
			b.WriteString(m.Source.String())
		}
	}
	return b.String()
}

// Compare orders members by set, then address, protocol, port and source.
func (m Member) Compare(o Member) int {
	if c := cmp.Compare(m.Set, o.Set); c != 0 {
		return c
	}
	if c := m.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if c := cmp.Compare(m.Proto, o.Proto); c != 0 {
		return c
	}
	if c := cmp.Compare(m.Port, o.Port); c != 0 {
		return c
	}
	if c := m.Source.Addr().Compare(o.Source.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(m.Source.Bits(), o.Source.Bits())
}

// allowsEverySource reports whether the source ranges of one family hold a range of length 0
// (0.0.0.0/0 or ::/0). Such a range means "allow every source": the LoadBalancer address then
// gets no source filtering in that family at all (no KUBE-LOAD-BALANCER-FW member, no
// -SOURCE-CIDR or -SOURCE-IP members, no KUBE-IPVS-OUT-FILTER rule), as upstream's iptables
// and nftables modes behave. An ipset of nets cannot hold a /0 (the kernel takes prefix
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

// Comment is upstream kube-proxy's comment for the ipset of s (the text of its IPVS mode's
// rules matching it): what the members are for. Both filter backends write it.
func (s Set) Comment() string {
	switch s {
	case SetLoopBack:
		return "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"
	case SetClusterIP:
		return "Kubernetes service cluster ip + port for masquerade purpose"
	case SetExternalIP:
		return "Kubernetes service external ip + port for masquerade and filter purpose"
	case SetExternalIPLocal:
		return "Kubernetes service external ip + port with externalTrafficPolicy=local"
	case SetLoadBalancer:
		return "Kubernetes service lb portal"
	case SetLoadBalancerLocal:
		return "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"
	case SetLoadBalancerFW:
		return "Kubernetes service load balancer ip + port for load balancer with sourceRange"
	case SetLoadBalancerSourceIP:
		return "Kubernetes service load balancer ip + port + source IP for packet filter purpose"
	case SetLoadBalancerSourceNet:
		return "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"
	case SetNodePortTCP:
		return "Kubernetes nodeport TCP port for masquerade purpose"
	case SetNodePortLocalTCP:
		return "Kubernetes nodeport TCP port with externalTrafficPolicy=local"
	case SetNodePortUDP:
		return "Kubernetes nodeport UDP port for masquerade purpose"
	case SetNodePortLocalUDP:
		return "Kubernetes nodeport UDP port with externalTrafficPolicy=local"
	case SetNodePortSCTP:
		return "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"
	case SetNodePortLocalSCTP:
		return "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"
	case SetHealthCheckNodePort:
		return "Kubernetes health check node port"
	case SetIPVSIPs:
		return "IPVS service ip"
	}
	return s.String()
}
