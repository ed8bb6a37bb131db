package proxy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/golden"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// buildCase is one row of the desired-state table: a Service with its slices, the options
// to build with, and what must (and must not) appear in the result.
type buildCase struct {
	name   string
	opts   func(*Options)
	svc    *v1.Service
	slices []*discoveryv1.EndpointSlice
	// problems, when not nil, is the exact list of "Reason field" the build must report;
	// skipped means the Service must contribute nothing to the kernel at all.
	problems []string
	skipped  bool
}

// allBuildCases adds the bad-input rows (validate_test.go) to the rows of well-formed input
// (the rules golden files aggregate only the latter).
func allBuildCases() []buildCase {
	return append(buildCases(), badInputCases()...)
}

func buildCases() []buildCase {
	tcp, udp, sctp := v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP
	return []buildCase{
		{
			name:   "clusterip-tcp-three-backends",
			svc:    svc("default", "web", "10.96.0.10"),
			slices: []*discoveryv1.EndpointSlice{slice("web", "web-1", "http", 8080, tcp, "10.244.1.5", "10.244.2.6:local", "10.244.3.7")},
		},
		{
			name: "clusterip-not-ready-excluded",
			svc:  svc("default", "web", "10.96.0.10"),
			slices: []*discoveryv1.EndpointSlice{slice("web", "web-1", "http", 8080, tcp,
				"10.244.1.5", "10.244.2.6:notready", "10.244.3.7:terminating")},
		},
		{
			name: "clusterip-terminating-fallback",
			svc:  svc("default", "web", "10.96.0.10"),
			slices: []*discoveryv1.EndpointSlice{slice("web", "web-1", "http", 8080, tcp,
				"10.244.2.6:notready", "10.244.3.7:terminating")},
		},
		{
			name: "clusterip-dedup-across-slices-and-port-match",
			svc: svc("default", "dns", "10.96.0.53", ports(
				v1.ServicePort{Name: "dns", Port: 53, Protocol: udp},
				v1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: tcp})),
			slices: []*discoveryv1.EndpointSlice{
				slice("dns", "dns-a", "dns", 5353, udp, "10.244.1.5", "10.244.1.6"),
				slice("dns", "dns-b", "dns", 5353, udp, "10.244.1.6", "10.244.1.7"),
				slice("dns", "dns-c", "dns-tcp", 5354, tcp, "10.244.1.5"),
			},
		},
		{
			// The same endpoint in two slices with different conditions: the first slice's
			// wins (not ready, so no real server), whichever sorts first by address.
			name: "clusterip-dedup-first-slice-wins",
			svc:  svc("default", "web", "10.96.0.14"),
			slices: []*discoveryv1.EndpointSlice{
				slice("web", "web-a", "http", 8080, tcp, "10.244.1.9", "10.244.1.6:notready"),
				slice("web", "web-b", "http", 8080, tcp, "10.244.1.6", "10.244.1.5"),
			},
		},
		{
			name:   "no-endpoints",
			svc:    svc("default", "empty", "10.96.0.11"),
			slices: nil,
		},
		{
			name: "nodeport-udp",
			svc: svc("default", "np", "10.96.0.12", svcType(v1.ServiceTypeNodePort), ports(
				v1.ServicePort{Name: "u", Port: 9000, Protocol: udp, NodePort: 30900})),
			slices: []*discoveryv1.EndpointSlice{slice("np", "np-1", "u", 9000, udp, "10.244.1.5")},
		},
		{
			name: "nodeport-sctp-hash",
			svc: svc("default", "sc", "10.96.0.13", svcType(v1.ServiceTypeNodePort), ports(
				v1.ServicePort{Name: "s", Port: 3868, Protocol: sctp, NodePort: 31868})),
			slices: []*discoveryv1.EndpointSlice{slice("sc", "sc-1", "s", 3868, sctp, "10.244.1.5")},
		},
		{
			name:   "nodeport-no-node-addresses",
			opts:   func(o *Options) { o.NodePortAddresses = nil },
			svc:    svc("default", "np", "10.96.0.12", svcType(v1.ServiceTypeNodePort), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30080})),
			slices: []*discoveryv1.EndpointSlice{slice("np", "np-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name:   "externalip",
			svc:    svc("default", "ext", "10.96.0.14", externalIPs("203.0.113.7")),
			slices: []*discoveryv1.EndpointSlice{slice("ext", "ext-1", "http", 8080, tcp, "10.244.1.5", "10.244.2.6:local")},
		},
		{
			name: "externalip-is-node-address-is-a-problem",
			svc:  svc("default", "ext", "10.96.0.14", externalIPs("192.168.1.10", "not-an-ip", "203.0.113.7")),
			slices: []*discoveryv1.EndpointSlice{
				slice("ext", "ext-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name:   "etp-local-with-local-endpoint",
			svc:    svc("default", "lb", "10.96.0.15", lbIngress("203.0.113.20"), etpLocal, externalIPs("203.0.113.21"), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30081})),
			slices: []*discoveryv1.EndpointSlice{slice("lb", "lb-1", "http", 8080, tcp, "10.244.1.5", "10.244.2.6:local")},
		},
		{
			name:   "etp-local-without-local-endpoint-falls-back-without-snat",
			svc:    svc("default", "lb", "10.96.0.15", lbIngress("203.0.113.20"), etpLocal, ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30081})),
			slices: []*discoveryv1.EndpointSlice{slice("lb", "lb-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			// KEP-1669 per policy scope: remote pods are ready, this node's only pod is
			// terminating. ETP=Local drains to it (no SNAT) rather than falling back to the
			// cluster; the health check reports 0 ready local endpoints (503).
			name: "etp-local-only-local-endpoint-terminating",
			svc:  svc("default", "lb", "10.96.0.15", lbIngress("203.0.113.20"), etpLocal, ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30081})),
			slices: []*discoveryv1.EndpointSlice{slice("lb", "lb-1", "http", 8080, tcp,
				"10.244.1.5", "10.244.2.6:local:terminating", "10.244.2.7:local:notready")},
		},
		{
			name: "itp-local-only-local-endpoint-terminating",
			svc:  svc("default", "node-dns", "10.96.0.16", itpLocal),
			slices: []*discoveryv1.EndpointSlice{slice("node-dns", "nd-1", "http", 8080, tcp,
				"10.244.1.5", "10.244.2.6:local:terminating")},
		},
		{
			name:   "itp-local-no-fallback",
			svc:    svc("default", "node-dns", "10.96.0.16", itpLocal),
			slices: []*discoveryv1.EndpointSlice{slice("node-dns", "nd-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name:   "itp-local-keeps-local",
			svc:    svc("default", "node-dns", "10.96.0.16", itpLocal),
			slices: []*discoveryv1.EndpointSlice{slice("node-dns", "nd-1", "http", 8080, tcp, "10.244.1.5", "10.244.2.6:local")},
		},
		{
			name: "loadbalancer-proxy-ipmode-skipped-and-local-lb-ip-not-bound",
			opts: func(o *Options) {
				o.LocalAddresses = []netip.Addr{netip.MustParseAddr("198.51.100.9")}
				// A load balancer IP on the node's own link only with the operator's consent.
				o.LoadBalancerIPCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("198.51.100.9/32")}
			},
			svc: svc("default", "lb", "10.96.0.17", lbIngress("203.0.113.30", "198.51.100.9"), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30082}), func(s *v1.Service) {
				mode := v1.LoadBalancerIPModeProxy
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: "203.0.113.31", IPMode: &mode})
			}),
			slices: []*discoveryv1.EndpointSlice{slice("lb", "lb-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name:   "loadbalancer-ip-is-node-address-is-a-problem",
			svc:    svc("default", "lb", "10.96.0.17", lbIngress("192.168.1.10", "203.0.113.30"), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30082})),
			slices: []*discoveryv1.EndpointSlice{slice("lb", "lb-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name: "loadbalancer-source-ranges",
			svc: svc("default", "fw", "10.96.0.18", lbIngress("203.0.113.40"), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30083}), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24", " 192.168.1.0/24", "bogus"}
			}),
			slices: []*discoveryv1.EndpointSlice{slice("fw", "fw-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name: "loadbalancer-source-ranges-exclude-node",
			svc: svc("default", "fw", "10.96.0.18", lbIngress("203.0.113.41"), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30083}), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
			}),
			slices: []*discoveryv1.EndpointSlice{slice("fw", "fw-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			// A range covering a node address that is not the node IP (kube-proxy's nodeIP,
			// --bind-address) does not let the node in, as kube-proxy.
			name: "loadbalancer-source-ranges-cover-another-node-address",
			svc: svc("default", "fw", "10.96.0.18", lbIngress("203.0.113.42"), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30083}), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"192.168.2.0/24"}
			}),
			slices: []*discoveryv1.EndpointSlice{slice("fw", "fw-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name:   "health-check-node-port",
			svc:    svc("default", "hc", "10.96.0.19", lbIngress("203.0.113.50"), etpLocal, ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30084}), func(s *v1.Service) { s.Spec.HealthCheckNodePort = 32000 }),
			slices: []*discoveryv1.EndpointSlice{slice("hc", "hc-1", "http", 8080, tcp, "10.244.1.5:local", "10.244.1.6:local", "10.244.1.7")},
		},
		{
			name:   "session-affinity-default-timeout",
			svc:    svc("default", "sticky", "10.96.0.20", affinity(0)),
			slices: []*discoveryv1.EndpointSlice{slice("sticky", "s-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name:   "session-affinity-custom-timeout",
			svc:    svc("default", "sticky", "10.96.0.20", affinity(60)),
			slices: []*discoveryv1.EndpointSlice{slice("sticky", "s-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name:   "global-mh-scheduler-gets-mh-port",
			opts:   func(o *Options) { o.Scheduler = "mh" },
			svc:    svc("default", "mh", "10.96.0.21"),
			slices: []*discoveryv1.EndpointSlice{slice("mh", "mh-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name:   "scheduler-annotation",
			svc:    svc("default", "sh", "10.96.0.22", annotate(AnnotationScheduler, "sh"), annotate(AnnotationSchedulerFlags, "sh-port, sh-fallback,mh-port")),
			slices: []*discoveryv1.EndpointSlice{slice("sh", "sh-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			// The kernel's schedulers beyond kube-proxy's documented ones.
			name:   "scheduler-annotation-twos",
			svc:    svc("default", "twos", "10.96.0.22", annotate(AnnotationScheduler, "twos")),
			slices: []*discoveryv1.EndpointSlice{slice("twos", "t-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name:   "scheduler-annotation-unknown-keeps-global",
			svc:    svc("default", "bad", "10.96.0.23", annotate(AnnotationScheduler, "fastest")),
			slices: []*discoveryv1.EndpointSlice{slice("bad", "b-1", "http", 8080, tcp, "10.244.1.5")},
		},
		{
			name: "topology-hints-for-my-zone",
			svc:  svc("default", "topo", "10.96.0.24", annotate(v1.AnnotationTopologyMode, "Auto")),
			slices: []*discoveryv1.EndpointSlice{slice("topo", "t-1", "http", 8080, tcp,
				"10.244.1.5:zone-a", "10.244.1.6:zone-b", "10.244.1.7:zone-a")},
		},
		{
			name: "topology-hints-incomplete-uses-all",
			svc:  svc("default", "topo", "10.96.0.24", func(s *v1.Service) { s.Spec.TrafficDistribution = ptrTo(v1.ServiceTrafficDistributionPreferClose) }),
			slices: []*discoveryv1.EndpointSlice{slice("topo", "t-1", "http", 8080, tcp,
				"10.244.1.5:zone-a", "10.244.1.6")},
		},
		{
			// kube-proxy v1.34 follows the hints whatever the Service says: the EndpointSlice
			// controller writes them only when the Service asks (differential test).
			name: "topology-hints-followed-without-service-field",
			svc:  svc("default", "topo", "10.96.0.24"),
			slices: []*discoveryv1.EndpointSlice{slice("topo", "t-1", "http", 8080, tcp,
				"10.244.1.5:zone-a", "10.244.1.6:zone-b", "10.244.1.7:zone-b")},
		},
		{
			name: "topology-node-hints-before-zone-hints",
			svc:  svc("default", "topo", "10.96.0.24"),
			slices: []*discoveryv1.EndpointSlice{slice("topo", "t-1", "http", 8080, tcp,
				"10.244.1.5:zone-a:fornode-node-b", "10.244.2.6:local:zone-a:fornode-"+testNode, "10.244.1.7:zone-a:fornode-node-c")},
		},
		{
			// --feature-gates=PreferSameTrafficDistribution=false: the zone hints decide.
			name: "topology-node-hints-ignored-with-the-gate-off",
			opts: func(o *Options) { o.IgnoreNodeHints = true },
			svc:  svc("default", "topo", "10.96.0.24"),
			slices: []*discoveryv1.EndpointSlice{slice("topo", "t-1", "http", 8080, tcp,
				"10.244.1.5:zone-a:fornode-node-b", "10.244.2.6:local:zone-a:fornode-"+testNode, "10.244.1.7:zone-b:fornode-node-c")},
		},
		{
			name: "topology-node-hints-not-for-this-node-then-zone",
			svc:  svc("default", "topo", "10.96.0.24"),
			slices: []*discoveryv1.EndpointSlice{slice("topo", "t-1", "http", 8080, tcp,
				"10.244.1.5:zone-a:fornode-node-b", "10.244.1.6:zone-b:fornode-node-c")},
		},
		{
			name: "topology-terminating-fallback-not-filtered",
			svc:  svc("default", "topo", "10.96.0.24"),
			slices: []*discoveryv1.EndpointSlice{slice("topo", "t-1", "http", 8080, tcp,
				"10.244.1.5:terminating:zone-a", "10.244.1.6:terminating:zone-b", "10.244.1.7:notready:zone-a")},
		},
		{
			name:   "externalname-contributes-nothing",
			svc:    svc("default", "ext", "", svcType(v1.ServiceTypeExternalName)),
			slices: nil,
		},
		{
			name:   "ipv6-service-in-ipv4-proxier-contributes-nothing",
			svc:    svc("default", "v6", "fd00::10"),
			slices: []*discoveryv1.EndpointSlice{slice("v6", "v6-1", "http", 8080, tcp, "fd00:10:244::5")},
		},
		{
			// As upstream's service change tracker: a Service with no cluster IP of the
			// family is none of the family's business, even its node ports (which would
			// otherwise open the node's IPv6 addresses on a port no IPv6 endpoint serves)
			// and its external addresses of that family. Found by the live switch test.
			name: "ipv4-service-in-ipv6-proxier-contributes-nothing",
			opts: func(o *Options) {
				o.Family = inet.IPv6
				o.NodePortAddresses = []netip.Addr{netip.MustParseAddr("fd00:1::10")}
				o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}}
			},
			svc: svc("default", "v4", "10.96.0.27", svcType(v1.ServiceTypeLoadBalancer), etpLocal,
				ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30086}, v1.ServicePort{Name: "udp", Port: 80, NodePort: 30086, Protocol: v1.ProtocolUDP},
					v1.ServicePort{Name: "sctp", Port: 80, NodePort: 30086, Protocol: v1.ProtocolSCTP}),
				externalIPs("2001:db8::21"), lbIngress("2001:db8::20"), func(s *v1.Service) { s.Spec.HealthCheckNodePort = 30087 }),
			slices:   []*discoveryv1.EndpointSlice{slice("v4", "v4-1", "http", 8080, tcp, "10.244.1.5|local")},
			problems: []string{},
			skipped:  true,
		},
		{
			name: "headless-service-contributes-nothing",
			svc: svc("default", "headless", v1.ClusterIPNone, externalIPs("203.0.113.21"),
				ports(v1.ServicePort{Name: "http", Port: 80}, v1.ServicePort{Name: "udp", Port: 80, Protocol: v1.ProtocolUDP})),
			slices:   []*discoveryv1.EndpointSlice{slice("headless", "h-1", "http", 8080, tcp, "10.244.1.5")},
			problems: []string{},
			skipped:  true,
		},
		{
			name: "ipv6-proxier",
			opts: func(o *Options) {
				o.Family = inet.IPv6
				o.NodePortAddresses = []netip.Addr{netip.MustParseAddr("fd00:1::10")}
				o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}}
			},
			svc: svc("default", "v6", "fd00::10", svcType(v1.ServiceTypeNodePort), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30085}), func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.0.25", "fd00::10"}
				s.Spec.ClusterIP = "10.96.0.25"
			}),
			slices: []*discoveryv1.EndpointSlice{slice("v6", "v6-1", "http", 8080, tcp, "fd00:10:244::5|local")},
		},
		{
			name: "ipv4-only-nodeport-lb-in-ipv6-proxier-contributes-nothing",
			opts: func(o *Options) {
				o.Family = inet.IPv6
				o.NodePortAddresses = []netip.Addr{netip.MustParseAddr("fd00:1::10")}
				o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}}
			},
			svc: svc("default", "v4np", "10.96.0.27", svcType(v1.ServiceTypeLoadBalancer), etpLocal, lbIngress("203.0.113.27"),
				ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30086}, v1.ServicePort{Name: "s", Port: 3868, Protocol: sctp, NodePort: 31869}),
				func(s *v1.Service) { s.Spec.HealthCheckNodePort = 30087 }),
			slices: []*discoveryv1.EndpointSlice{slice("v4np", "v4np-1", "http", 8080, tcp, "10.244.2.6:local")},
		},
		{
			name:   "unsupported-protocol-is-a-problem",
			svc:    svc("default", "odd", "10.96.0.26", ports(v1.ServicePort{Name: "x", Port: 1, Protocol: "ICMP"}, v1.ServicePort{Name: "http", Port: 80})),
			slices: []*discoveryv1.EndpointSlice{slice("odd", "o-1", "http", 8080, tcp, "10.244.1.5")},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

func formatState(st *ServiceState) string {
	if st == nil {
		return "(nil)\n"
	}
	var b strings.Builder
	for _, v := range st.VirtualServers {
		b.WriteString(FormatVirtualServer(v))
	}
	for _, m := range st.Members {
		fmt.Fprintf(&b, "member %s %s\n", m.Set, m)
	}
	for _, a := range st.Addresses {
		fmt.Fprintf(&b, "bind %s\n", a)
	}
	for _, k := range st.OutFilter {
		fmt.Fprintf(&b, "out-filter %s\n", k)
	}
	if st.HealthCheckNodePort != 0 {
		fmt.Fprintf(&b, "health-check-node-port %d local-endpoints %d\n", st.HealthCheckNodePort, st.LocalEndpoints)
	}
	for _, p := range st.Problems {
		fmt.Fprintf(&b, "problem %s %s: %s\n", p.Reason, p.Field, p.Message)
	}
	return b.String()
}

// Every row's whole contribution is pinned by one golden file, reviewed by hand.
func TestBuildServiceGolden(t *testing.T) {
	var all strings.Builder
	for _, tc := range allBuildCases() {
		o := testOptions()
		if tc.opts != nil {
			tc.opts(o)
		}
		st := BuildService(ServiceInput{Service: tc.svc, Slices: tc.slices}, o)
		fmt.Fprintf(&all, "=== %s\n%s", tc.name, formatState(st))
	}
	golden.Check(t, "build-service.golden", all.String())
}

// Spot checks that pin the semantics independent of the golden file.
func TestBuildServiceSemantics(t *testing.T) {
	cases := map[string]buildCase{}
	for _, tc := range buildCases() {
		cases[tc.name] = tc
	}
	build := func(name string) *ServiceState {
		tc := cases[name]
		o := testOptions()
		if tc.opts != nil {
			tc.opts(o)
		}
		return BuildService(ServiceInput{Service: tc.svc, Slices: tc.slices}, o)
	}
	dests := func(st *ServiceState, kind VSKind) []string {
		var out []string
		for _, v := range st.VirtualServers {
			if v.Kind == kind {
				for _, d := range v.Destinations {
					out = append(out, d.AddrPort().String())
				}
				return out
			}
		}
		return []string{"<no " + kind.String() + " virtual server>"}
	}
	has := func(st *ServiceState, set Set, entry string) bool {
		for _, m := range st.Members {
			if m.Set == set && m.String() == entry {
				return true
			}
		}
		return false
	}

	st := build("clusterip-tcp-three-backends")
	if got := strings.Join(dests(st, kindClusterIP), " "); got != "10.244.1.5:8080 10.244.2.6:8080 10.244.3.7:8080" {
		t.Errorf("cluster IP real servers = %s", got)
	}
	if !has(st, SetLoopBack, "10.244.2.6,tcp:8080,10.244.2.6") || has(st, SetLoopBack, "10.244.1.5,tcp:8080,10.244.1.5") {
		t.Errorf("hairpin set must hold exactly the local endpoint: %v", st.Members)
	}
	if got := strings.Join(dests(build("clusterip-terminating-fallback"), kindClusterIP), " "); got != "10.244.3.7:8080" {
		t.Errorf("terminating fallback = %s, want only the serving terminating endpoint", got)
	}
	if got := dests(build("itp-local-no-fallback"), kindClusterIP); len(got) != 0 {
		t.Errorf("ITP=Local without local endpoints must have no real servers, got %v", got)
	}
	st = build("etp-local-with-local-endpoint")
	if got := strings.Join(dests(st, kindLoadBalancer), " "); got != "10.244.2.6:8080" {
		t.Errorf("ETP=Local LB real servers = %s", got)
	}
	if got := len(dests(st, kindClusterIP)); got != 2 {
		t.Errorf("ETP=Local must not restrict the cluster IP, got %d real servers", got)
	}
	if !has(st, SetLoadBalancerLocal, "203.0.113.20,tcp:80") || !has(st, SetNodePortLocalTCP, "30081") || !has(st, SetExternalIPLocal, "203.0.113.21,tcp:80") || has(st, SetExternalIP, "203.0.113.21,tcp:80") {
		t.Errorf("ETP=Local sets wrong: %v", st.Members)
	}
	st = build("etp-local-without-local-endpoint-falls-back-without-snat")
	if !has(st, SetLoadBalancerLocal, "203.0.113.20,tcp:80") || !has(st, SetNodePortLocalTCP, "30081") || !st.NoLocalExternal {
		t.Errorf("fallback without local endpoints must not be masqueraded (-LOCAL members, as kube-proxy) and be counted: %v %v", st.Members, st.NoLocalExternal)
	}
	if got := strings.Join(dests(st, kindNodePort), " "); got != "10.244.1.5:8080" {
		t.Errorf("fallback real servers = %s", got)
	}
	st = build("etp-local-only-local-endpoint-terminating")
	if got := strings.Join(dests(st, kindLoadBalancer), " "); got != "10.244.2.6:8080" {
		t.Errorf("ETP=Local with only a terminating local pod: LB real servers = %s, want it alone", got)
	}
	if got := strings.Join(dests(st, kindClusterIP), " "); got != "10.244.1.5:8080" {
		t.Errorf("cluster IP real servers = %s, want the ready remote pod only", got)
	}
	if !has(st, SetLoadBalancerLocal, "203.0.113.20,tcp:80") || !has(st, SetNodePortLocalTCP, "30081") || st.NoLocalExternal {
		t.Errorf("draining to a local terminating pod must not be masqueraded or counted as no local endpoint: %v %v", st.Members, st.NoLocalExternal)
	}
	if st.LocalEndpoints != 0 {
		t.Errorf("health check local endpoints = %d, want 0 (only terminating: 503)", st.LocalEndpoints)
	}
	if got := strings.Join(dests(build("itp-local-only-local-endpoint-terminating"), kindClusterIP), " "); got != "10.244.2.6:8080" {
		t.Errorf("ITP=Local with only a terminating local pod: real servers = %s, want it", got)
	}
	if st := build("etp-local-with-local-endpoint"); st.LocalEndpoints != 1 {
		t.Errorf("health check local endpoints = %d, want 1", st.LocalEndpoints)
	}
	st = build("loadbalancer-ip-is-node-address-is-a-problem")
	if len(st.Problems) != 1 || st.Problems[0].Field != "status.loadBalancer.ingress[0].ip" || st.Problems[0].Reason != "LoadBalancerIPIsNodeAddress" {
		t.Errorf("problems = %+v", st.Problems)
	}
	if got := strings.Join(dests(st, kindLoadBalancer), " "); got != "10.244.1.5:8080" || has(st, SetLoadBalancer, "192.168.1.10,tcp:80") {
		t.Errorf("LB real servers = %s, members %v: the node-address ingress must be skipped, the other kept", got, st.Members)
	}
	for _, a := range st.Addresses {
		if a.String() == "192.168.1.10" {
			t.Errorf("a node address was bound on kube-ipvs0")
		}
	}
	for _, v := range st.VirtualServers {
		if v.Address.String() == "192.168.1.10" && v.Port == 80 {
			t.Errorf("a virtual server on the node address: %v", v.VSKey)
		}
	}
	st = build("externalip-is-node-address-is-a-problem")
	if len(st.Problems) != 2 || !strings.Contains(st.Problems[0].Field, "externalIPs[0]") || !strings.Contains(st.Problems[1].Field, "externalIPs[1]") {
		t.Errorf("problems = %v", st.Problems)
	}
	for _, a := range st.Addresses {
		if a.String() == "192.168.1.10" {
			t.Errorf("a node address was bound on kube-ipvs0")
		}
	}
	st = build("scheduler-annotation")
	if v := st.VirtualServers[0]; v.Scheduler != "sh" || strings.Join(v.SchedFlags, ",") != "sh-fallback,sh-port" || len(st.Problems) != 1 {
		t.Errorf("annotation scheduler = %s %v, problems %v", v.Scheduler, v.SchedFlags, st.Problems)
	}
	for name, want := range map[string]string{
		"topology-hints-followed-without-service-field":   "10.244.1.5:8080",
		"topology-node-hints-before-zone-hints":           "10.244.2.6:8080",
		"topology-node-hints-not-for-this-node-then-zone": "10.244.1.5:8080",
		"topology-terminating-fallback-not-filtered":      "10.244.1.5:8080 10.244.1.6:8080",
		"topology-hints-incomplete-uses-all":              "10.244.1.5:8080 10.244.1.6:8080",
	} {
		if got := strings.Join(dests(build(name), kindClusterIP), " "); got != want {
			t.Errorf("%s: real servers %s, want %s", name, got, want)
		}
	}
	if got := strings.Join(dests(build("topology-hints-for-my-zone"), kindClusterIP), " "); got != "10.244.1.5:8080 10.244.1.7:8080" {
		t.Errorf("zone hints = %s", got)
	}
}

// kube-proxy's proxier of a family sees only the Services with a cluster IP of that family:
// an IPv4-only NodePort or LoadBalancer Service has no IPv6 node port, health check node
// port or set member (found by the differential test against kube-proxy).
func TestOtherFamilyServiceContributesNothing(t *testing.T) {
	for _, tc := range buildCases() {
		if tc.name != "ipv4-only-nodeport-lb-in-ipv6-proxier-contributes-nothing" && tc.name != "ipv6-service-in-ipv4-proxier-contributes-nothing" {
			continue
		}
		o := testOptions()
		if tc.opts != nil {
			tc.opts(o)
		}
		st := BuildService(ServiceInput{Service: tc.svc, Slices: tc.slices}, o)
		if len(st.VirtualServers) > 0 || len(st.Members) > 0 || len(st.Addresses) > 0 || len(st.OutFilter) > 0 || st.HealthCheckNodePort != 0 || len(st.Problems) > 0 {
			t.Errorf("%s: contributes:\n%s", tc.name, formatState(st))
		}
	}
}
