package doctor

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/proxy"
)

// overlayKinds are the link kinds of overlay networks (flannel.1 is vxlan, Calico's tunl0
// ipip or vxlan.calico vxlan, Cilium's cilium_vxlan / cilium_geneve, ...).
func isOverlay(kind string) bool {
	switch kind {
	case "vxlan", "geneve", "ipip", "gre", "gretap", "ip6tnl", "ip6gre", "ip6gretap", "sit", "wireguard":
		return true
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// rpFilterKey is the rp_filter key of a link ("all" for the global one).
func rpFilterKey(link string) string { return "net/ipv4/conf/" + link + "/rp_filter" }

// checkRPFilter: with an overlay, replies to Service traffic can arrive on another link than
// the one the request left by; strict reverse-path filtering (1) on the links they arrive
// on drops them (seed 000: flannel.1 out, eth0 in).
func (c *checkup) checkRPFilter() {
	const check = "rp_filter"
	if c.linksErr != nil {
		c.add(check, Warn, fmt.Sprintf("cannot list links: %v", c.linksErr), "")
		return
	}
	var overlays []string
	for _, l := range c.links {
		if l.Up && isOverlay(l.Kind) {
			overlays = append(overlays, l.Name+" ("+l.Kind+")")
		}
	}
	if len(overlays) == 0 {
		c.add(check, OK, "no overlay link (vxlan, geneve, ipip, gre, wireguard) is up: replies come back the way requests left", "")
		return
	}
	all, _, err := c.get(rpFilterKey("all"))
	if err != nil {
		c.add(check, Warn, fmt.Sprintf("cannot read %s: %v", dotted(rpFilterKey("all")), err), "")
		return
	}
	allN, _ := strconv.Atoi(all)
	var strict, fixes []string
	for _, l := range c.links {
		if l.Name == "lo" || l.Name == ipvsmode.DummyName || isOverlay(l.Kind) || l.Kind == "veth" || l.Kind == "bridge" || !hasIPv4(l.Addrs) {
			continue
		}
		v, missing, err := c.get(rpFilterKey(l.Name))
		if err != nil || missing {
			continue
		}
		n, _ := strconv.Atoi(v)
		if max(allN, n) == 1 {
			strict = append(strict, fmt.Sprintf("%s (all=%d, %s=%d)", l.Name, allN, l.Name, n))
			fixes = append(fixes, dotted(rpFilterKey(l.Name))+"=2")
		}
	}
	if len(strict) == 0 {
		c.add(check, OK, fmt.Sprintf("overlay %s is up; rp_filter is loose or off on the node's other links (all=%d)", strings.Join(overlays, ", "), allN), "")
		return
	}
	c.add(check, Warn, fmt.Sprintf("overlay %s is up and rp_filter is strict (1) on %s: replies to Service traffic sent out through the overlay can come back on these links and are dropped",
		strings.Join(overlays, ", "), strings.Join(strict, ", ")),
		"sysctl -w "+strings.Join(fixes, " ")+" (loose; the effective value is the larger of all and the link's)")
}

func hasIPv4(ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Addr().Unmap().Is4() {
			return true
		}
	}
	return false
}

// conntrackFullPercent is the table fill above which new connections are at risk.
const conntrackFullPercent = 80

// checkConntrackTable: the conntrack table is not close to full (new flows, Service
// connections included, are dropped when it is).
func (c *checkup) checkConntrackTable() {
	const check = "conntrack table"
	cnt, m1, err1 := c.get(keyConntrackCount)
	mx, m2, err2 := c.get(keyConntrackMax)
	if err := cmp.Or(err1, err2); err != nil {
		c.add(check, Warn, fmt.Sprintf("cannot read the conntrack table size: %v", err), "")
		return
	}
	if m1 || m2 {
		c.add(check, Warn, fmt.Sprintf("%s or %s does not exist (nf_conntrack not loaded)", dotted(keyConntrackCount), dotted(keyConntrackMax)), "modprobe nf_conntrack")
		return
	}
	n, err1 := strconv.Atoi(cnt)
	m, err2 := strconv.Atoi(mx)
	if err1 != nil || err2 != nil || m <= 0 {
		c.add(check, Warn, fmt.Sprintf("unreadable conntrack size: count %q, max %q", cnt, mx), "")
		return
	}
	pct := n * 100 / m
	if n*100 > m*conntrackFullPercent {
		c.add(check, Warn, fmt.Sprintf("%s = %d of %s = %d (%d%%): when it is full the kernel drops new connections, Service connections included",
			dotted(keyConntrackCount), n, dotted(keyConntrackMax), m, pct),
			"raise conntrack.maxPerCore (--conntrack-max-per-core; kipvs sets nf_conntrack_max = max(maxPerCore x CPUs, conntrack.min)) or sysctl -w "+dotted(keyConntrackMax)+"="+strconv.Itoa(2*m))
		return
	}
	c.add(check, OK, fmt.Sprintf("%d of %d entries in use (%d%%)", n, m, pct), "")
}

// checkHairpin: on a bridge CNI, a pod reaching its own Service through a VIP needs
// hairpin_mode on its bridge port when IPVS picks the pod itself.
func (c *checkup) checkHairpin() {
	const check = "bridge hairpin"
	br := c.bridgeCNI()
	if len(br) == 0 {
		return
	}
	var off []string
	var fixes []string
	total := 0
	for _, b := range sortedKeys(br) {
		ports := br[b]
		total += len(ports)
		for _, p := range ports {
			if !p.Hairpin {
				off = append(off, p.Name+" (bridge "+b+")")
				fixes = append(fixes, "ip link set dev "+p.Name+" type bridge_slave hairpin on")
			}
		}
	}
	if len(off) == 0 {
		c.add(check, OK, fmt.Sprintf("hairpin_mode is on on all %d pod ports of bridge %s", total, strings.Join(sortedKeys(br), ", ")), "")
		return
	}
	c.add(check, Warn, fmt.Sprintf("hairpin_mode is off on %s: a pod connecting to its own Service gets no answer when IPVS picks the pod itself", listSome(off, 3)),
		"set hairpinMode: true in the bridge CNI configuration, or: "+listSome(fixes, 2))
}

// checkLocalDetector: without a local-traffic detector kipvs masquerades only the node's
// own connections to cluster IPs (seed-001).
func (c *checkup) checkLocalDetector() {
	for _, f := range c.families {
		check := "local traffic detector"
		if f == inet.IPv6 {
			check += " (IPv6)"
		}
		ipv6 := f == inet.IPv6
		if c.cfg.MasqueradeAll {
			c.add(check, OK, "masqueradeAll (--masquerade-all): all traffic to cluster IPs is masqueraded, pod traffic included", "")
			continue
		}
		rule := c.nodeMasqRule(f)
		if p, ok := c.cfg.ClusterCIDR(ipv6); ok && c.cfg.DetectLocalMode == config.LocalModeClusterCIDR && c.overlapsServiceCIDR(p) {
			c.add(check, Warn, fmt.Sprintf("clusterCIDR %s overlaps the Service CIDR, so kipvs does not use it to tell pod traffic apart: it masquerades traffic to cluster IPs "+
				"only when the packet's source is the cluster IP itself (%s), which is how the node's own connections look", p, rule),
				"set --cluster-cidr (clusterCIDR) to the pod CIDR")
			continue
		}
		if c.cfg.HasLocalDetector(ipv6) {
			var how string
			switch c.cfg.DetectLocalMode {
			case config.LocalModeClusterCIDR:
				p, _ := c.cfg.ClusterCIDR(ipv6)
				how = "clusterCIDR " + p.String()
			case config.LocalModeNodeCIDR:
				how = "the Node's spec.podCIDRs (detect-local-mode NodeCIDR)"
			case config.LocalModeBridgeInterface:
				how = "bridge interface " + c.cfg.BridgeInterface
			case config.LocalModeInterfaceNamePrefix:
				how = "interface prefix " + c.cfg.InterfaceNamePrefix
			}
			c.add(check, OK, "pod traffic is recognised by "+how+": traffic to cluster IPs from anywhere else is masqueraded", "")
			continue
		}
		if _, other := c.cfg.ClusterCIDR(!ipv6); other && c.cfg.DetectLocalMode == config.LocalModeClusterCIDR && !c.hasServiceCIDR(f) {
			// A single-stack cluster on a host where the other family works: kipvs runs that
			// family (as kube-proxy does) but it has no Services, so nothing is masqueraded.
			c.add(check, OK, fmt.Sprintf("single-stack cluster: no %s clusterCIDR and no %s Service CIDR, so the %s family has no cluster IPs to masquerade for", f, f, f), "")
			continue
		}
		c.add(check, Warn, fmt.Sprintf("no clusterCIDR for detect-local-mode %s: kipvs cannot tell pod traffic apart, so it masquerades traffic to cluster IPs only when the packet's source is the cluster IP itself "+
			"(%s), which is how the node's own connections look; "+
			"connections from off-node clients routed to the Service CIDR keep their source, so replies from pods on other nodes bypass this node and are lost",
			c.cfg.DetectLocalMode, rule),
			"set --cluster-cidr (clusterCIDR) to the pod CIDR, or --detect-local-mode=NodeCIDR when Nodes have spec.podCIDRs")
	}
}

// nodeMasqRule is the rule that masquerades the node's own connections to cluster IPs
// when no local-traffic detector is used, as the backend writes it.
func (c *checkup) nodeMasqRule(f inet.Family) string {
	if c.nftables() {
		ip := map[inet.Family]string{inet.IPv4: "ip", inet.IPv6: "ip6"}[f]
		return fmt.Sprintf("table %s chain services: %s saddr . meta l4proto . th dport @%s jump mark-for-masquerade",
			nftTableName(f), ip, nftables.SetName(proxy.SetClusterIP))
	}
	return fmt.Sprintf("nat KUBE-SERVICES -m set --match-set %s src,dst -j KUBE-MARK-MASQ", iptables.SetName(f, proxy.SetClusterIP))
}

// hasServiceCIDR reports whether a Service CIDR of family f is known.
func (c *checkup) hasServiceCIDR(f inet.Family) bool {
	for _, p := range c.svcCIDRs {
		if f.Matches(p.Addr()) {
			return true
		}
	}
	return false
}

// overlapsServiceCIDR reports whether p is, contains or lies inside a known Service CIDR;
// the daemon then leaves it out of local-traffic detection.
func (c *checkup) overlapsServiceCIDR(p netip.Prefix) bool {
	for _, s := range c.svcCIDRs {
		if p.Overlaps(s) {
			return true
		}
	}
	return false
}

// checkClusterCIDR: the clusterCIDR is not (inside, around) the Service CIDR (seed-001).
func (c *checkup) checkClusterCIDR() {
	const check = "cluster CIDR"
	fix := "set --cluster-cidr (clusterCIDR) to the pod CIDR (kube-controller-manager --cluster-cidr or the CNI's pod network), not the Service CIDR (kube-apiserver --service-cluster-ip-range)"
	if len(c.cfg.ClusterCIDRs) == 0 {
		c.add(check, OK, "clusterCIDR is not set: nothing to overlap the Service CIDR", "")
		return
	}
	pods := prefixes(c.cfg.ClusterCIDRs)
	if len(c.svcCIDRs) > 0 {
		var bad []string
		for _, p := range c.cfg.ClusterCIDRs {
			for _, s := range c.svcCIDRs {
				switch {
				case !p.Overlaps(s):
				case p.Masked() == s.Masked():
					bad = append(bad, fmt.Sprintf("clusterCIDR %s is the Service CIDR %s", p, s))
				default:
					bad = append(bad, fmt.Sprintf("clusterCIDR %s overlaps the Service CIDR %s", p, s))
				}
			}
		}
		if len(bad) > 0 {
			c.add(check, Fail, strings.Join(bad, "; ")+" (from "+c.svcSource+"): with kube-proxy the node's own connections to cluster IPs would look like pod traffic and not be masqueraded, so the node could not reach Services; "+
				"kipvs leaves this clusterCIDR out of local-traffic detection (it masquerades only the node's own connections to cluster IPs) and reports it (kipvs_cluster_cidr_overlaps_service_cidr 1, a Warning Event on the Node)", fix)
			return
		}
		c.add(check, OK, fmt.Sprintf("clusterCIDR %s does not overlap the Service CIDR %s (from %s)", pods, prefixes(c.svcCIDRs), c.svcSource), "")
		return
	}
	// No Service CIDR known: the cluster IPs in use are evidence enough when one of them
	// lies in the clusterCIDR.
	var ips []netip.Addr
	if c.state != nil {
		for _, f := range c.state.Families {
			for _, v := range f.VirtualServers {
				if a, err := netip.ParseAddr(v.Address); err == nil && v.Kind == "ClusterIP" {
					ips = append(ips, a)
				}
			}
		}
	} else {
		ips = c.dummyAddrs()
	}
	for _, a := range ips {
		for _, p := range c.cfg.ClusterCIDRs {
			if p.Contains(a) {
				c.add(check, Fail, fmt.Sprintf("cluster IP %s lies in clusterCIDR %s: the clusterCIDR is (part of) the Service CIDR; kipvs leaves it out of local-traffic detection and masquerades only the node's own connections to cluster IPs", a, p), fix)
				return
			}
		}
	}
	c.add(check, Warn, fmt.Sprintf("Service CIDR unknown (no --kipvs-service-cidr, no ServiceCIDR objects): clusterCIDR %s checked only against the %d cluster IPs in use", pods, len(ips)),
		"pass --kipvs-service-cidr (kube-apiserver's --service-cluster-ip-range)")
}

func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// checkNodeAddressVIPs: no address on kube-ipvs0 is also one of the node's own addresses on
// another link (seed-001: a node address taken for a Service VIP).
func (c *checkup) checkNodeAddressVIPs() {
	const check = "kube-ipvs0 addresses"
	if c.linksErr != nil {
		c.add(check, Warn, fmt.Sprintf("cannot list links: %v", c.linksErr), "")
		return
	}
	if c.dummy == nil {
		c.add(check, OK, ipvsmode.DummyName+" does not exist (kipvs creates it)", "")
		return
	}
	onLinks := map[netip.Addr][]string{}
	for _, l := range c.links {
		if l.Name == ipvsmode.DummyName {
			continue
		}
		for _, p := range l.Addrs {
			a := p.Addr().Unmap()
			onLinks[a] = append(onLinks[a], l.Name)
		}
	}
	owners := c.vipOwners()
	var bad, fixes []string
	for _, a := range c.dummyAddrs() {
		links, ok := onLinks[a]
		if !ok {
			continue
		}
		s := fmt.Sprintf("%s is on %s and is a node address on %s", a, ipvsmode.DummyName, strings.Join(links, ", "))
		if o := owners[a]; o != "" {
			s += " (" + o + ")"
		}
		bad = append(bad, s)
		fixes = append(fixes, fmt.Sprintf("ip addr del %s dev %s", netip.PrefixFrom(a, a.BitLen()), ipvsmode.DummyName))
	}
	if len(bad) > 0 {
		c.add(check, Fail, listSome(bad, 3)+": connections to the node's own address are taken for Service traffic",
			strings.Join(fixes, "; ")+", and remove the address from the Service's externalIPs or load balancer ingress")
		return
	}
	c.add(check, OK, fmt.Sprintf("none of the %d addresses on %s is a node address on another link", len(c.dummyAddrs()), ipvsmode.DummyName), "")
}

// vipOwners names, per address, the daemon's virtual servers on it ("ExternalIP of ns/name").
func (c *checkup) vipOwners() map[netip.Addr]string {
	out := map[netip.Addr]string{}
	if c.state == nil {
		return out
	}
	for _, f := range c.state.Families {
		for _, v := range f.VirtualServers {
			a, err := netip.ParseAddr(v.Address)
			if err != nil || out[a] != "" {
				continue
			}
			out[a] = v.Kind + " of " + v.Namespace + "/" + v.Name
		}
	}
	return out
}

// tableName renders a route table as ip(8) does.
func tableName(t int) string {
	switch t {
	case TableMain:
		return "main"
	case TableLocal:
		return "local"
	case 253:
		return "default"
	}
	return strconv.Itoa(t)
}

// describe renders a route as ip(8) would ("unicast 10.96.0.0/12 via 192.168.1.1 dev eth0 table main").
func (r Route) describe(dst string) string {
	var b strings.Builder
	b.WriteString(r.Type)
	if dst != "" {
		b.WriteString(" " + dst)
	}
	if r.Gateway.IsValid() {
		b.WriteString(" via " + r.Gateway.String())
	}
	if r.Dev != "" {
		b.WriteString(" dev " + r.Dev)
	}
	b.WriteString(" table " + tableName(r.Table))
	return b.String()
}

// checkServiceRoutes: every VIP on kube-ipvs0 routes locally (`ip route get VIP` is type
// local), and no route sends (part of) the Service CIDR off the node.
func (c *checkup) checkServiceRoutes() {
	const check = "service routes"
	var bad []string
	var fixes []string
	vips := c.dummyAddrs()
	notLocal := 0
	for _, a := range vips {
		r, err := c.view.Net.RouteGet(a)
		if err != nil {
			bad = append(bad, fmt.Sprintf("ip route get %s: %v", a, err))
			notLocal++
			continue
		}
		if r.Type != "local" {
			bad = append(bad, fmt.Sprintf("ip route get %s gives %s, not local: traffic to this VIP leaves the node instead of reaching IPVS", a, r.describe("")))
			notLocal++
		}
	}
	if notLocal > 0 {
		fixes = append(fixes, "find the rule or route ahead of the local table: ip rule show (the local table must come first, priority 0); ip route show table local must list the VIPs on "+ipvsmode.DummyName)
	}
	checkedRoutes := false
	if len(c.svcCIDRs) > 0 {
		routes, err := c.view.Net.Routes()
		if err != nil {
			bad = append(bad, fmt.Sprintf("cannot list routes: %v", err))
		} else {
			checkedRoutes = true
			for _, r := range routes {
				if r.Table == TableLocal || r.Type != "unicast" || !r.Dst.IsValid() || r.Dst.Bits() == 0 || r.Dev == ipvsmode.DummyName {
					continue
				}
				for _, s := range c.svcCIDRs {
					if r.Dst.Overlaps(s) {
						bad = append(bad, fmt.Sprintf("route %s sends the Service CIDR %s (%s) off the node: cluster IPs not bound on %s (a new Service before kipvs syncs it) go to it instead of failing locally",
							r.describe(r.Dst.String()), s, c.svcSource, ipvsmode.DummyName))
						fixes = append(fixes, "ip route del "+strings.TrimPrefix(r.describe(r.Dst.String()), "unicast "))
						break
					}
				}
			}
		}
	}
	if len(bad) > 0 {
		c.add(check, Fail, listSome(bad, 3), strings.Join(fixes, "; "))
		return
	}
	finding := fmt.Sprintf("all %d VIPs on %s route locally", len(vips), ipvsmode.DummyName)
	if checkedRoutes {
		finding += "; no route sends the Service CIDR " + prefixes(c.svcCIDRs) + " off the node"
	} else {
		finding += " (Service CIDR unknown: its routes not checked)"
	}
	c.add(check, OK, finding, "")
}

// checkForward: the filter FORWARD chain lets Service traffic through: with a DROP policy
// (dockerd sets one) it needs kipvs's KUBE-FORWARD jump, and no unconditional DROP or
// REJECT ahead of it (seed 002). The backend kipvs does not program is checked too when it
// is installed: a packet traverses the FORWARD chains of both.
func (c *checkup) checkForward() {
	if c.nftables() {
		c.checkForwardNFT()
		return
	}
	for _, f := range c.families {
		check := "FORWARD policy"
		tool := "iptables"
		if f == inet.IPv6 {
			check += " (IPv6)"
			tool = "ip6tables"
		}
		r := c.view.Iptables[f]
		if r == nil {
			why := "no iptables backend found"
			if c.view.IptablesErr != nil {
				why = c.view.IptablesErr.Error()
			}
			c.add(check, Warn, fmt.Sprintf("cannot read %s: %s", tool, why), "install the iptables package (iptables-nft or iptables-legacy)")
			continue
		}
		save, err := r.Save(c.ctx)
		if err != nil {
			c.add(check, Warn, fmt.Sprintf("%s-save failed: %v", tool, err), "")
			continue
		}
		status, finding, fix := forwardVerdict(save, tool, tool)
		if o := c.view.OtherIptables[f]; o != nil && status != Fail {
			otherTool := tool + "-" + c.view.OtherBackend
			if osave, err := o.Save(c.ctx); err != nil {
				c.add(check, Warn, fmt.Sprintf("%s; %s-save failed: %v", finding, otherTool, err), "")
				continue
			} else if ostatus, ofinding, ofix := forwardVerdict(osave, otherTool, tool); ostatus == Fail {
				status, fix = Fail, ofix+", or run dockerd and kipvs on the same iptables backend"
				finding = ofinding + " (kipvs programs the other backend; a packet traverses the FORWARD chains of both, so it is dropped here)"
			} else if policy, _ := builtinChain(osave, "filter", "FORWARD"); policy != "" {
				finding += fmt.Sprintf("; %s filter FORWARD policy %s", otherTool, policy)
			}
		}
		c.add(check, status, finding, fix)
	}
}

// checkForwardNFT is checkForward with the nftables backend: kipvs's forward rules are in
// its own table, where an accept does not end the iptables FORWARD chain, so a DROP there
// (a policy or an unconditional rule, on either iptables backend) drops Service traffic
// whatever kipvs accepts.
func (c *checkup) checkForwardNFT() {
	for _, f := range c.families {
		check := "FORWARD policy"
		tool := "iptables"
		if f == inet.IPv6 {
			check += " (IPv6)"
			tool = "ip6tables"
		}
		type reader struct {
			tool string
			r    IptablesReader
		}
		var readers []reader
		if r := c.view.Iptables[f]; r != nil {
			readers = append(readers, reader{tool, r})
		}
		if r := c.view.OtherIptables[f]; r != nil {
			readers = append(readers, reader{tool + "-" + c.view.OtherBackend, r})
		}
		if len(readers) == 0 {
			c.add(check, OK, fmt.Sprintf("%s is not installed: no %s FORWARD chain filters forwarded traffic besides kipvs's table %s", tool, tool, nftTableName(f)), "")
			continue
		}
		status := OK
		var findings []string
		for _, rd := range readers {
			save, err := rd.r.Save(c.ctx)
			if err != nil {
				status = Warn
				findings = append(findings, fmt.Sprintf("%s-save failed: %v", rd.tool, err))
				continue
			}
			st, finding, fx := forwardVerdict(save, rd.tool, "")
			if st == Fail {
				c.add(check, Fail, finding+fmt.Sprintf(" (kipvs runs the nftables backend: an accept in table %s does not end the %s FORWARD chain)", nftTableName(f), rd.tool),
					fx+", or accept the Service traffic in that chain ahead of the DROP (the host firewall's rules)")
				status = Fail
				break
			}
			policy, _ := builtinChain(save, "filter", "FORWARD")
			if policy == "" {
				findings = append(findings, rd.tool+" has no filter FORWARD chain")
			} else {
				findings = append(findings, fmt.Sprintf("%s filter FORWARD policy %s", rd.tool, policy))
			}
		}
		switch status {
		case Fail:
		case Warn:
			c.add(check, Warn, strings.Join(findings, "; "), "run kipvs doctor as root; "+tool+"-save shows the error")
		default:
			c.add(check, OK, strings.Join(findings, "; ")+", with no DROP ahead: Service traffic goes on to kipvs's table "+nftTableName(f), "")
		}
	}
}

// forwardVerdict judges one backend's filter FORWARD chain from its save output. tool names
// the backend's command in the finding and the fix; kipvsTool is the command that would
// hold kipvs's jump (the same, unless this is the backend kipvs does not program).
func forwardVerdict(save, tool, kipvsTool string) (Status, string, string) {
	policy, rules := builtinChain(save, "filter", "FORWARD")
	jump := -1
	blocker := ""
	for i, rule := range rules {
		if strings.HasSuffix(rule, "-j "+ipvsmode.ChainForward) {
			jump = i
			break
		}
		if rule == "-j DROP" || strings.HasPrefix(rule, "-j REJECT") {
			blocker = rule
			break
		}
	}
	jumpRule := tool + ` -I FORWARD -m comment --comment "kubernetes forwarding rules" -j ` + ipvsmode.ChainForward
	if tool != kipvsTool {
		// kipvs's chain is not in this backend: only the policy or the rule can change.
		switch {
		case blocker != "":
			return Fail, fmt.Sprintf("%s filter FORWARD has %q: replies from Service endpoints to pod clients are dropped", tool, "-A FORWARD "+blocker),
				"remove the rule (" + tool + " -D FORWARD " + blocker + ")"
		case policy == "DROP":
			return Fail, fmt.Sprintf("%s filter FORWARD policy is DROP (dockerd sets it): replies from Service endpoints to pod clients are dropped unless a rule there accepts them", tool),
				tool + " -P FORWARD ACCEPT"
		}
		return OK, "", ""
	}
	switch {
	case blocker != "":
		return Fail, fmt.Sprintf("%s filter FORWARD has %q before any jump to %s: replies from Service endpoints to pod clients are dropped", tool, "-A FORWARD "+blocker, ipvsmode.ChainForward),
			jumpRule + " (kipvs's next full sync also restores it), or remove the rule"
	case policy == "DROP" && jump < 0:
		return Fail, fmt.Sprintf("%s filter FORWARD policy is DROP (dockerd sets it) and FORWARD has no jump to %s: replies from Service endpoints to pod clients are dropped", tool, ipvsmode.ChainForward),
			jumpRule + " (kipvs's next full sync also restores it), or " + tool + " -P FORWARD ACCEPT"
	case policy == "":
		return OK, fmt.Sprintf("%s has no filter FORWARD chain yet: nothing filters forwarded traffic", tool), ""
	case jump >= 0:
		return OK, fmt.Sprintf("%s filter FORWARD policy %s, jump to %s at position %d", tool, policy, ipvsmode.ChainForward, jump+1), ""
	}
	return OK, fmt.Sprintf("%s filter FORWARD policy %s", tool, policy), ""
}

// builtinChain returns a built-in chain's policy and rules (the text after "-A CHAIN ")
// from iptables-save output, with counters removed.
func builtinChain(save, table, chain string) (string, []string) {
	in := false
	policy := ""
	var rules []string
	for _, l := range strings.Split(save, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			if _, rest, ok := strings.Cut(l, "] "); ok {
				l = rest
			}
		}
		switch {
		case strings.HasPrefix(l, "*"):
			in = l == "*"+table
		case !in:
		case l == "COMMIT":
			in = false
		case strings.HasPrefix(l, ":"+chain+" "):
			if f := strings.Fields(l); len(f) >= 2 {
				policy = f[1]
			}
		case strings.HasPrefix(l, "-A "+chain+" "):
			rules = append(rules, strings.TrimPrefix(l, "-A "+chain+" "))
		}
	}
	return policy, rules
}
