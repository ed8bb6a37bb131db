package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/inet"
)

// rawSlice is an EndpointSlice of any address type with ready endpoints on node-b, for
// addresses the slice helper cannot spell (IPv6 without many colons, zones, wrong family).
func rawSlice(svcName, name string, at discoveryv1.AddressType, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: at,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr.To("node-b")})
	}
	return s
}

func rawAffinity(timeout int32) svcOpt {
	return func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
	}
}

func v6Options(o *Options) {
	o.Family = inet.IPv6
	o.NodePortAddresses = []netip.Addr{netip.MustParseAddr("fd00:1::10")}
	o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}}
}

func v6Service(name string, opts ...svcOpt) *v1.Service {
	return svc("default", name, "fd00::40", append([]svcOpt{func(s *v1.Service) {
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	}}, opts...)...)
}

// badInputCases are Services and EndpointSlices with values the kernel cannot take: some
// the apiserver accepts (multicast external IPs, any load balancer IP), some only a source
// file can carry (out-of-range ports, zones). Each names its problems exactly.
func badInputCases() []buildCase {
	tcp := v1.ProtocolTCP
	ep := func(svcName string) []*discoveryv1.EndpointSlice {
		return []*discoveryv1.EndpointSlice{slice(svcName, svcName+"-1", "http", 8080, tcp, "10.244.1.5")}
	}
	return []buildCase{
		// ---- addresses the API accepts, skipped one by one ----
		{
			name:   "bad-externalip-multicast-skipped-rest-programmed",
			svc:    svc("default", "mc", "10.96.1.1", externalIPs("239.1.1.1", "203.0.113.7")),
			slices: ep("mc"), problems: []string{"UnusableExternalIP spec.externalIPs[0]"},
		},
		{
			name: "bad-externalip-every-special-class",
			svc: svc("default", "xs", "10.96.1.2", externalIPs("0.0.0.0", "127.0.0.1", "255.255.255.255",
				"169.254.169.254", "224.0.0.1", "0.1.2.3", "203.0.113.7")),
			slices: ep("xs"),
			problems: []string{"UnusableExternalIP spec.externalIPs[0]", "UnusableExternalIP spec.externalIPs[1]",
				"UnusableExternalIP spec.externalIPs[2]", "UnusableExternalIP spec.externalIPs[3]",
				"UnusableExternalIP spec.externalIPs[4]", "UnusableExternalIP spec.externalIPs[5]"},
		},
		{
			name: "bad-lb-ingress-unspecified-multicast-link-local-skipped",
			svc: svc("default", "lbx", "10.96.1.3", lbIngress("0.0.0.0", "239.1.1.1", "169.254.169.254", "127.0.0.1", "203.0.113.30"),
				ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30090})),
			slices: ep("lbx"),
			problems: []string{"UnusableLoadBalancerIP status.loadBalancer.ingress[0].ip", "UnusableLoadBalancerIP status.loadBalancer.ingress[1].ip",
				"UnusableLoadBalancerIP status.loadBalancer.ingress[2].ip", "UnusableLoadBalancerIP status.loadBalancer.ingress[3].ip"},
		},
		{
			name: "bad-endpoint-addresses-skipped-rest-programmed",
			svc: svc("default", "epx", "10.96.1.4", ports(
				v1.ServicePort{Name: "http", Port: 80, Protocol: tcp},
				v1.ServicePort{Name: "alt", Port: 81, Protocol: tcp})),
			slices: []*discoveryv1.EndpointSlice{
				rawSlice("epx", "epx-1", discoveryv1.AddressTypeIPv4, 8080,
					"255.255.255.255", "0.0.0.0", "127.0.0.1", "224.0.0.5", "169.254.1.1", "10.1.2.3%eth0", "fd00::5", "bogus", "10.244.1.5"),
				func() *discoveryv1.EndpointSlice {
					s := rawSlice("epx", "epx-2", discoveryv1.AddressTypeIPv4, 8081, "239.2.2.2", "10.244.1.6")
					s.Ports[0].Name = ptr.To("alt")
					return s
				}(),
			},
			// Reported once each, though two service ports read the slices.
			problems: []string{
				"UnusableEndpointAddress endpointslice/epx-1 endpoints[0].addresses[0]",
				"UnusableEndpointAddress endpointslice/epx-1 endpoints[1].addresses[0]",
				"UnusableEndpointAddress endpointslice/epx-1 endpoints[2].addresses[0]",
				"UnusableEndpointAddress endpointslice/epx-1 endpoints[3].addresses[0]",
				"UnusableEndpointAddress endpointslice/epx-1 endpoints[4].addresses[0]",
				"InvalidEndpointAddress endpointslice/epx-1 endpoints[5].addresses[0]",
				"InvalidEndpointAddress endpointslice/epx-1 endpoints[6].addresses[0]",
				"InvalidEndpointAddress endpointslice/epx-1 endpoints[7].addresses[0]",
				"UnusableEndpointAddress endpointslice/epx-2 endpoints[0].addresses[0]",
			},
		},
		{
			name: "bad-ipv6-special-addresses-and-zones-skipped",
			opts: v6Options,
			svc: v6Service("v6x", lbIngress("ff05::1", "fe80::1", "::", "::1", "2001:db8::30%eth0", "2001:db8::30"),
				externalIPs("2001:db8::1%1", "fe80::7", "ff0e::1", "2001:db8::7"),
				ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30091})),
			slices: []*discoveryv1.EndpointSlice{rawSlice("v6x", "v6x-1", discoveryv1.AddressTypeIPv6, 8080,
				"fe80::5", "ff02::1", "2001:db8:244::5%eth0", "::", "10.244.1.5", "fd00:10:244::5")},
			problems: []string{
				"InvalidExternalIP spec.externalIPs[0]",
				"UnusableExternalIP spec.externalIPs[1]",
				"UnusableExternalIP spec.externalIPs[2]",
				"UnusableLoadBalancerIP status.loadBalancer.ingress[0].ip",
				"UnusableLoadBalancerIP status.loadBalancer.ingress[1].ip",
				"UnusableLoadBalancerIP status.loadBalancer.ingress[2].ip",
				"UnusableLoadBalancerIP status.loadBalancer.ingress[3].ip",
				"InvalidLoadBalancerIP status.loadBalancer.ingress[4].ip",
				"UnusableEndpointAddress endpointslice/v6x-1 endpoints[0].addresses[0]",
				"UnusableEndpointAddress endpointslice/v6x-1 endpoints[1].addresses[0]",
				"InvalidEndpointAddress endpointslice/v6x-1 endpoints[2].addresses[0]",
				"UnusableEndpointAddress endpointslice/v6x-1 endpoints[3].addresses[0]",
				"InvalidEndpointAddress endpointslice/v6x-1 endpoints[4].addresses[0]",
			},
		},
		{
			name: "bad-endpointslice-port-out-of-range-skips-the-slice",
			svc:  svc("default", "spx", "10.96.1.5"),
			slices: []*discoveryv1.EndpointSlice{
				rawSlice("spx", "spx-1", discoveryv1.AddressTypeIPv4, 70000, "10.244.1.5"),
				rawSlice("spx", "spx-2", discoveryv1.AddressTypeIPv4, 8080, "10.244.1.6"),
			},
			problems: []string{"InvalidPort endpointslice/spx-1 ports[0].port"},
		},

		{
			name: "bad-source-range-reported-once-for-every-lb-ip-and-port",
			svc: svc("default", "fw2", "10.96.1.6", lbIngress("203.0.113.41", "203.0.113.42"), ports(
				v1.ServicePort{Name: "http", Port: 80, NodePort: 30093}, v1.ServicePort{Name: "https", Port: 443, NodePort: 30094}), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"bogus", "198.51.100.0/24", "10.0.0.0/33"}
			}),
			slices:   ep("fw2"),
			problems: []string{"InvalidSourceRange spec.loadBalancerSourceRanges[0]", "InvalidSourceRange spec.loadBalancerSourceRanges[2]"},
		},
		{
			// An IPv4-mapped IPv6 range is an IPv6 range (as upstream): never in an IPv4 set.
			name: "source-range-v4-mapped-is-ipv6",
			svc: svc("default", "fw3", "10.96.1.7", lbIngress("203.0.113.43"), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30095}), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"::ffff:198.51.100.0/120", "192.168.1.0/24"}
			}),
			slices:   ep("fw3"),
			problems: []string{},
		},

		// ---- input the apiserver rejects: the whole Service is skipped, never mangled ----
		{
			name: "bad-port-out-of-range",
			svc: svc("default", "p", "10.96.1.10", ports(
				v1.ServicePort{Name: "a", Port: 65616, Protocol: tcp},
				// The file source defaults an unset targetPort to the port: one problem, not two.
				v1.ServicePort{Name: "b", Port: -1, Protocol: tcp, TargetPort: intstr.FromInt32(-1)},
				v1.ServicePort{Name: "c", Port: 0, Protocol: tcp})),
			slices:   ep("p"),
			problems: []string{"InvalidPort spec.ports[0].port", "InvalidPort spec.ports[1].port", "InvalidPort spec.ports[2].port"},
			skipped:  true,
		},
		{
			name: "bad-target-port-out-of-range",
			svc: svc("default", "tp", "10.96.1.11", ports(
				v1.ServicePort{Name: "http", Port: 80, Protocol: tcp, TargetPort: intstr.FromInt32(70000)})),
			slices:   ep("tp"),
			problems: []string{"InvalidPort spec.ports[0].targetPort"},
			skipped:  true,
		},
		{
			name: "bad-node-port-out-of-range",
			svc: svc("default", "np", "10.96.1.12", svcType(v1.ServiceTypeNodePort), ports(
				v1.ServicePort{Name: "http", Port: 80, Protocol: tcp, NodePort: 65536},
				v1.ServicePort{Name: "https", Port: 443, Protocol: tcp, NodePort: -5})),
			slices:   ep("np"),
			problems: []string{"InvalidPort spec.ports[0].nodePort", "InvalidPort spec.ports[1].nodePort"},
			skipped:  true,
		},
		{
			name: "bad-health-check-node-port-out-of-range",
			svc: svc("default", "hc", "10.96.1.13", lbIngress("203.0.113.50"), etpLocal,
				ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30092}), func(s *v1.Service) { s.Spec.HealthCheckNodePort = 70000 }),
			slices:   ep("hc"),
			problems: []string{"InvalidPort spec.healthCheckNodePort"},
			skipped:  true,
		},
		{
			name:     "bad-affinity-timeout-negative",
			svc:      svc("default", "af", "10.96.1.14", rawAffinity(-1)),
			slices:   ep("af"),
			problems: []string{"InvalidSessionAffinityTimeout spec.sessionAffinityConfig.clientIP.timeoutSeconds"},
			skipped:  true,
		},
		{
			name:     "bad-affinity-timeout-zero",
			svc:      svc("default", "af", "10.96.1.14", rawAffinity(0)),
			slices:   ep("af"),
			problems: []string{"InvalidSessionAffinityTimeout spec.sessionAffinityConfig.clientIP.timeoutSeconds"},
			skipped:  true,
		},
		{
			name:     "bad-affinity-timeout-above-a-day",
			svc:      svc("default", "af", "10.96.1.14", rawAffinity(86401)),
			slices:   ep("af"),
			problems: []string{"InvalidSessionAffinityTimeout spec.sessionAffinityConfig.clientIP.timeoutSeconds"},
			skipped:  true,
		},
		{
			name:     "good-affinity-timeout-one-day",
			svc:      svc("default", "af", "10.96.1.14", rawAffinity(86400)),
			slices:   ep("af"),
			problems: []string{},
		},
		{
			name: "bad-affinity-and-type-values",
			svc: svc("default", "enum", "10.96.1.15", func(s *v1.Service) {
				s.Spec.SessionAffinity = "Sticky"
				s.Spec.Type = "Nodeport"
			}),
			slices:   ep("enum"),
			problems: []string{"InvalidServiceType spec.type", "InvalidSessionAffinity spec.sessionAffinity"},
			skipped:  true,
		},
		{
			name: "bad-traffic-policies",
			svc: svc("default", "tpol", "10.96.1.26", svcType(v1.ServiceTypeNodePort), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30102}), func(s *v1.Service) {
				s.Spec.ExternalTrafficPolicy = "local"
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicy("Node"))
			}),
			slices:   ep("tpol"),
			problems: []string{"InvalidTrafficPolicy spec.externalTrafficPolicy", "InvalidTrafficPolicy spec.internalTrafficPolicy"},
			skipped:  true,
		},
		{
			name:     "bad-protocol-lower-case",
			svc:      svc("default", "pr", "10.96.1.16", ports(v1.ServicePort{Name: "http", Port: 80, Protocol: "tcp"})),
			slices:   ep("pr"),
			problems: []string{"UnsupportedProtocol spec.ports[0].protocol"},
			skipped:  true,
		},
		{
			name: "bad-duplicate-port-and-protocol",
			svc: svc("default", "dup", "10.96.1.17", svcType(v1.ServiceTypeNodePort), ports(
				v1.ServicePort{Name: "a", Port: 80, Protocol: tcp, NodePort: 30100},
				v1.ServicePort{Name: "b", Port: 80, Protocol: tcp, NodePort: 30101},
				v1.ServicePort{Name: "c", Port: 80, Protocol: v1.ProtocolUDP, NodePort: 30100},
				v1.ServicePort{Name: "d", Port: 81, Protocol: tcp, NodePort: 30100})),
			slices:   ep("dup"),
			problems: []string{"DuplicatePort spec.ports[1]", "DuplicatePort spec.ports[3].nodePort"},
			skipped:  true,
		},
		{
			name: "bad-port-names",
			svc: svc("default", "names", "10.96.1.18", ports(
				v1.ServicePort{Name: "a", Port: 80, Protocol: tcp},
				v1.ServicePort{Name: "a", Port: 81, Protocol: tcp},
				v1.ServicePort{Port: 82, Protocol: tcp})),
			slices:   ep("names"),
			problems: []string{"InvalidPortName spec.ports[1].name", "InvalidPortName spec.ports[2].name"},
			skipped:  true,
		},
		{
			name:     "bad-clusterip-not-an-ip",
			svc:      svc("default", "cip", "10.96.1.300"),
			slices:   ep("cip"),
			problems: []string{"InvalidClusterIP spec.clusterIPs[0]"},
			skipped:  true,
		},
		{
			name: "bad-clusterip-with-zone-in-the-other-family",
			svc: svc("default", "cip", "10.96.1.19", func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.1.19", "fd00::19%eth0"}
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
			}),
			slices:   ep("cip"),
			problems: []string{"InvalidClusterIP spec.clusterIPs[1]"},
			skipped:  true,
		},
		{
			name: "bad-clusterip-zone-ipv6-proxier",
			opts: v6Options,
			svc: v6Service("cip6", func(s *v1.Service) {
				s.Spec.ClusterIP = "fd00::40%1"
				s.Spec.ClusterIPs = []string{"fd00::40%1"}
			}),
			slices:   []*discoveryv1.EndpointSlice{rawSlice("cip6", "cip6-1", discoveryv1.AddressTypeIPv6, 8080, "fd00:10:244::5")},
			problems: []string{"InvalidClusterIP spec.clusterIPs[0]"},
			skipped:  true,
		},
		{
			name:     "bad-clusterip-is-node-address",
			svc:      svc("default", "steal", "192.168.1.10", externalIPs("203.0.113.8")),
			slices:   ep("steal"),
			problems: []string{"ClusterIPIsNodeAddress spec.clusterIPs[0]"},
			skipped:  true,
		},
		{
			name:     "bad-clusterip-is-local-address",
			opts:     func(o *Options) { o.LocalAddresses = []netip.Addr{netip.MustParseAddr("172.16.0.5")} },
			svc:      svc("default", "steal", "172.16.0.5"),
			slices:   ep("steal"),
			problems: []string{"ClusterIPIsNodeAddress spec.clusterIPs[0]"},
			skipped:  true,
		},
		{
			name:     "bad-clusterip-special",
			svc:      svc("default", "lo", "127.0.0.1"),
			slices:   ep("lo"),
			problems: []string{"UnusableClusterIP spec.clusterIPs[0]"},
			skipped:  true,
		},
		{
			name: "bad-clusterips-same-family-twice",
			svc: svc("default", "two", "10.96.1.20", func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.1.20", "10.96.1.21"}
			}),
			slices:   ep("two"),
			problems: []string{"InvalidClusterIP spec.clusterIPs[1]"},
			skipped:  true,
		},
		{
			name: "bad-clusterip-differs-from-clusterips",
			svc: svc("default", "diff", "10.96.1.22", func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.1.23"}
			}),
			slices:   ep("diff"),
			problems: []string{"InvalidClusterIP spec.clusterIP"},
			skipped:  true,
		},
		{
			name: "bad-ipfamilies-do-not-match-clusterips",
			svc: svc("default", "fam", "10.96.1.24", func(s *v1.Service) {
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
			}),
			slices:   ep("fam"),
			problems: []string{"InvalidIPFamilies spec.ipFamilies[0]"},
			skipped:  true,
		},
		{
			name: "good-dual-stack-ipfamilies",
			svc: svc("default", "ds", "10.96.1.25", func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.1.25", "fd00::25"}
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
			}),
			slices:   ep("ds"),
			problems: []string{},
		},
		// Addresses no Service may claim (issue 23): the cluster's Service CIDRs, the
		// apiserver's address, the node's own addresses, and outside the allow lists.
		{
			name:     "bad-externalip-in-service-cidr",
			opts:     func(o *Options) { o.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")} },
			svc:      svc("app", "evil", "10.96.200.7", externalIPs("10.96.0.10", "203.0.113.8")),
			slices:   ep("evil"),
			problems: []string{"ExternalIPInServiceCIDR spec.externalIPs[0]"},
		},
		{
			name:     "bad-lb-ip-in-service-cidr",
			opts:     func(o *Options) { o.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")} },
			svc:      svc("app", "evil", "10.96.200.7", lbIngress("203.0.113.30", "10.96.0.1")),
			slices:   ep("evil"),
			problems: []string{"LoadBalancerIPInServiceCIDR status.loadBalancer.ingress[1].ip"},
		},
		{
			name:     "bad-externalip-is-apiserver",
			opts:     func(o *Options) { o.APIServerAddresses = []netip.Addr{netip.MustParseAddr("192.168.1.100")} },
			svc:      svc("app", "evil", "10.96.200.7", externalIPs("203.0.113.8", "192.168.1.100")),
			slices:   ep("evil"),
			problems: []string{"ExternalIPIsAPIServer spec.externalIPs[1]"},
		},
		{
			name:     "bad-lb-ip-is-apiserver",
			opts:     func(o *Options) { o.APIServerAddresses = []netip.Addr{netip.MustParseAddr("192.168.1.100")} },
			svc:      svc("app", "evil", "10.96.200.7", lbIngress("192.168.1.100")),
			slices:   ep("evil"),
			problems: []string{"LoadBalancerIPIsAPIServer status.loadBalancer.ingress[0].ip"},
		},
		{
			// Finding 5: the node's other address (not a NodePort address) on port 22.
			name:     "bad-lb-ip-is-local-address",
			opts:     func(o *Options) { o.LocalAddresses = []netip.Addr{netip.MustParseAddr("198.51.100.9")} },
			svc:      svc("app", "evil", "10.96.200.7", lbIngress("198.51.100.9"), ports(v1.ServicePort{Name: "http", Port: 22, NodePort: 30022})),
			slices:   ep("evil"),
			problems: []string{"LoadBalancerIPIsNodeAddress status.loadBalancer.ingress[0].ip"},
		},
		{
			// A cloud node's public address is in its Node status, on no link.
			name:     "bad-lb-ip-is-node-status-address",
			opts:     func(o *Options) { o.NodeStatusAddresses = []netip.Addr{netip.MustParseAddr("198.51.100.77")} },
			svc:      svc("app", "evil", "10.96.200.7", lbIngress("198.51.100.77")),
			slices:   ep("evil"),
			problems: []string{"LoadBalancerIPIsNodeAddress status.loadBalancer.ingress[0].ip"},
		},
		{
			name:     "bad-externalip-outside-allow-list",
			opts:     func(o *Options) { o.ExternalIPCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")} },
			svc:      svc("app", "evil", "10.96.200.7", externalIPs("198.51.100.7", "203.0.113.8", "fd00::7")),
			slices:   ep("evil"),
			problems: []string{"ExternalIPNotAllowed spec.externalIPs[0]"},
		},
		{
			name:     "bad-lb-ip-outside-allow-list",
			opts:     func(o *Options) { o.LoadBalancerIPCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")} },
			svc:      svc("app", "evil", "10.96.200.7", lbIngress("203.0.113.30", "198.51.100.30")),
			slices:   ep("evil"),
			problems: []string{"LoadBalancerIPNotAllowed status.loadBalancer.ingress[1].ip"},
		},
	}
}

// The addresses refused above are nowhere in the kernel state: no virtual server, no set
// member, not bound on kube-ipvs0.
func TestRefusedAddressesAreNotProgrammed(t *testing.T) {
	refused := map[string]string{
		"bad-externalip-in-service-cidr":    "10.96.0.10",
		"bad-lb-ip-in-service-cidr":         "10.96.0.1",
		"bad-externalip-is-apiserver":       "192.168.1.100",
		"bad-lb-ip-is-apiserver":            "192.168.1.100",
		"bad-lb-ip-is-local-address":        "198.51.100.9",
		"bad-lb-ip-is-node-status-address":  "198.51.100.77",
		"bad-externalip-outside-allow-list": "198.51.100.7",
		"bad-lb-ip-outside-allow-list":      "198.51.100.30",
	}
	for _, tc := range badInputCases() {
		addr, ok := refused[tc.name]
		if !ok {
			continue
		}
		delete(refused, tc.name)
		o := testOptions()
		tc.opts(o)
		st := BuildService(ServiceInput{Service: tc.svc, Slices: tc.slices}, o)
		a := netip.MustParseAddr(addr)
		for _, v := range st.VirtualServers {
			if v.Address == a {
				t.Errorf("%s: refused %s has a virtual server %s", tc.name, a, v.VSKey)
			}
		}
		for _, m := range st.Members {
			if m.Addr == a {
				t.Errorf("%s: refused %s is in %s", tc.name, a, m.Set)
			}
		}
		if slices.Contains(st.Addresses, a) {
			t.Errorf("%s: refused %s is bound", tc.name, a)
		}
		if len(st.VirtualServers) == 0 {
			t.Errorf("%s: the rest of the Service must still be programmed", tc.name)
		}
	}
	if len(refused) > 0 {
		t.Errorf("cases missing: %v", refused)
	}
}

// testUnusable is the test's own list of address classes no VIP or real server may have.
func testUnusable(a netip.Addr) bool {
	for _, p := range []string{"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32",
		"::/128", "::1/128", "fe80::/10", "ff00::/8"} {
		if netip.MustParsePrefix(p).Contains(a) {
			return true
		}
	}
	return a.Zone() != "" || !a.IsValid() || a.Is4In6()
}

// kernelSafe lists what in st the kernel would refuse or that must never be programmed.
func kernelSafe(st *ServiceState, f inet.Family) []string {
	var bad []string
	if st == nil {
		return nil
	}
	for _, v := range st.VirtualServers {
		if v.Port == 0 || testUnusable(v.Address) {
			bad = append(bad, "virtual server "+v.VSKey.String())
		}
		if v.Persistent && (v.Timeout < 1 || v.Timeout > 86400) {
			bad = append(bad, fmt.Sprintf("virtual server %s persistent %d", v.VSKey, v.Timeout))
		}
		for _, d := range v.Destinations {
			if d.Port == 0 || testUnusable(d.Address) {
				bad = append(bad, "real server "+d.AddrPort().String())
			}
		}
	}
	for _, m := range st.Members {
		for _, a := range []netip.Addr{m.Addr, m.Source.Addr()} {
			if a.IsValid() && (!f.Matches(a) || a.Is4In6()) {
				bad = append(bad, "address of the wrong family: "+m.Set.String()+" "+m.String())
			}
			if a.Zone() != "" {
				bad = append(bad, "member "+m.Set.String()+" "+m.String())
			}
		}
		if m.Set != SetIPVSIPs && m.Port == 0 {
			bad = append(bad, "member "+m.Set.String()+" "+m.String())
		}
	}
	for _, a := range st.Addresses {
		if testUnusable(a) {
			bad = append(bad, "bind "+a.String())
		}
	}
	if st.HealthCheckNodePort == 0 && slices.ContainsFunc(st.Members, func(m Member) bool { return m.Set == SetHealthCheckNodePort }) {
		bad = append(bad, "health check member without a port")
	}
	return bad
}

// Every row (good and bad) builds a state the kernel can take; the bad rows report exactly
// the problems they name, and a skipped Service contributes nothing.
func TestBuildServiceBadInput(t *testing.T) {
	for _, tc := range allBuildCases() {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			if tc.opts != nil {
				tc.opts(o)
			}
			st := BuildService(ServiceInput{Service: tc.svc, Slices: tc.slices}, o)
			if bad := kernelSafe(st, o.Family); len(bad) > 0 {
				t.Errorf("state the kernel cannot take:\n%s", strings.Join(bad, "\n"))
			}
			if tc.problems != nil {
				got := []string{}
				for _, p := range st.Problems {
					got = append(got, p.Reason+" "+p.Field)
					if p.Service.Name != tc.svc.Name || p.Message == "" {
						t.Errorf("problem %+v must name the Service and say why", p)
					}
				}
				if !slices.Equal(got, tc.problems) {
					t.Errorf("problems:\n got %q\nwant %q", got, tc.problems)
				}
			}
			if tc.skipped && (len(st.VirtualServers) > 0 || len(st.Members) > 0 || len(st.Addresses) > 0 ||
				len(st.OutFilter) > 0 || st.HealthCheckNodePort != 0) {
				t.Errorf("an invalid Service must not be programmed at all:\n%s", formatState(st))
			}
		})
	}
}
