package proxy

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kipvs/kipvs/internal/inet"
)

// The source-filtering part of a LoadBalancer Service's contribution (its -FW, -SOURCE-CIDR
// and -SOURCE-IP members and its KUBE-IPVS-OUT-FILTER entries) for the ranges operators write.
func TestSourceRangeMembers(t *testing.T) {
	v6 := func(o *Options) {
		o.Family = inet.IPv6
		o.NodePortAddresses = []netip.Addr{netip.MustParseAddr("fd00:1::10")}
		o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}}
	}
	for _, tc := range []struct {
		name   string
		opts   func(*Options)
		ranges []string
		want   []string
	}{
		{
			// A host range is a full-length net, shown as its bare address (as ipset lists it).
			name:   "ipv4-host-range-is-a-bare-address",
			ranges: []string{"198.51.100.7/32", "192.0.2.0/24"},
			want: []string{
				"member load-balancer-fw 203.0.113.90,tcp:80",
				"member load-balancer-source-cidr 203.0.113.90,tcp:80,192.0.2.0/24",
				"member load-balancer-source-cidr 203.0.113.90,tcp:80,198.51.100.7",
				"out-filter tcp/203.0.113.90:80",
			},
		},
		{
			name:   "ipv6-host-range-is-a-bare-address",
			opts:   v6,
			ranges: []string{"2001:db8::7/128", "2001:db8:1::/48", "198.51.100.0/24"},
			want: []string{
				"member load-balancer-fw 2001:db8::90,tcp:80",
				"member load-balancer-source-cidr 2001:db8::90,tcp:80,2001:db8::7",
				"member load-balancer-source-cidr 2001:db8::90,tcp:80,2001:db8:1::/48",
				"out-filter tcp/[2001:db8::90]:80",
			},
		},
		{
			// 0.0.0.0/0 allows every source: no filtering at all for the address.
			name:   "ipv4-zero-range-means-no-filtering",
			ranges: []string{"0.0.0.0/0"},
		},
		{
			name:   "ipv4-zero-range-among-others-means-no-filtering",
			ranges: []string{"192.0.2.0/24", "0.0.0.0/0", "2001:db8::/32"},
		},
		{
			// Host bits in a /0 are masked: still every source.
			name:   "ipv4-zero-range-with-host-bits",
			ranges: []string{"10.1.2.3/0"},
		},
		{
			name:   "ipv6-zero-range-means-no-filtering",
			opts:   v6,
			ranges: []string{"2001:db8:1::/48", "::/0"},
		},
		{
			// ::/0 allows every IPv6 source; this IPv4 node still sees only ranges of
			// the other family, so nothing of IPv4 may reach the address (unchanged).
			name:   "ipv4-node-with-only-ipv6-zero-range-filters-everything",
			ranges: []string{"::/0"},
			want: []string{
				"member load-balancer-fw 203.0.113.90,tcp:80",
				"out-filter tcp/203.0.113.90:80",
			},
		},
		{
			// A node address in a range lets the node itself in (unchanged).
			name:   "range-covering-a-node-address",
			ranges: []string{"192.168.1.0/24"},
			want: []string{
				"member load-balancer-fw 203.0.113.90,tcp:80",
				"member load-balancer-source-cidr 203.0.113.90,tcp:80,192.168.1.0/24",
				"member load-balancer-source-ip 203.0.113.90,tcp:80,203.0.113.90",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			lbIP, clusterIP, ep := "203.0.113.90", "10.96.0.90", "10.244.1.5"
			if tc.opts != nil {
				tc.opts(o)
				lbIP, clusterIP, ep = "2001:db8::90", "fd00::90", "fd00:10:244::5"
			}
			s := svc("default", "fw", clusterIP, lbIngress(lbIP), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30090}),
				func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = tc.ranges })
			st := BuildService(ServiceInput{Service: s, Slices: []*discoveryv1.EndpointSlice{slice("fw", "fw-1", "http", 8080, v1.ProtocolTCP, ep)}}, o)
			var got []string
			for _, l := range strings.Split(formatState(st), "\n") {
				if strings.Contains(l, "load-balancer-fw ") || strings.Contains(l, "load-balancer-source-") ||
					strings.HasPrefix(l, "out-filter ") || strings.HasPrefix(l, "problem ") {
					got = append(got, l)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("source filtering:\n%s\nwant:\n%s\nwhole contribution:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), formatState(st))
			}
		})
	}
}
