package nftables

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/proxy"
)

// The chains of kipvs's table. The base chains hook where kube-proxy's IPVS mode jumps
// from the built-in iptables chains, at the priorities of the iptables tables (nat:
// dstnat and srcnat, filter: filter); the regular chains are its KUBE-* chains.
const (
	chainNATPrerouting    = "nat-prerouting"
	chainNATOutput        = "nat-output"
	chainNATPostrouting   = "nat-postrouting"
	chainFilterInput      = "filter-input"
	chainFilterForward    = "filter-forward"
	chainFilterOutput     = "filter-output"
	chainServices         = "services"               // KUBE-SERVICES
	chainPostrouting      = "postrouting"            // KUBE-POSTROUTING
	chainNodePort         = "node-port"              // KUBE-NODE-PORT (nat)
	chainLoadBalancer     = "load-balancer"          // KUBE-LOAD-BALANCER
	chainMarkMasq         = "mark-for-masquerade"    // KUBE-MARK-MASQ
	chainForward          = "forward"                // KUBE-FORWARD
	chainHealthCheck      = "health-check"           // KUBE-NODE-PORT (filter)
	chainProxyFirewall    = "proxy-firewall"         // KUBE-PROXY-FIREWALL
	chainSourceRanges     = "source-ranges-firewall" // KUBE-SOURCE-RANGES-FIREWALL
	chainIPVSFilter       = "ipvs-filter"            // KUBE-IPVS-FILTER
	chainIPVSOutFilter    = "ipvs-out-filter"        // KUBE-IPVS-OUT-FILTER
	groupNAT, groupFilter = "nat", "filter"
)

// chainDef is one chain kipvs declares: its group (nat or filter, as the iptables tables
// its rules would live in, for the rules metrics) and, for a base chain, its hook.
type chainDef struct {
	name, group string
	base        *knftables.Chain
}

func baseChain(t knftables.BaseChainType, h knftables.BaseChainHook, p knftables.BaseChainPriority) *knftables.Chain {
	return &knftables.Chain{Type: &t, Hook: &h, Priority: &p}
}

// chainDefs lists every chain of the table, in the order they are declared.
func chainDefs() []chainDef {
	nat, filter := knftables.NATType, knftables.FilterType
	return []chainDef{
		{chainServices, groupNAT, nil},
		{chainPostrouting, groupNAT, nil},
		{chainNodePort, groupNAT, nil},
		{chainLoadBalancer, groupNAT, nil},
		{chainMarkMasq, groupNAT, nil},
		{chainForward, groupFilter, nil},
		{chainHealthCheck, groupFilter, nil},
		{chainProxyFirewall, groupFilter, nil},
		{chainSourceRanges, groupFilter, nil},
		{chainIPVSFilter, groupFilter, nil},
		{chainIPVSOutFilter, groupFilter, nil},
		{chainNATPrerouting, groupNAT, baseChain(nat, knftables.PreroutingHook, knftables.DNATPriority)},
		// nft names dstnat only at prerouting and lists it by number at output.
		{chainNATOutput, groupNAT, baseChain(nat, knftables.OutputHook, "-100")},
		{chainNATPostrouting, groupNAT, baseChain(nat, knftables.PostroutingHook, knftables.SNATPriority)},
		{chainFilterInput, groupFilter, baseChain(filter, knftables.InputHook, knftables.FilterPriority)},
		{chainFilterForward, groupFilter, baseChain(filter, knftables.ForwardHook, knftables.FilterPriority)},
		{chainFilterOutput, groupFilter, baseChain(filter, knftables.OutputHook, knftables.FilterPriority)},
	}
}

// DeclaredChains lists the chains of the table as kipvs declares them, sorted by name: each
// with its Base (hook and priority) when it is a base chain, without rules.
func DeclaredChains() []nft.Chain {
	out := make([]nft.Chain, 0, len(chainDefs()))
	for _, d := range chainDefs() {
		c := nft.Chain{Name: d.name}
		if d.base != nil {
			c.Base = nft.BaseSpec(d.base)
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b nft.Chain) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Render returns the chains f asks for, sorted by name, each rule as nft prints it.
func Render(f *proxy.Filter) []nft.Chain {
	b := &builder{f: f, ip: "ip", mark: fmt.Sprintf("0x%08x", f.MasqueradeMark), rules: map[string][]string{}}
	if f.Family == inet.IPv6 {
		b.ip = "ip6"
	}
	b.jumps()
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
	out := DeclaredChains()
	for i := range out {
		out[i].Rules = b.rules[out[i].Name]
	}
	return out
}

// builder collects the rules of one Render, per chain in the order added.
type builder struct {
	f *proxy.Filter
	// ip is the family's payload keyword ("ip", "ip6"), mark the masquerade mark as nft
	// prints it.
	ip, mark string
	rules    map[string][]string
}

func (b *builder) add(chain string, rule ...string) {
	b.rules[chain] = append(b.rules[chain], strings.Join(rule, " "))
}

func quote(comment string) string { return `comment "` + comment + `"` }

// The lookups of a set by the packet's fields, in ipset's match directions.
func (b *builder) dst(s proxy.Set) string {
	return b.ip + " daddr . meta l4proto . th dport @" + SetName(s)
}

func (b *builder) srcDst(s proxy.Set) string {
	return b.ip + " saddr . meta l4proto . th dport @" + SetName(s)
}

func (b *builder) dstSrc(s proxy.Set) string {
	return b.ip + " daddr . meta l4proto . th dport . " + b.ip + " saddr @" + SetName(s)
}

// port matches a port set: "tcp dport @set" for one protocol, any port protocol for the
// health check ports (ipset's bitmap:port matches any protocol with ports).
func portMatch(proto string, s proxy.Set) string {
	if proto == "" {
		return "meta l4proto { tcp, udp, sctp } th dport @" + SetName(s)
	}
	return proto + " dport @" + SetName(s)
}

// jumps fills the base chains: the jumps kube-proxy adds to the built-in chains.
func (b *builder) jumps() {
	b.add(chainNATPrerouting, "jump", chainServices, quote("kubernetes service portals"))
	b.add(chainNATOutput, "jump", chainServices, quote("kubernetes service portals"))
	b.add(chainNATPostrouting, "jump", chainPostrouting, quote("kubernetes postrouting rules"))
	b.add(chainFilterInput, "jump", chainIPVSFilter, quote("kubernetes ipvs access filter"))
	b.add(chainFilterInput, "jump", chainProxyFirewall, quote("kube-proxy firewall rules"))
	b.add(chainFilterInput, "jump", chainHealthCheck, quote("kubernetes health check rules"))
	b.add(chainFilterForward, "jump", chainProxyFirewall, quote("kube-proxy firewall rules"))
	b.add(chainFilterForward, "jump", chainForward, quote("kubernetes forwarding rules"))
	b.add(chainFilterOutput, "jump", chainIPVSOutFilter, quote("kubernetes ipvs access filter"))
}

// loopbackReturn leaves loopback sources alone: the first rule of the services chain.
func (b *builder) loopbackReturn() {
	lo := "127.0.0.0/8"
	if b.f.Family == inet.IPv6 {
		lo = "::1"
	}
	b.add(chainServices, b.ip, "saddr", lo, "return")
}

// setRule is one rule that exists only while its set has members.
type setRule struct {
	set         proxy.Set
	chain, verb string
	match       func(proxy.Set) string
}

// setRules adds the rules that exist only while their set has members.
func (b *builder) setRules() {
	tcp := func(s proxy.Set) string { return portMatch("tcp", s) }
	udp := func(s proxy.Set) string { return portMatch("udp", s) }
	for _, r := range []setRule{
		{proxy.SetLoopBack, chainPostrouting, "masquerade", b.dstSrc},
		{proxy.SetLoadBalancer, chainServices, "jump " + chainLoadBalancer, b.dst},
		{proxy.SetLoadBalancerLocal, chainLoadBalancer, "return", b.dst},
		{proxy.SetNodePortLocalTCP, chainNodePort, "return", tcp},
		{proxy.SetNodePortTCP, chainNodePort, "jump " + chainMarkMasq, tcp},
		{proxy.SetNodePortLocalUDP, chainNodePort, "return", udp},
		{proxy.SetNodePortUDP, chainNodePort, "jump " + chainMarkMasq, udp},
		{proxy.SetNodePortLocalSCTP, chainNodePort, "return", b.dst},
		{proxy.SetNodePortSCTP, chainNodePort, "jump " + chainMarkMasq, b.dst},
		{proxy.SetLoadBalancerFW, chainProxyFirewall, "jump " + chainSourceRanges, b.dst},
		{proxy.SetLoadBalancerSourceNet, chainSourceRanges, "return", b.dstSrc},
		{proxy.SetLoadBalancerSourceIP, chainSourceRanges, "return", b.dstSrc},
	} {
		if b.f.HasMembers(r.set) {
			b.add(r.chain, r.match(r.set), r.verb, quote(r.set.Comment()))
		}
	}
}

// clusterIPMasquerade marks for masquerading the cluster IP traffic that needs it.
func (b *builder) clusterIPMasquerade() {
	s := proxy.SetClusterIP
	if !b.f.HasMembers(s) {
		return
	}
	mark := "jump " + chainMarkMasq
	det := b.f.LocalDetector
	switch {
	case b.f.MasqueradeAll:
		b.add(chainServices, b.dst(s), mark, quote(s.Comment()))
	case det.Active():
		// Traffic to a VIP that does not come from a local pod is masqueraded, so replies
		// come back through this node; node-originated traffic picks the VIP itself as
		// source (it is local on kube-ipvs0), not a pod address, so it is caught too.
		b.add(chainServices, b.notLocal(det), b.dst(s), mark, quote(s.Comment()))
	default:
		// No way to tell pod traffic apart: masquerade at least node-originated
		// connections, whose source is the VIP itself.
		b.add(chainServices, b.srcDst(s), mark, quote(s.Comment()))
	}
}

// notLocal is the match "not from a local pod" of an active detector. The CIDR modes use
// the family's first pod CIDR: Kubernetes allows one per family.
func (b *builder) notLocal(d proxy.LocalDetector) string {
	switch d.Mode {
	case proxy.LocalClusterCIDR, proxy.LocalNodeCIDR:
		return b.ip + " saddr != " + d.CIDRs[0].String()
	case proxy.LocalBridgeInterface:
		return `iifname != "` + d.Interface + `"`
	default:
		return `iifname != "` + d.Interface + `*"`
	}
}

// externalIPs marks external IP traffic for masquerading and stops the services chain for
// it when it comes from outside or is for a local address. The iptables backend's first
// accept also asks that the packet did not come in through a bridge port (physdev); here
// such a packet goes on to rules none of which can match an external IP's address, port
// and protocol, so the verdict is the same.
func (b *builder) externalIPs() {
	if b.f.HasMembers(proxy.SetExternalIP) {
		s := proxy.SetExternalIP
		b.add(chainServices, b.dst(s), "jump", chainMarkMasq, quote(s.Comment()))
		b.externalAccept(s)
	}
	if b.f.HasMembers(proxy.SetExternalIPLocal) {
		b.externalAccept(proxy.SetExternalIPLocal)
	}
}

func (b *builder) externalAccept(s proxy.Set) {
	b.add(chainServices, b.dst(s), "fib saddr type != local accept", quote(s.Comment()))
	b.add(chainServices, b.dst(s), "fib daddr type local accept", quote(s.Comment()))
}

// chainDefaults adds the rules that are always there: the node port jump from the services
// chain and the last rules of the load balancer and source ranges chains.
func (b *builder) chainDefaults() {
	b.add(chainServices, "fib daddr type local jump", chainNodePort)
	b.add(chainLoadBalancer, "jump", chainMarkMasq)
	b.add(chainSourceRanges, "drop")
}

// outFilter drops the node's own connections to the virtual servers of f.OutFilter. With
// net.ipv4.vs.conntrack=1 the connection's original tuple keeps the virtual server's
// address and port after IPVS has sent it to a real server (the iptables backend asks the
// ipvs match).
func (b *builder) outFilter() {
	for _, k := range b.f.OutFilter {
		b.add(chainIPVSOutFilter, b.ip, "saddr", k.Address.String(), "meta l4proto", k.Protocol.String(),
			"ct original", b.ip, "daddr", k.Address.String(), "ct original proto-dst", fmt.Sprint(k.Port), "drop")
	}
}

// acceptServiceSets accepts cluster IP and load balancer traffic at the end of the
// services chain.
func (b *builder) acceptServiceSets() {
	for _, s := range []proxy.Set{proxy.SetClusterIP, proxy.SetLoadBalancer} {
		if b.f.HasMembers(s) {
			b.add(chainServices, b.dst(s), "accept")
		}
	}
}

// forwardAndHealthCheck fills the forward chain and accepts health check node ports.
func (b *builder) forwardAndHealthCheck() {
	b.add(chainForward, "meta mark &", b.mark, "==", b.mark, "accept", quote("kubernetes forwarding rules"))
	b.add(chainForward, "ct state established,related accept", quote("kubernetes forwarding conntrack rule"))
	s := proxy.SetHealthCheckNodePort
	b.add(chainHealthCheck, portMatch("", s), "accept", quote(s.Comment()))
}

// ipvsFilter rejects new connections to an address IPVS holds unless they are for one of
// its services.
func (b *builder) ipvsFilter() {
	for _, s := range []proxy.Set{proxy.SetLoadBalancer, proxy.SetClusterIP, proxy.SetExternalIP, proxy.SetExternalIPLocal} {
		b.add(chainIPVSFilter, b.dst(s), "return")
	}
	b.add(chainIPVSFilter, portMatch("", proxy.SetHealthCheckNodePort), "return")
	b.add(chainIPVSFilter, "ct state new", b.ip, "daddr @"+SetName(proxy.SetIPVSIPs), "reject")
}

// postrouting masquerades marked traffic and fills the mark-for-masquerade chain.
func (b *builder) postrouting() {
	b.add(chainPostrouting, "meta mark &", b.mark, "!=", b.mark, "return")
	b.add(chainPostrouting, "meta mark set meta mark ^", b.mark)
	masq := "masquerade"
	if b.f.MasqueradeRandomFully {
		masq += " fully-random"
	}
	b.add(chainPostrouting, masq, quote("kubernetes service traffic requiring SNAT"))
	b.add(chainMarkMasq, "meta mark set meta mark |", b.mark)
}
