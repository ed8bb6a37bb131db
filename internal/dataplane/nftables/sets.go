package nftables

import (
	"fmt"
	"net/netip"
	"strconv"

	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/proxy"
)

// SetName is the name of set s in kipvs's table (the same in both families).
func SetName(s proxy.Set) string {
	switch s {
	case proxy.SetClusterIP:
		return "cluster-ip"
	case proxy.SetExternalIP:
		return "external-ip"
	case proxy.SetExternalIPLocal:
		return "external-ip-local"
	case proxy.SetHealthCheckNodePort:
		return "health-check-node-port"
	case proxy.SetIPVSIPs:
		return "ipvs-ips"
	case proxy.SetLoadBalancer:
		return "load-balancer"
	case proxy.SetLoadBalancerFW:
		return "load-balancer-fw"
	case proxy.SetLoadBalancerLocal:
		return "load-balancer-local"
	case proxy.SetLoadBalancerSourceNet:
		return "load-balancer-source-cidr"
	case proxy.SetLoadBalancerSourceIP:
		return "load-balancer-source-ip"
	case proxy.SetLoopBack:
		return "loop-back"
	case proxy.SetNodePortLocalSCTP:
		return "node-port-local-sctp"
	case proxy.SetNodePortLocalTCP:
		return "node-port-local-tcp"
	case proxy.SetNodePortLocalUDP:
		return "node-port-local-udp"
	case proxy.SetNodePortSCTP:
		return "node-port-sctp"
	case proxy.SetNodePortTCP:
		return "node-port-tcp"
	case proxy.SetNodePortUDP:
		return "node-port-udp"
	}
	return "set-" + s.String()
}

// kind is the shape of a set's elements.
type kind int

const (
	kindAddrProtoPort     kind = iota // address . protocol . port
	kindAddrProtoPortAddr             // address . protocol . port . source address
	kindAddrProtoPortNet              // address . protocol . port . source prefix (interval)
	kindPort                          // port
	kindAddr                          // address
)

func kindOf(s proxy.Set) kind {
	switch s {
	case proxy.SetLoopBack, proxy.SetLoadBalancerSourceIP:
		return kindAddrProtoPortAddr
	case proxy.SetLoadBalancerSourceNet:
		return kindAddrProtoPortNet
	case proxy.SetNodePortTCP, proxy.SetNodePortLocalTCP, proxy.SetNodePortUDP, proxy.SetNodePortLocalUDP, proxy.SetHealthCheckNodePort:
		return kindPort
	case proxy.SetIPVSIPs:
		return kindAddr
	}
	return kindAddrProtoPort
}

// setType is the nft type of set s in family f.
func setType(f inet.Family, s proxy.Set) string {
	a := "ipv4_addr"
	if f == inet.IPv6 {
		a = "ipv6_addr"
	}
	switch kindOf(s) {
	case kindAddrProtoPortAddr, kindAddrProtoPortNet:
		return a + " . inet_proto . inet_service . " + a
	case kindPort:
		return "inet_service"
	case kindAddr:
		return a
	}
	return a + " . inet_proto . inet_service"
}

// nftSet declares set s of family f. The comment is upstream's comment for the ipset that
// holds the same members in kube-proxy's IPVS mode.
func nftSet(f inet.Family, s proxy.Set) *knftables.Set {
	set := &knftables.Set{Name: SetName(s), Type: setType(f, s), Comment: knftables.PtrTo(s.Comment())}
	if kindOf(s) == kindAddrProtoPortNet {
		set.Flags = []knftables.SetFlag{knftables.IntervalFlag}
	}
	return set
}

// key is m as the elements of its set are written and listed.
func key(m proxy.Member) []string {
	p := strconv.Itoa(int(m.Port))
	switch kindOf(m.Set) {
	case kindPort:
		return []string{p}
	case kindAddr:
		return []string{m.Addr.String()}
	case kindAddrProtoPortAddr:
		return []string{m.Addr.String(), m.Proto.String(), p, m.Source.Addr().String()}
	case kindAddrProtoPortNet:
		src := m.Source.Masked()
		s := src.String()
		if src.IsSingleIP() {
			s = src.Addr().String() // nft lists a host's prefix as the address
		}
		return []string{m.Addr.String(), m.Proto.String(), p, s}
	}
	return []string{m.Addr.String(), m.Proto.String(), p}
}

// memberOf reads an element's key listed in set s back as a member (key's inverse).
func memberOf(s proxy.Set, k []string) (proxy.Member, error) {
	m := proxy.Member{Set: s}
	want := map[kind]int{kindAddrProtoPort: 3, kindAddrProtoPortAddr: 4, kindAddrProtoPortNet: 4, kindPort: 1, kindAddr: 1}[kindOf(s)]
	if len(k) != want {
		return m, fmt.Errorf("element %v of set %s: want %d fields", k, SetName(s), want)
	}
	var err error
	switch kindOf(s) {
	case kindPort:
		m.Port, err = parsePort(k[0])
	case kindAddr:
		m.Addr, err = netip.ParseAddr(k[0])
	default:
		if m.Addr, err = netip.ParseAddr(k[0]); err != nil {
			break
		}
		if m.Proto, err = parseProto(k[1]); err != nil {
			break
		}
		if m.Port, err = parsePort(k[2]); err != nil || len(k) == 3 {
			break
		}
		m.Source, err = parseSource(k[3])
	}
	if err != nil {
		return m, fmt.Errorf("element %v of set %s: %w", k, SetName(s), err)
	}
	return m, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	return uint16(n), err
}

func parseProto(s string) (inet.Protocol, error) {
	for _, p := range []inet.Protocol{inet.TCP, inet.UDP, inet.SCTP} {
		if s == p.String() {
			return p, nil
		}
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("protocol %q", s)
	}
	return inet.Protocol(n), nil
}

func parseSource(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return proxy.HostSource(a), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, err
	}
	return p.Masked(), nil
}
