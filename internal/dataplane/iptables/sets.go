package iptables

import (
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/proxy"
)

// maxSetNameLen is the longest ipset name the kernel accepts (IPSET_MAXNAMELEN - 1).
const maxSetNameLen = ipset.MaxNameLen

// SetName returns the ipset name of set s in family f, as upstream names it: KUBE-... for
// IPv4; for IPv6 KUBE-6-... truncated to 31 characters.
func SetName(f inet.Family, s proxy.Set) string {
	base := ipv4SetName(s)
	if f != inet.IPv6 {
		return base
	}
	name := "KUBE-6-" + base[len("KUBE-"):]
	if len(name) > maxSetNameLen {
		name = name[:maxSetNameLen]
	}
	return name
}

// ipv4SetName is upstream kube-proxy's name for set s (its IPv4 ipset).
func ipv4SetName(s proxy.Set) string {
	switch s {
	case proxy.SetClusterIP:
		return "KUBE-CLUSTER-IP"
	case proxy.SetExternalIP:
		return "KUBE-EXTERNAL-IP"
	case proxy.SetExternalIPLocal:
		return "KUBE-EXTERNAL-IP-LOCAL"
	case proxy.SetHealthCheckNodePort:
		return "KUBE-HEALTH-CHECK-NODE-PORT"
	case proxy.SetIPVSIPs:
		return "KUBE-IPVS-IPS"
	case proxy.SetLoadBalancer:
		return "KUBE-LOAD-BALANCER"
	case proxy.SetLoadBalancerFW:
		return "KUBE-LOAD-BALANCER-FW"
	case proxy.SetLoadBalancerLocal:
		return "KUBE-LOAD-BALANCER-LOCAL"
	case proxy.SetLoadBalancerSourceNet:
		return "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	case proxy.SetLoadBalancerSourceIP:
		return "KUBE-LOAD-BALANCER-SOURCE-IP"
	case proxy.SetLoopBack:
		return "KUBE-LOOP-BACK"
	case proxy.SetNodePortLocalSCTP:
		return "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	case proxy.SetNodePortLocalTCP:
		return "KUBE-NODE-PORT-LOCAL-TCP"
	case proxy.SetNodePortLocalUDP:
		return "KUBE-NODE-PORT-LOCAL-UDP"
	case proxy.SetNodePortSCTP:
		return "KUBE-NODE-PORT-SCTP-HASH"
	case proxy.SetNodePortTCP:
		return "KUBE-NODE-PORT-TCP"
	case proxy.SetNodePortUDP:
		return "KUBE-NODE-PORT-UDP"
	}
	return "KUBE-" + s.String()
}

// setType is the ipset type upstream gives set s.
func setType(s proxy.Set) ipset.Type {
	switch s {
	case proxy.SetLoopBack, proxy.SetLoadBalancerSourceIP:
		return ipset.HashIPPortIP
	case proxy.SetLoadBalancerSourceNet:
		return ipset.HashIPPortNet
	case proxy.SetNodePortTCP, proxy.SetNodePortLocalTCP, proxy.SetNodePortUDP, proxy.SetNodePortLocalUDP, proxy.SetHealthCheckNodePort:
		return ipset.BitmapPort
	case proxy.SetIPVSIPs:
		return ipset.HashIP
	}
	return ipset.HashIPPort
}

// IPSet is the adapter's declaration of set s in family f, as upstream creates it.
func IPSet(f inet.Family, s proxy.Set) ipset.Set {
	set := ipset.Set{Name: SetName(f, s), Type: setType(s)}
	if set.Type != ipset.BitmapPort {
		set.Family = f
	}
	return set
}

// Entry renders a member as the adapter's entry of its set: the source is the second
// address of a hash:ip,port,ip set, the net of a hash:ip,port,net set.
func Entry(m proxy.Member) ipset.Entry {
	e := ipset.Entry{IP: m.Addr, Protocol: m.Proto, Port: m.Port}
	if m.Source.IsValid() {
		if setType(m.Set) == ipset.HashIPPortIP {
			e.IP2 = m.Source.Addr()
		} else {
			e.Net = m.Source
		}
	}
	return e
}

// MemberOf reads an entry listed in set s back as a member (Entry's inverse; the comment is
// not part of a member).
func MemberOf(s proxy.Set, e ipset.Entry) proxy.Member {
	m := proxy.Member{Set: s, Addr: e.IP, Proto: e.Protocol, Port: e.Port}
	switch {
	case e.IP2.IsValid():
		m.Source = proxy.HostSource(e.IP2)
	case e.Net.IsValid():
		m.Source = e.Net.Masked()
	}
	return m
}
