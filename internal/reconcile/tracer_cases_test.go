package reconcile

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/testutil/golden"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/proxy"
)

func withLocal(s *discoveryv1.EndpointSlice, ips ...string) *discoveryv1.EndpointSlice {
	for i := range s.Endpoints {
		for _, ip := range ips {
			if s.Endpoints[i].Addresses[0] == ip {
				s.Endpoints[i].NodeName = ptr.To("node-a")
			}
		}
	}
	return s
}

// traceNode programs a node with one Service of each kind and returns a tracer over it.
func traceNode(t *testing.T, detector proxy.LocalDetector, masqAll bool) *tracer {
	e := newEnv(t)
	e.opts.LocalDetector = detector
	e.opts.MasqueradeAll = masqAll
	e.set(svc("web", "10.96.0.10"), withLocal(eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"), "10.244.2.6"))
	e.set(svc("np", "10.96.0.20", nodePort(30080)), eps("np", v1.ProtocolTCP, 8080, "10.244.3.7"))
	e.set(svc("local", "10.96.0.30", nodePort(30081), func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}), withLocal(eps("local", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"), "10.244.2.6"))
	e.set(svc("local-none", "10.96.0.31", nodePort(30082), func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}), eps("local-none", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.set(svc("lb", "10.96.0.40", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30083
		s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.40"}}
	}), eps("lb", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.set(svc("lb-node", "10.96.0.41", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30084
		s.Spec.LoadBalancerSourceRanges = []string{"192.168.1.0/24"}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.41"}}
	}), eps("lb-node", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.set(svc("sticky", "10.96.0.50", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }),
		eps("sticky", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))
	e.set(svc("ext", "10.96.0.60", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.60"} }),
		eps("ext", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.full()
	return newTracer(e)
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
func ip(s string) netip.Addr     { return netip.MustParseAddr(s) }

func TestPacketFlows(t *testing.T) {
	cidr := proxy.LocalDetector{Mode: proxy.LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	pod, outside, node := ip("10.244.9.9"), ip("192.168.7.7"), ip("192.168.1.10")
	flows := []struct {
		name string
		p    packet
		want string
	}{
		{"pod to cluster IP: no SNAT", packet{fromPod, pod, ap("10.96.0.10:80"), "tcp", "veth1"}, "ipvs [10.244.1.5:8080 10.244.2.6:8080]"},
		{"node to cluster IP (source is the VIP): SNAT", packet{fromNode, ip("10.96.0.10"), ap("10.96.0.10:80"), "tcp", ""}, "ipvs [10.244.1.5:8080 10.244.2.6:8080] masq"},
		{"off-cluster host routed to cluster IP: SNAT", packet{fromExternal, outside, ap("10.96.0.10:80"), "tcp", "eth0"}, "ipvs [10.244.1.5:8080 10.244.2.6:8080] masq"},
		{"hairpin: endpoint to its own service", packet{fromPod, ip("10.244.2.6"), ap("10.96.0.10:80"), "tcp", "veth2"}, "ipvs [10.244.1.5:8080 10.244.2.6:8080] masq"},
		{"host port through a VIP is rejected", packet{fromPod, pod, ap("10.96.0.10:22"), "tcp", "veth1"}, "reject"},
		{"node port from outside: SNAT", packet{fromExternal, outside, ap("192.168.1.10:30080"), "tcp", "eth0"}, "ipvs [10.244.3.7:8080] masq"},
		{"ETP=Local node port: local endpoint, source kept", packet{fromExternal, outside, ap("192.168.1.10:30081"), "tcp", "eth0"}, "ipvs [10.244.2.6:8080]"},
		// As kube-proxy's IPVS mode: the other nodes' endpoints without SNAT, so a client
		// elsewhere gets the reply from the pod's address (the connection fails, as upstream's
		// e2e wants), while this node's pods get theirs back through this node.
		{"ETP=Local without local endpoint: cluster endpoints, source kept", packet{fromExternal, outside, ap("192.168.1.10:30082"), "tcp", "eth0"}, "ipvs [10.244.1.5:8080]"},
		{"ETP=Local without local endpoint, from a pod on this node", packet{fromPod, pod, ap("192.168.1.10:30082"), "tcp", "veth1"}, "ipvs [10.244.1.5:8080]"},
		{"LB IP from an allowed source", packet{fromExternal, ip("198.51.100.7"), ap("203.0.113.40:80"), "tcp", "eth0"}, "ipvs [10.244.1.5:8080] masq"},
		{"LB IP from a source outside the ranges", packet{fromExternal, outside, ap("203.0.113.40:80"), "tcp", "eth0"}, "drop"},
		{"LB IP from the node when no range covers it", packet{fromNode, ip("203.0.113.40"), ap("203.0.113.40:80"), "tcp", ""}, "drop"},
		{"LB IP from the node when a range covers a node address", packet{fromNode, ip("203.0.113.41"), ap("203.0.113.41:80"), "tcp", ""}, "ipvs [10.244.1.5:8080] masq"},
		{"session affinity", packet{fromPod, pod, ap("10.96.0.50:80"), "tcp", "veth1"}, "ipvs [10.244.1.5:8080 10.244.2.6:8080] persistent"},
		{"external IP from outside: SNAT", packet{fromExternal, outside, ap("203.0.113.60:80"), "tcp", "eth0"}, "ipvs [10.244.1.5:8080] masq"},
		{"UDP to a TCP-only service port: not a service", packet{fromPod, pod, ap("10.96.0.10:80"), "udp", "veth1"}, "reject"},
		{"a node address on a port that is no node port", packet{fromExternal, outside, netip.AddrPortFrom(node, 22), "tcp", "eth0"}, "local"},
	}
	tr := traceNode(t, cidr, false)
	var all strings.Builder
	for _, f := range flows {
		got := tr.trace(f.p).String()
		fmt.Fprintf(&all, "%-70s %s\n", f.p, got)
		if got != f.want {
			t.Errorf("%s: %s = %q, want %q", f.name, f.p, got, f.want)
		}
	}
	golden.Check(t, "packet-flows.golden", all.String())

	// Seed-001: without a local-traffic detector, node-originated traffic is still SNATed
	// and pod traffic is not.
	tr = traceNode(t, proxy.LocalDetector{Mode: proxy.LocalClusterCIDR}, false)
	if got := tr.trace(packet{fromNode, ip("10.96.0.10"), ap("10.96.0.10:80"), "tcp", ""}).String(); !strings.HasSuffix(got, "masq") {
		t.Errorf("no detector, node to cluster IP: %s, want SNAT", got)
	}
	if got := tr.trace(packet{fromPod, pod, ap("10.96.0.10:80"), "tcp", "veth1"}).String(); strings.HasSuffix(got, "masq") {
		t.Errorf("no detector, pod to cluster IP: %s, want no SNAT", got)
	}
	// masqueradeAll: everything to a cluster IP is SNATed.
	tr = traceNode(t, cidr, true)
	if got := tr.trace(packet{fromPod, pod, ap("10.96.0.10:80"), "tcp", "veth1"}).String(); !strings.HasSuffix(got, "masq") {
		t.Errorf("masqueradeAll, pod to cluster IP: %s, want SNAT", got)
	}
	// Interface-prefix detector.
	tr = traceNode(t, proxy.LocalDetector{Mode: proxy.LocalInterfaceNamePrefix, Interface: "veth"}, false)
	if got := tr.trace(packet{fromPod, pod, ap("10.96.0.10:80"), "tcp", "veth7"}).String(); strings.HasSuffix(got, "masq") {
		t.Errorf("interface prefix, pod on veth7: %s, want no SNAT", got)
	}
	if got := tr.trace(packet{fromExternal, outside, ap("10.96.0.10:80"), "tcp", "eth0"}).String(); !strings.HasSuffix(got, "masq") {
		t.Errorf("interface prefix, from eth0: %s, want SNAT", got)
	}
}
