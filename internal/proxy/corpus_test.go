package proxy

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kipvs/kipvs/internal/inet"
)

// ruleVariant is one node's state for one family.
type ruleVariant struct {
	node    string // variants with the same node name make up one dual-stack node
	opts    *Options
	desired *Desired
}

// ruleVariants is a corpus of nodes that together render every rule a dataplane can produce,
// in both families: every build case and the services of corpusServices (SCTP node ports and
// load balancers, TCP and UDP, ETP Local, external IPs, health check node ports,
// loadBalancerSourceRanges with /32, /128, /0 and ranges covering a node address, dual-stack
// cluster IPs) under each local-traffic detector, clusterCIDR set and unset, masqueradeAll,
// and with and without node port addresses; plus an empty node.
func ruleVariants() []ruleVariant {
	var out []ruleVariant
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		pod, nodeCIDR := "10.244.0.0/16", "10.244.1.0/24"
		if f == inet.IPv6 {
			pod, nodeCIDR = "fd00:10:244::/56", "fd00:10:244:1::/64"
		}
		for _, v := range []struct {
			name string
			mod  func(*Options)
		}{
			{"cluster-cidr", func(o *Options) {
				o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix(pod)}}
				o.MasqueradeRandomFully = true // as on any node with iptables >= 1.6.2
			}},
			{"node-cidr", func(o *Options) {
				o.LocalDetector = LocalDetector{Mode: LocalNodeCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix(nodeCIDR)}}
			}},
			{"bridge", func(o *Options) { o.LocalDetector = LocalDetector{Mode: LocalBridgeInterface, Interface: "cni0"} }},
			{"interface-prefix-bit-15", func(o *Options) {
				o.LocalDetector = LocalDetector{Mode: LocalInterfaceNamePrefix, Interface: "veth"}
				o.MasqueradeBit = 15
			}},
			{"no-cluster-cidr", func(o *Options) { o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR} }},
			{"masquerade-all", func(o *Options) { o.MasqueradeAll = true }},
			{"no-node-port-addresses", func(o *Options) { o.NodePortAddresses = nil }},
		} {
			o := corpusOptions(f)
			v.mod(o)
			d := fullDesired(o)
			for _, in := range corpusServices(f) {
				d.Update(nn("corpus-"+in.Service.Name), BuildService(in, o), nil)
			}
			out = append(out, ruleVariant{v.name, o, d})
		}
		out = append(out, ruleVariant{"empty", corpusOptions(f), NewDesired(f)})
	}
	return out
}

func corpusOptions(f inet.Family) *Options {
	o := testOptions()
	if f == inet.IPv6 {
		o.Family = inet.IPv6
		o.NodePortAddresses = []netip.Addr{netip.MustParseAddr("fd00:1::10"), netip.MustParseAddr("fd00:2::10")}
		o.NodeIP = netip.MustParseAddr("fd00:1::10")
		o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}}
	}
	return o
}

// corpusServices are Services with the features the build cases do not combine, with
// addresses of family f (a dual-stack one has both).
func corpusServices(f inet.Family) []ServiceInput {
	a := func(v4, v6 string) string {
		if f == inet.IPv6 {
			return v6
		}
		return v4
	}
	sctp, udp, tcp := v1.ProtocolSCTP, v1.ProtocolUDP, v1.ProtocolTCP
	port := func(proto v1.Protocol, p, nodePort int32) svcOpt {
		return ports(v1.ServicePort{Name: "p", Port: p, NodePort: nodePort, Protocol: proto})
	}
	ranges := func(r ...string) svcOpt { return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = r } }
	healthCheck := func(p int32) svcOpt { return func(s *v1.Service) { s.Spec.HealthCheckNodePort = p } }
	ep := func(name string, proto v1.Protocol, local bool) []*discoveryv1.EndpointSlice {
		e := a("10.244.1.50", "fd00:10:244:1::50")
		if local {
			if f == inet.IPv6 {
				e += "|local"
			} else {
				e += ":local"
			}
		}
		return []*discoveryv1.EndpointSlice{slice(name, name+"-1", "p", 8080, proto, e)}
	}
	in := func(s *v1.Service, proto v1.Protocol, local bool) ServiceInput {
		return ServiceInput{Service: s, Slices: ep(s.Name, proto, local)}
	}
	return []ServiceInput{
		in(svc("default", "sctp-np", a("10.96.1.1", "fd00::1:1"), svcType(v1.ServiceTypeNodePort), port(sctp, 3868, 31001)), sctp, false),
		in(svc("default", "sctp-np-local", a("10.96.1.2", "fd00::1:2"), svcType(v1.ServiceTypeNodePort), etpLocal, port(sctp, 3868, 31002)), sctp, true),
		in(svc("default", "sctp-lb", a("10.96.1.3", "fd00::1:3"), lbIngress(a("203.0.113.103", "2001:db8:ff::103")), etpLocal,
			port(sctp, 3868, 31003), healthCheck(32103),
			ranges(a("198.51.100.7/32", "2001:db8:1::7/128"), a("192.0.2.0/24", "2001:db8:2::/48"))), sctp, true),
		in(svc("default", "udp-lb-open", a("10.96.1.4", "fd00::1:4"), lbIngress(a("203.0.113.104", "2001:db8:ff::104")),
			port(udp, 53, 31004), ranges("0.0.0.0/0", "::/0")), udp, false),
		in(svc("default", "tcp-lb-node", a("10.96.1.5", "fd00::1:5"), lbIngress(a("203.0.113.105", "2001:db8:ff::105")),
			port(tcp, 443, 31005), ranges(a("192.168.1.0/24", "fd00:1::/64"), a("2001:db8:3::/48", "192.0.2.0/25"))), tcp, false),
		in(svc("default", "tcp-lb-other-family-only", a("10.96.1.6", "fd00::1:6"), lbIngress(a("203.0.113.106", "2001:db8:ff::106")),
			port(tcp, 8443, 31006), ranges(a("::/0", "0.0.0.0/0"))), tcp, false),
		in(svc("default", "ext-local", a("10.96.1.7", "fd00::1:7"), externalIPs(a("198.51.100.107", "2001:db8:fe::107")), etpLocal,
			port(tcp, 80, 0)), tcp, true),
		in(svc("default", "ext-udp", a("10.96.1.8", "fd00::1:8"), externalIPs(a("198.51.100.108", "2001:db8:fe::108")),
			port(udp, 5353, 0)), udp, false),
		in(svc("default", "dual", "10.96.1.9", svcType(v1.ServiceTypeNodePort), port(tcp, 80, 31009), func(s *v1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.1.9", "fd00::1:9"}
		}), tcp, false),
		in(svc("default", "udp-np-local", a("10.96.1.11", "fd00::1:11"), svcType(v1.ServiceTypeNodePort), etpLocal, port(udp, 53, 31011)), udp, true),
		in(svc("default", "tcp-np-local", a("10.96.1.12", "fd00::1:12"), svcType(v1.ServiceTypeNodePort), etpLocal, port(tcp, 80, 31012)), tcp, true),
		in(svc("default", "sticky", a("10.96.1.10", "fd00::1:10"), affinity(0), port(tcp, 80, 0)), tcp, false),
	}
}

// The corpus really contains what the kernel test claims to cover: in each family, every
// set has members in some variant, so every set-conditional rule is rendered.
func TestCorpusCoverage(t *testing.T) {
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		seen := map[Set]bool{}
		for _, v := range ruleVariants() {
			if v.opts.Family != f {
				continue
			}
			for _, m := range v.desired.Members() {
				seen[m.Set] = true
			}
		}
		for _, s := range AllSets() {
			if !seen[s] {
				t.Errorf("%s: no variant has a member of %s", f, s)
			}
		}
	}
}
