package proxy

import (
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/internal/netfilter"
)

// quoteComment must print a comment exactly as iptables-save does (xtables_save_string): bare
// when made only of letters, digits, underscores and dashes, otherwise in double quotes with
// every double quote, backslash and single quote escaped by a backslash. Checked against
// iptables 1.8.9, nft and legacy.
func TestQuoteComment(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"KUBE-NODE-PORT", "KUBE-NODE-PORT"},
		{"under_score-9", "under_score-9"},
		{"", `""`},
		{"kubernetes service portals", `"kubernetes service portals"`},
		{"a.b", `"a.b"`},
		{"ip:port", `"ip:port"`},
		{"x=y+z/1", `"x=y+z/1"`},
		{"a+b=c,d/e:f", `"a+b=c,d/e:f"`},
		{"has space", `"has space"`},
		{`say "hi"`, `"say \"hi\""`},
		{`back\slash`, `"back\\slash"`},
		{"it's", `"it\'s"`},
		{"Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'",
			`"Kubernetes nodeport SCTP port for masquerade purpose with type \'hash ip:port\'"`},
		{"Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
			`"Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type \'hash ip:port\'"`},
	} {
		if got := quoteComment(tc.in); got != tc.want {
			t.Errorf("quoteComment(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if nf := netfilter.Quote(tc.in); nf != tc.want {
			t.Errorf("netfilter.Quote(%q) = %s, want %s (the two must agree)", tc.in, nf, tc.want)
		}
	}
}

// The set comments stay upstream kube-proxy's text, single quotes included.
func TestSetCommentsAreUpstreams(t *testing.T) {
	want := map[string]string{
		SetNodePortSCTP:      "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'",
		SetNodePortLocalSCTP: "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
	}
	for _, s := range Sets(IPv4) {
		if w, ok := want[s.Base]; ok && s.Comment != w {
			t.Errorf("set %s comment %q, want upstream's %q", s.Name, s.Comment, w)
		}
	}
}

// Every rule BuildRules renders, for every option variant and both families, is in the form
// iptables-save prints (netfilter.Canonical, which Apply's validation runs), so the whole
// ruleset is accepted and a read-back compares equal.
func TestRulesAreCanonical(t *testing.T) {
	for _, tc := range ruleVariants() {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			nf := netfilter.IPv4
			if o.Family == IPv6 {
				nf = netfilter.IPv6
			}
			r := BuildRules(o, tc.desired)
			n := 0
			for _, tr := range r.Tables {
				for _, j := range tr.Jumps {
					n++
					if err := netfilter.Canonical(nf, j.Rule()); err != nil {
						t.Errorf("table %s jump from %s: %v", tr.Table, j.From, err)
					}
				}
				for _, c := range tr.Chains {
					for _, rule := range c.Rules {
						n++
						if err := netfilter.Canonical(nf, rule); err != nil {
							t.Errorf("table %s chain %s: %v", tr.Table, c.Name, err)
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

type ruleVariant struct {
	name    string
	opts    *Options
	desired *Desired
}

// ruleVariants is a corpus of nodes that together render every rule BuildRules can produce:
// every build case (SCTP node ports, ETP Local, source ranges, external IPs, health checks,
// ...) under each local-traffic detector, masqueradeAll, no node addresses, and IPv6.
func ruleVariants() []ruleVariant {
	cidr := LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	var out []ruleVariant
	for _, v := range []struct {
		name string
		mod  func(*Options)
	}{
		{"cluster-cidr", func(o *Options) { o.LocalDetector = cidr }},
		{"node-cidr", func(o *Options) {
			o.LocalDetector = LocalDetector{Mode: LocalNodeCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}
		}},
		{"bridge", func(o *Options) { o.LocalDetector = LocalDetector{Mode: LocalBridgeInterface, Interface: "cni0"} }},
		{"interface-prefix", func(o *Options) {
			o.LocalDetector = LocalDetector{Mode: LocalInterfaceNamePrefix, Interface: "veth"}
			o.MasqueradeBit = 15
		}},
		{"no-detector", func(o *Options) { o.LocalDetector = LocalDetector{Mode: LocalClusterCIDR} }},
		{"masquerade-all", func(o *Options) { o.MasqueradeAll = true }},
		{"no-node-port-addresses", func(o *Options) { o.NodePortAddresses = nil }},
	} {
		o := testOptions()
		v.mod(o)
		out = append(out, ruleVariant{v.name, o, fullDesired(o)})
	}
	o := testOptions()
	out = append(out, ruleVariant{"empty-node", o, NewDesired(IPv4)})
	for _, tc := range buildCases() {
		if tc.opts == nil {
			continue
		}
		o := testOptions()
		tc.opts(o)
		d := NewDesired(o.Family)
		d.Update(nn(tc.name), BuildService(ServiceInput{Service: tc.svc, Slices: tc.slices}, o), nil)
		out = append(out, ruleVariant{tc.name, o, d})
	}
	return out
}
