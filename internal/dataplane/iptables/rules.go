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
	b := &ruleBuilder{
		f:     f,
		mark:  fmt.Sprintf("0x%x", f.MasqueradeMark),
		rules: map[netfilter.Table]map[string][]string{netfilter.TableNAT: {}, netfilter.TableFilter: {}},
	}
	b.loopbackReturn()
	b.setRules()
	b.clusterIPMasquerade()
	b.externalIPs()
	b.chainDefaults()
	b.outFilter()
	b.acceptServiceSets()
	b.forwardAndHealthCheck()
	b.ipvsFilter()
	b.postrouting()
	return netfilter.Ruleset{netfilter.TableNAT: b.natTable(), netfilter.TableFilter: b.filterTable()}
}

// ruleBuilder collects the rules of one Ruleset, per table and chain in the order added.
type ruleBuilder struct {
	f *proxy.Filter
	// mark is the masquerade mark as iptables-save prints it.
	mark  string
	rules map[netfilter.Table]map[string][]string
}

func (b *ruleBuilder) add(table netfilter.Table, chain, rule string) {
	b.rules[table][chain] = append(b.rules[table][chain], rule)
}

// name is the ipset name of s in the builder's family.
func (b *ruleBuilder) name(s proxy.Set) string { return SetName(b.f.Family, s) }

// matchSet is the comment and set match of s, without the set's match directions.
func (b *ruleBuilder) matchSet(s proxy.Set) string {
	return "-m comment --comment " + netfilter.Quote(s.Comment()) + " -m set --match-set " + b.name(s)
}

// loopbackReturn leaves loopback sources alone: the first rule of the services chain.
func (b *ruleBuilder) loopbackReturn() {
	lo := "127.0.0.0/8"
	if b.f.Family == inet.IPv6 {
		lo = "::1/128"
	}
	b.add(netfilter.TableNAT, ipvsmode.ChainServices, "-s "+lo+" -j RETURN")
}

// setRules adds the rules that exist only while their set has members.
func (b *ruleBuilder) setRules() {
	nat, filter := netfilter.TableNAT, netfilter.TableFilter
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
		if !b.f.HasMembers(r.set) {
			continue
		}
		rule := ""
		if r.proto != "" {
			rule = "-p " + r.proto + " "
		}
		rule += b.matchSet(r.set) + " " + r.match + " -j " + r.to
		b.add(r.table, r.from, rule)
	}
}

// clusterIPMasquerade marks for masquerading the cluster IP traffic that needs it.
func (b *ruleBuilder) clusterIPMasquerade() {
	if !b.f.HasMembers(proxy.SetClusterIP) {
		return
	}
	match := b.matchSet(proxy.SetClusterIP)
	det := b.f.LocalDetector
	switch {
	case b.f.MasqueradeAll:
		b.add(netfilter.TableNAT, ipvsmode.ChainServices, match+" dst,dst -j "+ipvsmode.ChainMarkMasq)
	case det.Active():
		// Traffic to a VIP that does not come from a local pod is masqueraded, so
		// replies come back through this node. Node-originated traffic picks the
		// VIP itself as source (it is local on kube-ipvs0), which is not a pod
		// address, so it is caught here too.
		b.add(netfilter.TableNAT, ipvsmode.ChainServices, notLocal(det)+" "+match+" dst,dst -j "+ipvsmode.ChainMarkMasq)
	default:
		// No way to tell pod traffic apart: masquerade at least node-originated
		// connections, whose source is the VIP itself (seed-001's failure).
		b.add(netfilter.TableNAT, ipvsmode.ChainServices, match+" src,dst -j "+ipvsmode.ChainMarkMasq)
	}
}

// externalIPs marks external IP traffic for masquerading and accepts it when it comes
// from outside or is for a local address.
func (b *ruleBuilder) externalIPs() {
	if b.f.HasMembers(proxy.SetExternalIP) {
		b.add(netfilter.TableNAT, ipvsmode.ChainServices, b.matchSet(proxy.SetExternalIP)+" dst,dst -j "+ipvsmode.ChainMarkMasq)
		b.externalAccept(proxy.SetExternalIP)
	}
	if b.f.HasMembers(proxy.SetExternalIPLocal) {
		b.externalAccept(proxy.SetExternalIPLocal)
	}
}

func (b *ruleBuilder) externalAccept(s proxy.Set) {
	m := b.matchSet(s) + " dst,dst"
	b.add(netfilter.TableNAT, ipvsmode.ChainServices, m+" -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT")
	b.add(netfilter.TableNAT, ipvsmode.ChainServices, m+" -m addrtype --dst-type LOCAL -j ACCEPT")
}

// chainDefaults adds the rules that are always there: the node port jump from the
// services chain and the last rules of the load balancer and source ranges chains.
func (b *ruleBuilder) chainDefaults() {
	b.add(netfilter.TableNAT, ipvsmode.ChainServices, "-m addrtype --dst-type LOCAL -j "+ipvsmode.ChainNodePort)
	b.add(netfilter.TableNAT, ipvsmode.ChainLoadBalancer, "-j "+ipvsmode.ChainMarkMasq)
	b.add(netfilter.TableFilter, ipvsmode.ChainSourceRangesFirewall, "-j DROP")
}

// outFilter drops the node's own connections to the virtual servers of f.OutFilter.
func (b *ruleBuilder) outFilter() {
	for _, k := range b.f.OutFilter {
		// iptables-save prints the source as a prefix, --vaddr as a bare address, and the
		// ipvs match's options as --vproto --vaddr --vport.
		b.add(netfilter.TableFilter, ipvsmode.ChainIPVSOutFilter, fmt.Sprintf("-s %s -m ipvs --vproto %d --vaddr %s --vport %d -j DROP",
			hostCIDR(k.Address.String(), b.f.Family), k.Protocol, k.Address, k.Port))
	}
}

// acceptServiceSets accepts cluster IP and load balancer traffic at the end of the
// services chain.
func (b *ruleBuilder) acceptServiceSets() {
	for _, s := range []proxy.Set{proxy.SetClusterIP, proxy.SetLoadBalancer} {
		if b.f.HasMembers(s) {
			b.add(netfilter.TableNAT, ipvsmode.ChainServices, "-m set --match-set "+b.name(s)+" dst,dst -j ACCEPT")
		}
	}
}

// forwardAndHealthCheck fills the filter table's forward chain and accepts health check
// node ports.
func (b *ruleBuilder) forwardAndHealthCheck() {
	b.add(netfilter.TableFilter, ipvsmode.ChainForward, "-m comment --comment \"kubernetes forwarding rules\" -m mark --mark "+b.mark+"/"+b.mark+" -j ACCEPT")
	b.add(netfilter.TableFilter, ipvsmode.ChainForward, "-m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
	b.add(netfilter.TableFilter, ipvsmode.ChainNodePort, b.matchSet(proxy.SetHealthCheckNodePort)+" dst -j ACCEPT")
}

// ipvsFilter rejects new connections to an address IPVS holds unless they are for one of
// its services.
func (b *ruleBuilder) ipvsFilter() {
	for _, s := range []proxy.Set{proxy.SetLoadBalancer, proxy.SetClusterIP, proxy.SetExternalIP, proxy.SetExternalIPLocal} {
		b.add(netfilter.TableFilter, ipvsmode.ChainIPVSFilter, "-m set --match-set "+b.name(s)+" dst,dst -j RETURN")
	}
	b.add(netfilter.TableFilter, ipvsmode.ChainIPVSFilter, "-m set --match-set "+b.name(proxy.SetHealthCheckNodePort)+" dst -j RETURN")
	reject := "icmp-port-unreachable"
	if b.f.Family == inet.IPv6 {
		reject = "icmp6-port-unreachable"
	}
	b.add(netfilter.TableFilter, ipvsmode.ChainIPVSFilter, "-m conntrack --ctstate NEW -m set --match-set "+b.name(proxy.SetIPVSIPs)+" dst -j REJECT --reject-with "+reject)
}

// postrouting masquerades marked traffic and fills the mark-for-masquerade chain.
func (b *ruleBuilder) postrouting() {
	b.add(netfilter.TableNAT, ipvsmode.ChainPostrouting, "-m mark ! --mark "+b.mark+"/"+b.mark+" -j RETURN")
	b.add(netfilter.TableNAT, ipvsmode.ChainPostrouting, "-j MARK --set-xmark "+b.mark+"/0x0")
	masq := "-m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE"
	if b.f.MasqueradeRandomFully {
		masq += " --random-fully" // iptables-save prints the target's option after it
	}
	b.add(netfilter.TableNAT, ipvsmode.ChainPostrouting, masq)
	b.add(netfilter.TableNAT, ipvsmode.ChainMarkMasq, "-j MARK --set-xmark "+b.mark+"/"+b.mark)
}

// chains returns the named chains of table with their rules, in the order named.
func (b *ruleBuilder) chains(table netfilter.Table, names ...string) []netfilter.Chain {
	out := make([]netfilter.Chain, 0, len(names))
	for _, n := range names {
		out = append(out, netfilter.Chain{Name: n, Rules: b.rules[table][n]})
	}
	return out
}

func jump(from, to, comment string) netfilter.Jump {
	return netfilter.Jump{Chain: from, Rule: "-m comment --comment " + netfilter.Quote(comment) + " -j " + to}
}

// natTable is the nat table's chains and the jumps into them.
func (b *ruleBuilder) natTable() netfilter.TableRules {
	return netfilter.TableRules{
		Chains: b.chains(netfilter.TableNAT, ipvsmode.ChainServices, ipvsmode.ChainPostrouting, ipvsmode.ChainNodePort,
			ipvsmode.ChainLoadBalancer, ipvsmode.ChainMarkMasq),
		Jumps: []netfilter.Jump{
			jump("OUTPUT", ipvsmode.ChainServices, "kubernetes service portals"),
			jump("PREROUTING", ipvsmode.ChainServices, "kubernetes service portals"),
			jump("POSTROUTING", ipvsmode.ChainPostrouting, "kubernetes postrouting rules"),
		},
	}
}

// filterTable is the filter table's chains and the jumps into them.
func (b *ruleBuilder) filterTable() netfilter.TableRules {
	return netfilter.TableRules{
		Chains: b.chains(netfilter.TableFilter, ipvsmode.ChainForward, ipvsmode.ChainNodePort, ipvsmode.ChainProxyFirewall,
			ipvsmode.ChainSourceRangesFirewall, ipvsmode.ChainIPVSFilter, ipvsmode.ChainIPVSOutFilter),
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
