package daemon

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/watch"
)

// buildOptions derives one family's proxy options from the configuration, this node's Node
// and the host's addresses.
func buildOptions(cfg *config.Config, f inet.Family, nodeName string, node *v1.Node, host []netip.Addr) proxy.Options {
	o := proxy.Options{
		Family:        f,
		Scheduler:     cfg.IPVS.SchedulerName(),
		NodeName:      nodeName,
		MasqueradeAll: cfg.MasqueradeAll,
		MasqueradeBit: int(cfg.MasqueradeBit),
		StrictARP:     cfg.IPVS.StrictARP,

		IgnoreNodeHints: !cfg.PreferSameTrafficDistribution(),

		MaxServiceSetMembers: cfg.Kipvs.MaxServiceSetMembers,
		MaxSetMembers:        cfg.Kipvs.MaxSetMembers,

		MaxServiceVirtualServers: cfg.Kipvs.MaxServiceVirtualServers,
		MaxServiceRealServers:    cfg.Kipvs.MaxServiceRealServers,
		MaxRealServers:           cfg.Kipvs.MaxRealServers,
	}
	if node != nil {
		o.NodeLabels = node.Labels
		for _, a := range node.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && f.Matches(ip.Unmap()) && !slices.Contains(o.NodeStatusAddresses, ip.Unmap()) {
				o.NodeStatusAddresses = append(o.NodeStatusAddresses, ip.Unmap())
			}
		}
	}
	for _, a := range host {
		if f.Matches(a) {
			o.LocalAddresses = append(o.LocalAddresses, a)
		}
	}
	o.NodeIP = nodeIP(cfg, f, node)
	// As kube-proxy (NewNodePortAddresses, GetNodeIPs): only the CIDRs of this family count,
	// a family none of them names gets all of its addresses (--nodeport-addresses
	// 10.0.2.0/24 limits IPv4 node ports and leaves IPv6 ones on every address), and a
	// family that has some gets the node's addresses inside them.
	var cidrs []netip.Prefix
	for _, p := range nodePortCIDRs(cfg, node) {
		if f.Matches(p.Addr()) {
			cidrs = append(cidrs, p)
		}
	}
	if len(cidrs) == 0 {
		o.NodePortAddresses = slices.Clone(o.LocalAddresses)
	}
	for _, a := range o.LocalAddresses {
		for _, p := range cidrs {
			if p.Contains(a) {
				o.NodePortAddresses = append(o.NodePortAddresses, a)
				break
			}
		}
	}
	o.LocalDetector = localDetector(cfg, f, node)
	o.PodCIDRs = podCIDRs(cfg, f, node)
	return o
}

// podCIDRs returns this family's pod ranges no external or load balancer IP may come from
// (unless an allow list admits it): the cluster CIDRs and this node's Node spec.podCIDRs.
func podCIDRs(cfg *config.Config, f inet.Family, node *v1.Node) []netip.Prefix {
	var out []netip.Prefix
	add := func(p netip.Prefix) {
		if f.Matches(p.Addr()) && !slices.Contains(out, p.Masked()) {
			out = append(out, p.Masked())
		}
	}
	for _, p := range cfg.ClusterCIDRs {
		add(p)
	}
	if node != nil {
		for _, s := range node.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				add(p)
			}
		}
	}
	return out
}

// localDetector resolves --detect-local-mode for one family.
func localDetector(cfg *config.Config, f inet.Family, node *v1.Node) proxy.LocalDetector {
	d := proxy.LocalDetector{Mode: proxy.LocalMode(cfg.DetectLocalMode)}
	switch d.Mode {
	case proxy.LocalClusterCIDR:
		for _, p := range cfg.ClusterCIDRs {
			if f.Matches(p.Addr()) {
				d.CIDRs = append(d.CIDRs, p)
			}
		}
	case proxy.LocalNodeCIDR:
		if node != nil {
			for _, s := range node.Spec.PodCIDRs {
				if p, err := netip.ParsePrefix(s); err == nil && f.Matches(p.Addr()) {
					d.CIDRs = append(d.CIDRs, p.Masked())
				}
			}
		}
	case proxy.LocalBridgeInterface:
		d.Interface = cfg.BridgeInterface
	case proxy.LocalInterfaceNamePrefix:
		d.Interface = cfg.InterfaceNamePrefix
	}
	return d
}

// nodePortCIDRs is nodePortAddresses as kube-proxy's proxiers get it: the CIDRs given, or
// for "primary" the node IP of each family that has one other than loopback, as a /32 or
// /128 (kube-proxy's newProxyServer; a family without one is then not limited).
func nodePortCIDRs(cfg *config.Config, node *v1.Node) []netip.Prefix {
	if !cfg.NodePortPrimary {
		return cfg.NodePortAddresses
	}
	var out []netip.Prefix
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		if a, ok := knownNodeIP(cfg, f, node); ok && !a.IsLoopback() {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

// bindIP is --bind-address (bindAddress) when it is an address of family f and not the
// unspecified address: kube-proxy then takes it as the node's IP of that family.
func bindIP(cfg *config.Config, f inet.Family) netip.Addr {
	a := cfg.BindAddress.Unmap()
	if !a.IsValid() || a.IsUnspecified() || !f.Matches(a) {
		return netip.Addr{}
	}
	return a
}

// knownNodeIP is family f's node IP when kube-proxy's detectNodeIPs finds one: --bind-address
// of that family, else the Node's primary address of that family.
func knownNodeIP(cfg *config.Config, f inet.Family, node *v1.Node) (netip.Addr, bool) {
	if a := bindIP(cfg, f); a.IsValid() {
		return a, true
	}
	for _, a := range nodePrimaryIPs(node) {
		if f.Matches(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// nodeIP is family f's node IP as kube-proxy's detectNodeIPs picks it: knownNodeIP, else the
// loopback address.
func nodeIP(cfg *config.Config, f inet.Family, node *v1.Node) netip.Addr {
	if a, ok := knownNodeIP(cfg, f, node); ok {
		return a
	}
	if f == inet.IPv6 {
		return netip.IPv6Loopback()
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// nodePrimaryIPs are the Node's primary IPs as kube-proxy picks them (GetNodeHostIPs): per
// family, its first InternalIP, else its first ExternalIP. An address no NodePort virtual
// server can carry is skipped (usableNodeAddress).
func nodePrimaryIPs(node *v1.Node) []netip.Addr {
	if node == nil {
		return nil
	}
	var out []netip.Addr
	for _, want := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type != want {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || !usableNodeAddress(ip.Unmap()) {
				continue
			}
			ip = ip.Unmap()
			if !slices.ContainsFunc(out, func(o netip.Addr) bool { return o.Is4() == ip.Is4() }) {
				out = append(out, ip)
			}
		}
	}
	return out
}

// usableNodeAddress says whether a Node status address can carry NodePort virtual servers:
// a global unicast address without an IPv6 zone, outside 0.0.0.0/8. A Node read from the
// source file is not validated by an apiserver and could hold anything.
func usableNodeAddress(a netip.Addr) bool {
	return a.Zone() == "" && a.IsGlobalUnicast() && !(a.Is4() && a.As4()[0] == 0)
}

// hostState is what a sync reads from the host: its addresses and the prefixes on its links.
type hostState struct {
	addrs []netip.Addr
	links []netip.Prefix
}

// readHost reads the node's addresses and, when the daemon can read them, its link prefixes.
func (d *Daemon) readHost() (hostState, error) {
	var h hostState
	var err error
	if h.addrs, err = d.deps.HostAddrs(); err != nil {
		return h, err
	}
	if d.deps.NodeLinks != nil {
		if h.links, err = d.deps.NodeLinks(); err != nil {
			return h, fmt.Errorf("read the node's link prefixes: %w", err)
		}
	}
	return h, nil
}

// options computes one family's proxy options now.
func (d *Daemon) options(f inet.Family, node *v1.Node, host hostState) proxy.Options {
	o := buildOptions(&d.cfg, f, d.nodeName, node, host.addrs)
	isBad := func(p netip.Prefix) bool {
		return slices.ContainsFunc(d.badClusterCIDRs, func(b netip.Prefix) bool { return b.Masked() == p.Masked() })
	}
	if o.LocalDetector.Mode == proxy.LocalClusterCIDR {
		// A clusterCIDR overlapping the Service CIDR is no pod CIDR (checkClusterCIDR).
		o.LocalDetector.CIDRs = slices.DeleteFunc(o.LocalDetector.CIDRs, isBad)
	}
	o.PodCIDRs = slices.DeleteFunc(o.PodCIDRs, isBad)
	for _, p := range host.links {
		if f.Matches(p.Addr()) && !slices.Contains(o.NodeLinkPrefixes, p) {
			o.NodeLinkPrefixes = append(o.NodeLinkPrefixes, p)
		}
	}
	for _, fam := range d.families {
		if fam.ipFamily == f {
			o.MasqueradeRandomFully = fam.randomFully
		}
	}
	for s, ok := range d.schedulers {
		if !ok {
			o.UnavailableSchedulers = append(o.UnavailableSchedulers, s)
		}
	}
	slices.Sort(o.UnavailableSchedulers)
	var sc watch.ServiceCIDRs
	if d.deps.Source != nil {
		sc = d.deps.Source.ServiceCIDRs()
	}
	o.ServiceCIDRs = serviceCIDRs(f, sc, d.cfg.Kipvs.ServiceCIDRs)
	for _, a := range slices.Concat(d.deps.APIServerAddrs, sc.KubernetesEndpointIPs) {
		if f.Matches(a) && !slices.Contains(o.APIServerAddresses, a) {
			o.APIServerAddresses = append(o.APIServerAddresses, a)
		}
	}
	o.ExternalIPCIDRs = d.cfg.Kipvs.ExternalIPCIDRs
	o.LoadBalancerIPCIDRs = d.cfg.Kipvs.LoadBalancerIPCIDRs
	return o
}

// serviceCIDRs returns the Service CIDRs of family f no external or load balancer IP may
// come from: the cluster's ServiceCIDR objects when the API serves them, else the
// configured ones (--kipvs-service-cidr), and default/kubernetes's cluster IPs in any case
// (as single addresses; they prove a range, not its length).
func serviceCIDRs(f inet.Family, sc watch.ServiceCIDRs, configured []netip.Prefix) []netip.Prefix {
	cidrs := sc.CIDRs
	if sc.Origin != watch.ServiceCIDRsFromAPI || len(cidrs) == 0 {
		cidrs = configured
	}
	var out []netip.Prefix
	for _, p := range cidrs {
		if f.Matches(p.Addr()) {
			out = append(out, p)
		}
	}
	for _, a := range sc.KubernetesServiceIPs {
		if f.Matches(a) && !slices.ContainsFunc(out, func(p netip.Prefix) bool { return p.Contains(a) }) {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}
