package iptables

import (
	"fmt"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/proxy"
)

// setRule describes one rule that exists only while its set has members.
type setRule struct {
	set                    proxy.Set
	table                  netfilter.Table
	from, to, match, proto string
}

// Ruleset returns the iptables rules f asks for: the content of every chain kipvs owns in
// f's family and the jumps into them from the built-in chains, as upstream kube-proxy's IPVS
// mode writes them. Rules are iptables arguments after "-A CHAIN" in the canonical form
// iptables-save prints (netfilter.Canonical), so a read-back compares equal.
func Ruleset(f *proxy.Filter) netfilter.Ruleset {
	name := func(s proxy.Set) string { return SetName(f.Family, s) }
	matchComment := func(s proxy.Set) string { return "-m comment --comment " + netfilter.Quote(comment(s)) }
	mark := fmt.Sprintf("0x%x", f.MasqueradeMark)

	rules := map[netfilter.Table]map[string][]string{netfilter.TableNAT: {}, netfilter.TableFilter: {}}
	add := func(table netfilter.Table, chain, rule string) {
		rules[table][chain] = append(rules[table][chain], rule)
	}
	nat, filter := netfilter.TableNAT, netfilter.TableFilter

	lo := "127.0.0.0/8"
	if f.Family == inet.IPv6 {
		lo = "::1/128"
	}
	add(nat, ipvsmode.ChainServices, "-s "+lo+" -j RETURN")

	for _, r := range []setRule{
		{proxy.SetLoopBack, nat, ipvsmode.ChainPostrouting, "MASQUERADE", "dst,dst,src", ""},
		{proxy.SetLoadBalancer, nat, ipvsmode.ChainServices, ipvsmode.ChainLoadBalancer, "dst,dst", ""},
		{proxy.SetLoadBalancerLocal, nat, ipvsmode.ChainLoadBalancer, "RETURN", "dst,dst", ""},
		{proxy.SetNodePortLocalTCP, nat, ipvsmode.ChainNodePort, "RETURN", "dst", "tcp"},
		{proxy.SetNodePortTCP, nat, ipvsmode.ChainNodePort, ipvsmode.ChainMarkMasq, "dst", "tcp"},
		{proxy.SetNodePortLocalUDP, nat, ipvsmode.ChainNodePort, "RETURN", "dst", "udp"},
		{proxy.SetNodePortUDP, nat, ipvsmode.ChainNodePort, ipvsmode.ChainMarkMasq, "dst", "udp"},
		{proxy.SetNodePortLocalSCTP, nat, ipvsmode.ChainNodePort, "RETURN", "dst,dst", "sctp"},
		{proxy.SetNodePortSCTP, nat, ipvsmode.ChainNodePort, ipvsmode.ChainMarkMasq, "dst,dst", "sctp"},
		{proxy.SetLoadBalancerFW, filter, ipvsmode.ChainProxyFirewall, ipvsmode.ChainSourceRangesFirewall, "dst,dst", ""},
		{proxy.SetLoadBalancerSourceNet, filter, ipvsmode.ChainSourceRangesFirewall, "RETURN", "dst,dst,src", ""},
		{proxy.SetLoadBalancerSourceIP, filter, ipvsmode.ChainSourceRangesFirewall, "RETURN", "dst,dst,src", ""},
	} {
		if !f.HasMembers(r.set) {
			continue
		}
		rule := ""
		if r.proto != "" {
			rule = "-p " + r.proto + " "
		}
		rule += matchComment(r.set) + " -m set --match-set " + name(r.set) + " " + r.match + " -j " + r.to
		add(r.table, r.from, rule)
	}

	if f.HasMembers(proxy.SetClusterIP) {
		match := matchComment(proxy.SetClusterIP) + " -m set --match-set " + name(proxy.SetClusterIP)
		det := f.LocalDetector
		switch {
		case f.MasqueradeAll:
			add(nat, ipvsmode.ChainServices, match+" dst,dst -j "+ipvsmode.ChainMarkMasq)
		case det.Active():
			// Traffic to a VIP that does not come from a local pod is masqueraded, so
			// replies come back through this node. Node-originated traffic picks the
			// VIP itself as source (it is local on kube-ipvs0), which is not a pod
			// address, so it is caught here too.
			add(nat, ipvsmode.ChainServices, notLocal(det)+" "+match+" dst,dst -j "+ipvsmode.ChainMarkMasq)
		default:
			// No way to tell pod traffic apart: masquerade at least node-originated
			// connections, whose source is the VIP itself (seed-001's failure).
			add(nat, ipvsmode.ChainServices, match+" src,dst -j "+ipvsmode.ChainMarkMasq)
		}
	}

	externalAccept := func(s proxy.Set) {
		m := matchComment(s) + " -m set --match-set " + name(s) + " dst,dst"
		add(nat, ipvsmode.ChainServices, m+" -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT")
		add(nat, ipvsmode.ChainServices, m+" -m addrtype --dst-type LOCAL -j ACCEPT")
	}
	if f.HasMembers(proxy.SetExternalIP) {
		add(nat, ipvsmode.ChainServices, matchComment(proxy.SetExternalIP)+" -m set --match-set "+name(proxy.SetExternalIP)+" dst,dst -j "+ipvsmode.ChainMarkMasq)
		externalAccept(proxy.SetExternalIP)
	}
	if f.HasMembers(proxy.SetExternalIPLocal) {
		externalAccept(proxy.SetExternalIPLocal)
	}
	add(nat, ipvsmode.ChainServices, "-m addrtype --dst-type LOCAL -j "+ipvsmode.ChainNodePort)
	add(nat, ipvsmode.ChainLoadBalancer, "-j "+ipvsmode.ChainMarkMasq)
	add(filter, ipvsmode.ChainSourceRangesFirewall, "-j DROP")
	for _, k := range f.OutFilter {
		// iptables-save prints the source as a prefix, --vaddr as a bare address, and the
		// ipvs match's options as --vproto --vaddr --vport.
		add(filter, ipvsmode.ChainIPVSOutFilter, fmt.Sprintf("-s %s -m ipvs --vproto %d --vaddr %s --vport %d -j DROP",
			hostCIDR(k.Address.String(), f.Family), k.Protocol, k.Address, k.Port))
	}
	for _, s := range []proxy.Set{proxy.SetClusterIP, proxy.SetLoadBalancer} {
		if f.HasMembers(s) {
			add(nat, ipvsmode.ChainServices, "-m set --match-set "+name(s)+" dst,dst -j ACCEPT")
		}
	}

	add(filter, ipvsmode.ChainForward, "-m comment --comment \"kubernetes forwarding rules\" -m mark --mark "+mark+"/"+mark+" -j ACCEPT")
	add(filter, ipvsmode.ChainForward, "-m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
	add(filter, ipvsmode.ChainNodePort, matchComment(proxy.SetHealthCheckNodePort)+" -m set --match-set "+name(proxy.SetHealthCheckNodePort)+" dst -j ACCEPT")
	for _, s := range []proxy.Set{proxy.SetLoadBalancer, proxy.SetClusterIP, proxy.SetExternalIP, proxy.SetExternalIPLocal} {
		add(filter, ipvsmode.ChainIPVSFilter, "-m set --match-set "+name(s)+" dst,dst -j RETURN")
	}
	add(filter, ipvsmode.ChainIPVSFilter, "-m set --match-set "+name(proxy.SetHealthCheckNodePort)+" dst -j RETURN")
	reject := "icmp-port-unreachable"
	if f.Family == inet.IPv6 {
		reject = "icmp6-port-unreachable"
	}
	add(filter, ipvsmode.ChainIPVSFilter, "-m conntrack --ctstate NEW -m set --match-set "+name(proxy.SetIPVSIPs)+" dst -j REJECT --reject-with "+reject)

	add(nat, ipvsmode.ChainPostrouting, "-m mark ! --mark "+mark+"/"+mark+" -j RETURN")
	add(nat, ipvsmode.ChainPostrouting, "-j MARK --set-xmark "+mark+"/0x0")
	masq := "-m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE"
	if f.MasqueradeRandomFully {
		masq += " --random-fully" // iptables-save prints the target's option after it
	}
	add(nat, ipvsmode.ChainPostrouting, masq)
	add(nat, ipvsmode.ChainMarkMasq, "-j MARK --set-xmark "+mark+"/"+mark)

	chains := func(table netfilter.Table, names ...string) []netfilter.Chain {
		out := make([]netfilter.Chain, 0, len(names))
		for _, n := range names {
			out = append(out, netfilter.Chain{Name: n, Rules: rules[table][n]})
		}
		return out
	}
	jump := func(from, to, comment string) netfilter.Jump {
		return netfilter.Jump{Chain: from, Rule: "-m comment --comment " + netfilter.Quote(comment) + " -j " + to}
	}
	return netfilter.Ruleset{
		nat: {
			Chains: chains(nat, ipvsmode.ChainServices, ipvsmode.ChainPostrouting, ipvsmode.ChainNodePort, ipvsmode.ChainLoadBalancer, ipvsmode.ChainMarkMasq),
			Jumps: []netfilter.Jump{
				jump("OUTPUT", ipvsmode.ChainServices, "kubernetes service portals"),
				jump("PREROUTING", ipvsmode.ChainServices, "kubernetes service portals"),
				jump("POSTROUTING", ipvsmode.ChainPostrouting, "kubernetes postrouting rules"),
			},
		},
		filter: {
			Chains: chains(filter, ipvsmode.ChainForward, ipvsmode.ChainNodePort, ipvsmode.ChainProxyFirewall, ipvsmode.ChainSourceRangesFirewall,
				ipvsmode.ChainIPVSFilter, ipvsmode.ChainIPVSOutFilter),
			// Final order within each built-in chain, as upstream's prepends leave it on a
			// fresh node.
			Jumps: []netfilter.Jump{
				jump("INPUT", ipvsmode.ChainIPVSFilter, "kubernetes ipvs access filter"),
				jump("INPUT", ipvsmode.ChainProxyFirewall, "kube-proxy firewall rules"),
				jump("INPUT", ipvsmode.ChainNodePort, "kubernetes health check rules"),
				jump("FORWARD", ipvsmode.ChainProxyFirewall, "kube-proxy firewall rules"),
				jump("FORWARD", ipvsmode.ChainForward, "kubernetes forwarding rules"),
				jump("OUTPUT", ipvsmode.ChainIPVSOutFilter, "kubernetes ipvs access filter"),
			},
		},
	}
}

// Render returns a ruleset as text, one "-A CHAIN rule" line per rule: per table (nat, then
// filter) its chains, its jumps, then each chain's rules in order. For golden tests.
func Render(rs netfilter.Ruleset) string {
	var b []byte
	for _, table := range []netfilter.Table{netfilter.TableNAT, netfilter.TableFilter} {
		t, ok := rs[table]
		if !ok {
			continue
		}
		b = fmt.Appendf(b, "*%s\n", table)
		for _, c := range t.Chains {
			b = fmt.Appendf(b, ":%s\n", c.Name)
		}
		for _, j := range t.Jumps {
			b = fmt.Appendf(b, "-A %s %s\n", j.Chain, j.Rule)
		}
		for _, c := range t.Chains {
			for _, rule := range c.Rules {
				b = fmt.Appendf(b, "-A %s %s\n", c.Name, rule)
			}
		}
	}
	return string(b)
}

// notLocal returns the match meaning "not from a local pod" for an active detector. The
// CIDR modes use the family's first pod CIDR: Kubernetes allows one per family.
func notLocal(d proxy.LocalDetector) string {
	switch d.Mode {
	case proxy.LocalClusterCIDR, proxy.LocalNodeCIDR:
		return "! -s " + d.CIDRs[0].String()
	case proxy.LocalBridgeInterface:
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
