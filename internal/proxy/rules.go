package proxy

import (
	"fmt"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/iptsave"
	"github.com/kipvs/kipvs/internal/ipvsmode"
)

// Rules is the desired content of every chain kipvs owns in one family, and the jumps into
// them from the built-in chains. Rule strings are iptables arguments after "-A CHAIN", in
// the canonical form iptables-save prints, so a read-back compares equal.
type Rules struct {
	Family inet.Family
	Tables []TableRules // nat, then filter
}

// TableRules is one table's part of Rules.
type TableRules struct {
	Table  string
	Chains []ChainRules // owned chains, in creation order
	Jumps  []Jump       // jumps from built-in chains, in their order within each chain
}

// ChainRules is one owned chain and its rules.
type ChainRules struct {
	Name  string
	Rules []string
}

// Jump is a rule in a built-in chain that jumps to one of ours. A missing jump goes right
// after the one listed before it in the same chain, or at the top, as upstream's prepends.
type Jump struct {
	From    string
	To      string
	Comment string
}

// Rule returns the jump's rule arguments in canonical form.
func (j Jump) Rule() string {
	return "-m comment --comment " + quoteComment(j.Comment) + " -j " + j.To
}

// Render returns the whole ruleset as text (one "-A CHAIN rule" line per rule, tables and
// chains in order), for golden tests and change detection.
func (r *Rules) Render() string {
	var b strings.Builder
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "*%s\n", t.Table)
		for _, c := range t.Chains {
			fmt.Fprintf(&b, ":%s\n", c.Name)
		}
		for _, j := range t.Jumps {
			fmt.Fprintf(&b, "-A %s %s\n", j.From, j.Rule())
		}
		for _, c := range t.Chains {
			for _, rule := range c.Rules {
				fmt.Fprintf(&b, "-A %s %s\n", c.Name, rule)
			}
		}
	}
	return b.String()
}

// quoteComment quotes a comment exactly as iptables-save prints it (iptsave.Quote, the form
// netfilter.Canonical checks).
func quoteComment(c string) string { return iptsave.Quote(c) }

// setRule describes one rule that exists only while its set is non-empty.
type setRule struct {
	set, table, from, to, match, proto string
}

// BuildRules returns the desired iptables rules for a family, given which sets are
// non-empty and which LoadBalancer addresses the node itself must not reach.
func BuildRules(o *Options, d *Desired) *Rules {
	f := o.Family
	name := func(base string) string { return SetName(f, base) }
	nonEmpty := func(base string) bool { return d.SetSize(name(base)) > 0 }
	comment := func(base string) string {
		for _, s := range setTable {
			if s.base == base {
				return quoteComment(s.comment)
			}
		}
		return quoteComment(base)
	}
	mark := fmt.Sprintf("0x%x", o.masqMark())

	nat, filter := map[string][]string{}, map[string][]string{}
	add := func(table, chain, rule string) {
		if table == "filter" {
			filter[chain] = append(filter[chain], rule)
		} else {
			nat[chain] = append(nat[chain], rule)
		}
	}

	lo := "127.0.0.0/8"
	if f == inet.IPv6 {
		lo = "::1/128"
	}
	add("nat", ipvsmode.ChainServices, "-s "+lo+" -j RETURN")

	for _, r := range []setRule{
		{SetLoopBack, "nat", ipvsmode.ChainPostrouting, "MASQUERADE", "dst,dst,src", ""},
		{SetLoadBalancer, "nat", ipvsmode.ChainServices, ipvsmode.ChainLoadBalancer, "dst,dst", ""},
		{SetLoadBalancerLocal, "nat", ipvsmode.ChainLoadBalancer, "RETURN", "dst,dst", ""},
		{SetNodePortLocalTCP, "nat", ipvsmode.ChainNodePort, "RETURN", "dst", "tcp"},
		{SetNodePortTCP, "nat", ipvsmode.ChainNodePort, ipvsmode.ChainMarkMasq, "dst", "tcp"},
		{SetNodePortLocalUDP, "nat", ipvsmode.ChainNodePort, "RETURN", "dst", "udp"},
		{SetNodePortUDP, "nat", ipvsmode.ChainNodePort, ipvsmode.ChainMarkMasq, "dst", "udp"},
		{SetNodePortLocalSCTP, "nat", ipvsmode.ChainNodePort, "RETURN", "dst,dst", "sctp"},
		{SetNodePortSCTP, "nat", ipvsmode.ChainNodePort, ipvsmode.ChainMarkMasq, "dst,dst", "sctp"},
		{SetLoadBalancerFW, "filter", ipvsmode.ChainProxyFirewall, ipvsmode.ChainSourceRangesFirewall, "dst,dst", ""},
		{SetLoadBalancerSourceNet, "filter", ipvsmode.ChainSourceRangesFirewall, "RETURN", "dst,dst,src", ""},
		{SetLoadBalancerSourceIP, "filter", ipvsmode.ChainSourceRangesFirewall, "RETURN", "dst,dst,src", ""},
	} {
		if !nonEmpty(r.set) {
			continue
		}
		rule := ""
		if r.proto != "" {
			rule = "-p " + r.proto + " "
		}
		rule += "-m comment --comment " + comment(r.set) + " -m set --match-set " + name(r.set) + " " + r.match + " -j " + r.to
		add(r.table, r.from, rule)
	}

	if nonEmpty(SetClusterIP) {
		match := "-m comment --comment " + comment(SetClusterIP) + " -m set --match-set " + name(SetClusterIP)
		det := o.LocalDetector
		switch {
		case o.MasqueradeAll:
			add("nat", ipvsmode.ChainServices, match+" dst,dst -j "+ipvsmode.ChainMarkMasq)
		case det.Active():
			// Traffic to a VIP that does not come from a local pod is masqueraded, so
			// replies come back through this node. Node-originated traffic picks the
			// VIP itself as source (it is local on kube-ipvs0), which is not a pod
			// address, so it is caught here too.
			add("nat", ipvsmode.ChainServices, notLocal(det)+" "+match+" dst,dst -j "+ipvsmode.ChainMarkMasq)
		default:
			// No way to tell pod traffic apart: masquerade at least node-originated
			// connections, whose source is the VIP itself (seed-001's failure).
			add("nat", ipvsmode.ChainServices, match+" src,dst -j "+ipvsmode.ChainMarkMasq)
		}
	}

	externalAccept := func(base string) {
		m := "-m comment --comment " + comment(base) + " -m set --match-set " + name(base) + " dst,dst"
		add("nat", ipvsmode.ChainServices, m+" -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT")
		add("nat", ipvsmode.ChainServices, m+" -m addrtype --dst-type LOCAL -j ACCEPT")
	}
	if nonEmpty(SetExternalIP) {
		add("nat", ipvsmode.ChainServices, "-m comment --comment "+comment(SetExternalIP)+" -m set --match-set "+name(SetExternalIP)+" dst,dst -j "+ipvsmode.ChainMarkMasq)
		externalAccept(SetExternalIP)
	}
	if nonEmpty(SetExternalIPLocal) {
		externalAccept(SetExternalIPLocal)
	}
	add("nat", ipvsmode.ChainServices, "-m addrtype --dst-type LOCAL -j "+ipvsmode.ChainNodePort)
	add("nat", ipvsmode.ChainLoadBalancer, "-j "+ipvsmode.ChainMarkMasq)
	add("filter", ipvsmode.ChainSourceRangesFirewall, "-j DROP")
	for _, k := range d.OutFilter() {
		// iptables-save prints the source as a prefix, --vaddr as a bare address, and the
		// ipvs match's options as --vproto --vaddr --vport.
		add("filter", ipvsmode.ChainIPVSOutFilter, fmt.Sprintf("-s %s -m ipvs --vproto %d --vaddr %s --vport %d -j DROP",
			hostCIDR(k.Address.String(), f), k.Protocol, k.Address, k.Port))
	}
	for _, base := range []string{SetClusterIP, SetLoadBalancer} {
		if nonEmpty(base) {
			add("nat", ipvsmode.ChainServices, "-m set --match-set "+name(base)+" dst,dst -j ACCEPT")
		}
	}

	add("filter", ipvsmode.ChainForward, "-m comment --comment \"kubernetes forwarding rules\" -m mark --mark "+mark+"/"+mark+" -j ACCEPT")
	add("filter", ipvsmode.ChainForward, "-m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
	add("filter", ipvsmode.ChainNodePort, "-m comment --comment "+comment(SetHealthCheckNodePort)+" -m set --match-set "+name(SetHealthCheckNodePort)+" dst -j ACCEPT")
	for _, base := range []string{SetLoadBalancer, SetClusterIP, SetExternalIP, SetExternalIPLocal} {
		add("filter", ipvsmode.ChainIPVSFilter, "-m set --match-set "+name(base)+" dst,dst -j RETURN")
	}
	add("filter", ipvsmode.ChainIPVSFilter, "-m set --match-set "+name(SetHealthCheckNodePort)+" dst -j RETURN")
	reject := "icmp-port-unreachable"
	if f == inet.IPv6 {
		reject = "icmp6-port-unreachable"
	}
	add("filter", ipvsmode.ChainIPVSFilter, "-m conntrack --ctstate NEW -m set --match-set "+name(SetIPVSIPs)+" dst -j REJECT --reject-with "+reject)

	add("nat", ipvsmode.ChainPostrouting, "-m mark ! --mark "+mark+"/"+mark+" -j RETURN")
	add("nat", ipvsmode.ChainPostrouting, "-j MARK --set-xmark "+mark+"/0x0")
	masq := "-m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE"
	if o.MasqueradeRandomFully {
		masq += " --random-fully" // iptables-save prints the target's option after it
	}
	add("nat", ipvsmode.ChainPostrouting, masq)
	add("nat", ipvsmode.ChainMarkMasq, "-j MARK --set-xmark "+mark+"/"+mark)

	chains := func(m map[string][]string, names ...string) []ChainRules {
		out := make([]ChainRules, 0, len(names))
		for _, n := range names {
			out = append(out, ChainRules{Name: n, Rules: m[n]})
		}
		return out
	}
	return &Rules{Family: f, Tables: []TableRules{
		{
			Table:  "nat",
			Chains: chains(nat, ipvsmode.ChainServices, ipvsmode.ChainPostrouting, ipvsmode.ChainNodePort, ipvsmode.ChainLoadBalancer, ipvsmode.ChainMarkMasq),
			Jumps: []Jump{
				{"OUTPUT", ipvsmode.ChainServices, "kubernetes service portals"},
				{"PREROUTING", ipvsmode.ChainServices, "kubernetes service portals"},
				{"POSTROUTING", ipvsmode.ChainPostrouting, "kubernetes postrouting rules"},
			},
		},
		{
			Table: "filter",
			Chains: chains(filter, ipvsmode.ChainForward, ipvsmode.ChainNodePort, ipvsmode.ChainProxyFirewall, ipvsmode.ChainSourceRangesFirewall,
				ipvsmode.ChainIPVSFilter, ipvsmode.ChainIPVSOutFilter),
			// Final order within each built-in chain, as upstream's prepends leave it on a
			// fresh node.
			Jumps: []Jump{
				{"INPUT", ipvsmode.ChainIPVSFilter, "kubernetes ipvs access filter"},
				{"INPUT", ipvsmode.ChainProxyFirewall, "kube-proxy firewall rules"},
				{"INPUT", ipvsmode.ChainNodePort, "kubernetes health check rules"},
				{"FORWARD", ipvsmode.ChainProxyFirewall, "kube-proxy firewall rules"},
				{"FORWARD", ipvsmode.ChainForward, "kubernetes forwarding rules"},
				{"OUTPUT", ipvsmode.ChainIPVSOutFilter, "kubernetes ipvs access filter"},
			},
		},
	}}
}

// notLocal returns the match meaning "not from a local pod" for an active detector. The
// CIDR modes use the family's first pod CIDR: Kubernetes allows one per family.
func notLocal(d LocalDetector) string {
	switch d.Mode {
	case LocalClusterCIDR, LocalNodeCIDR:
		return "! -s " + d.CIDRs[0].String()
	case LocalBridgeInterface:
		return "! -i " + d.Interface
	default:
		return "! -i " + d.Interface + "+"
	}
}

func hostCIDR(ip string, f inet.Family) string {
	if f == inet.IPv6 {
		return ip + "/128"
	}
	return ip + "/32"
}
