package proxy

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kipvs/kipvs/internal/inet"
)

// A node with one of everything, so every conditional rule appears.
func fullDesired(o *Options) *Desired {
	d := NewDesired(o.Family)
	for _, tc := range buildCases() {
		if tc.opts != nil {
			continue
		}
		d.Update(nn(tc.name), BuildService(ServiceInput{Service: tc.svc, Slices: tc.slices}, o), nil)
	}
	return d
}

// namedFilter is the filter facts of one test node.
type namedFilter struct {
	name string
	node string // variants with the same node name make up one dual-stack node
	f    *Filter
}

// rulesGoldenCases are the nodes whose rendered rules the golden files rules-NAME.golden pin
// (internal/proxy's rules_render_test.go renders them).
func rulesGoldenCases() []namedFilter {
	cidr := LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	var out []namedFilter
	for _, tc := range []struct {
		name  string
		opts  func(*Options)
		empty bool
	}{
		{name: "cluster-cidr", opts: func(o *Options) { o.LocalDetector = cidr }},
		{name: "masquerade-all", opts: func(o *Options) { o.MasqueradeAll = true }},
		{name: "no-detector", opts: func(o *Options) { o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR} }},
		{name: "interface-prefix-bit-15", opts: func(o *Options) {
			o.LocalDetector = LocalDetector{Mode: LocalInterfaceNamePrefix, Interface: "veth"}
			o.MasqueradeBit = 15
		}},
		{name: "empty-node", empty: true},
		// iptables >= 1.6.2: upstream's MASQUERADE rule carries --random-fully.
		{name: "random-fully", opts: func(o *Options) { o.LocalDetector = cidr; o.MasqueradeRandomFully = true }},
	} {
		o := testOptions()
		if tc.opts != nil {
			tc.opts(o)
		}
		d := NewDesired(o.Family)
		if !tc.empty {
			d = fullDesired(o)
		}
		out = append(out, namedFilter{name: tc.name, f: BuildFilter(o, d)})
	}

	o := testOptions()
	o.Family = inet.IPv6
	o.NodePortAddresses = []netip.Addr{netip.MustParseAddr("fd00:1::10")}
	o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}}
	d := NewDesired(inet.IPv6)
	d.Update(nn("v6"), BuildService(ServiceInput{Service: svc("default", "v6", "fd00::10")}, o), nil)
	return append(out, namedFilter{name: "ipv6", f: BuildFilter(o, d)})
}

// setReferenceCases are an empty node ("empty"), a node with one ClusterIP Service ("web")
// and the same without a local-traffic detector ("web-no-detector").
func setReferenceCases() []namedFilter {
	o := testOptions()
	d := NewDesired(inet.IPv4)
	out := []namedFilter{{name: "empty", f: BuildFilter(o, d)}}
	d.Update(nn("web"), BuildService(ServiceInput{Service: svc("default", "web", "10.96.0.10"),
		Slices: []*discoveryv1.EndpointSlice{slice("web", "w", "http", 80, v1.ProtocolTCP, "10.244.1.1")}}, o), nil)
	out = append(out, namedFilter{name: "web", f: BuildFilter(o, d)})
	o.LocalDetector = LocalDetector{}
	return append(out, namedFilter{name: "web-no-detector", f: BuildFilter(o, d)})
}
