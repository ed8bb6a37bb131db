package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/nft/nfttest"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

// The proxy's test nodes rendered by the iptables dataplane: the golden files pin the whole
// ruleset of each.

func render(f *proxy.Filter) string { return iptables.Render(iptables.Ruleset(f)) }

func TestRulesGolden(t *testing.T) {
	for _, tc := range proxy.RulesGoldenCases() {
		t.Run(tc.Name, func(t *testing.T) {
			golden.Check(t, "rules-"+tc.Name+".golden", render(tc.Filter))
		})
	}
}

func byName(t *testing.T, cases []proxy.NamedFilter, name string) *proxy.Filter {
	t.Helper()
	for _, c := range cases {
		if c.Name == name {
			return c.Filter
		}
	}
	t.Fatalf("no test node %s", name)
	return nil
}

// Rules reference a set only while it has members, as upstream does, and the safe
// node-originated rule appears exactly when no detector is configured.
func TestRulesSetReferences(t *testing.T) {
	cases := proxy.SetReferenceCases()
	r := render(byName(t, cases, "empty"))
	for _, set := range []proxy.Set{proxy.SetClusterIP, proxy.SetLoadBalancer, proxy.SetExternalIP, proxy.SetNodePortTCP, proxy.SetLoopBack} {
		if strings.Contains(r, "--match-set "+set.String()+" dst") && !strings.Contains(r, "KUBE-IPVS-FILTER -m set --match-set "+set.String()) {
			t.Errorf("empty node references %s outside KUBE-IPVS-FILTER:\n%s", set, r)
		}
	}
	r = render(byName(t, cases, "web"))
	want := "-A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment \"Kubernetes service cluster ip + port for masquerade purpose\" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ\n"
	if !strings.Contains(r, want) {
		t.Errorf("missing cluster IP masquerade rule %q in\n%s", want, r)
	}
	r = render(byName(t, cases, "web-no-detector"))
	if !strings.Contains(r, "--match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ") {
		t.Errorf("no detector: missing the node-originated src,dst rule:\n%s", r)
	}
}

func TestRulesIPv6(t *testing.T) {
	r := render(byName(t, proxy.RulesGoldenCases(), "ipv6"))
	for _, want := range []string{"-s ::1/128 -j RETURN", "! -s fd00:10:244::/56", "KUBE-6-CLUSTER-IP", "icmp6-port-unreachable"} {
		if !strings.Contains(r, want) {
			t.Errorf("IPv6 rules lack %q:\n%s", want, r)
		}
	}
	if strings.Contains(r, "KUBE-CLUSTER-IP ") {
		t.Errorf("IPv6 rules reference an IPv4 set:\n%s", r)
	}
}

func nfFamily(f inet.Family) inet.Family {
	if f == inet.IPv6 {
		return inet.IPv6
	}
	return inet.IPv4
}

// Every rule the iptables dataplane renders, for every variant of the corpus, is in the form
// iptables-save prints (netfilter.Canonical, which Apply's validation runs).
func TestRulesAreCanonical(t *testing.T) {
	for _, v := range proxy.RuleVariants() {
		t.Run(v.Name, func(t *testing.T) {
			n := 0
			for table, tr := range iptables.Ruleset(v.Filter) {
				for _, j := range tr.Jumps {
					n++
					if err := netfilter.Canonical(nfFamily(v.Filter.Family), j.Rule); err != nil {
						t.Errorf("table %s jump from %s: %v", table, j.Chain, err)
					}
				}
				for _, c := range tr.Chains {
					for _, rule := range c.Rules {
						n++
						if err := netfilter.Canonical(nfFamily(v.Filter.Family), rule); err != nil {
							t.Errorf("table %s chain %s: %v", table, c.Name, err)
						}
					}
				}
			}
			if n == 0 {
				t.Fatal("no rules rendered")
			}
		})
	}
}

// The whole rendered ruleset of every variant is accepted by the netfilter fake (validation,
// restore, read-back check), and applying it again writes nothing. The kernel test
// (TestRenderedRulesLoadKernel) does the same against iptables-nft and iptables-legacy.
func TestRenderedRulesApplyToFake(t *testing.T) {
	ctx := context.Background()
	for _, v := range proxy.RuleVariants() {
		t.Run(v.Name, func(t *testing.T) {
			rs := iptables.Ruleset(v.Filter)
			nf := netfiltertest.NewFake(nfFamily(v.Filter.Family))
			if _, err := nf.Apply(ctx, rs); err != nil {
				t.Fatalf("apply: %v", err)
			}
			res, err := nf.Apply(ctx, rs)
			if err != nil || res.Changed() {
				t.Fatalf("second apply: changed %v (%v), err %v", res.Changed(), res.Restored, err)
			}
		})
	}
}

// The same test nodes rendered by the nftables dataplane: the chains of table ip/ip6 kipvs.
func TestNFTRulesGolden(t *testing.T) {
	for _, tc := range proxy.RulesGoldenCases() {
		t.Run(tc.Name, func(t *testing.T) {
			p := nftables.New(nfttest.New(tc.Filter.Family))
			golden.Check(t, "nft-rules-"+tc.Name+".golden", p.Rules(tc.Filter).String())
		})
	}
}

// variantsByNode groups the corpus's variants by node (the families of one dual-stack node
// together), the nodes in corpus order.
func variantsByNode() (map[string][]proxy.NamedFilter, []string) {
	nodes := map[string][]proxy.NamedFilter{}
	var order []string
	for _, v := range proxy.RuleVariants() {
		if nodes[v.Node] == nil {
			order = append(order, v.Node)
		}
		nodes[v.Node] = append(nodes[v.Node], v)
	}
	return nodes, order
}
