package proxy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/golden"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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

func TestRulesGolden(t *testing.T) {
	cidr := LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
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
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			if tc.opts != nil {
				tc.opts(o)
			}
			d := NewDesired(o.Family)
			if !tc.empty {
				d = fullDesired(o)
			}
			golden.Check(t, "rules-"+tc.name+".golden", BuildRules(o, d).Render())
		})
	}
}

// Rules reference a set only while it has members, as upstream does, and the safe
// node-originated rule appears exactly when no detector is configured.
func TestRulesSetReferences(t *testing.T) {
	o := testOptions()
	d := NewDesired(inet.IPv4)
	r := BuildRules(o, d).Render()
	for _, set := range []string{SetClusterIP, SetLoadBalancer, SetExternalIP, SetNodePortTCP, SetLoopBack} {
		if strings.Contains(r, "--match-set "+set+" dst") && !strings.Contains(r, "KUBE-IPVS-FILTER -m set --match-set "+set) {
			t.Errorf("empty node references %s outside KUBE-IPVS-FILTER:\n%s", set, r)
		}
	}
	d.Update(nn("web"), BuildService(ServiceInput{Service: svc("default", "web", "10.96.0.10"),
		Slices: []*discoveryv1.EndpointSlice{slice("web", "w", "http", 80, v1.ProtocolTCP, "10.244.1.1")}}, o), nil)
	r = BuildRules(o, d).Render()
	want := "-A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment \"Kubernetes service cluster ip + port for masquerade purpose\" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ\n"
	if !strings.Contains(r, want) {
		t.Errorf("missing cluster IP masquerade rule %q in\n%s", want, r)
	}
	o.LocalDetector = LocalDetector{}
	r = BuildRules(o, d).Render()
	if !strings.Contains(r, "--match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ") {
		t.Errorf("no detector: missing the node-originated src,dst rule:\n%s", r)
	}
}

func TestRulesIPv6(t *testing.T) {
	o := testOptions()
	o.Family = inet.IPv6
	o.NodePortAddresses = []netip.Addr{netip.MustParseAddr("fd00:1::10")}
	o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}}
	d := NewDesired(inet.IPv6)
	d.Update(nn("v6"), BuildService(ServiceInput{Service: svc("default", "v6", "fd00::10")}, o), nil)
	r := BuildRules(o, d).Render()
	for _, want := range []string{"-s ::1/128 -j RETURN", "! -s fd00:10:244::/56", "KUBE-6-CLUSTER-IP", "icmp6-port-unreachable"} {
		if !strings.Contains(r, want) {
			t.Errorf("IPv6 rules lack %q:\n%s", want, r)
		}
	}
	if strings.Contains(r, "KUBE-CLUSTER-IP ") {
		t.Errorf("IPv6 rules reference an IPv4 set:\n%s", r)
	}
	golden.Check(t, "rules-ipv6.golden", r)
}
