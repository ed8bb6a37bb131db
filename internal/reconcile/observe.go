package reconcile

import (
	"net/netip"
	"slices"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/proxy"
)

// owns is the ownership rule, for one virtual server of family f: it is kipvs's when it is
// desired, when its address is bound on the dummy link, when its ip,proto:port is in one of
// the VIP sets, or when it listens on a node address on a port in a node-port set.
// Everything else (another load balancer's virtual servers, excludeCIDRs) is foreign and
// never touched. The rule works on state upstream kube-proxy left behind too, since the
// names are the same. remembered holds the virtual servers this process created or adopted and has not seen deleted: they
// stay kipvs's even when nothing in the kernel vouches for them any more (a node port on an
// address the node lost).
func owns(f inet.Family, exclude []netip.Prefix, d *proxy.Desired, obs *state, k proxy.VSKey, nodeAddrs []netip.Addr, remembered map[proxy.VSKey]struct{}) bool {
	if d.VirtualServer(k) != nil {
		return true
	}
	for _, p := range exclude {
		if p.Contains(k.Address) {
			return false
		}
	}
	if _, ok := remembered[k]; ok {
		return true
	}
	if _, ok := obs.addrs[k.Address]; ok {
		return true
	}
	for _, m := range vipMembers(f, k) {
		if _, ok := obs.members[m]; ok {
			return true
		}
	}
	if !slices.Contains(nodeAddrs, k.Address) {
		return false
	}
	_, ok := obs.members[nodePortMember(f, k)]
	return ok
}

// vipMembers are the members of the VIP sets that make virtual server k kipvs's.
func vipMembers(f inet.Family, k proxy.VSKey) []proxy.Member {
	sets := []proxy.Set{proxy.SetClusterIP, proxy.SetExternalIP, proxy.SetExternalIPLocal, proxy.SetLoadBalancer}
	out := make([]proxy.Member, 0, len(sets))
	for _, s := range sets {
		out = append(out, proxy.Member{Set: s, Addr: k.Address, Proto: k.Protocol, Port: k.Port})
	}
	return out
}

// nodePortMember is the member of a node-port set that makes virtual server k kipvs's when
// it listens on a node address.
func nodePortMember(f inet.Family, k proxy.VSKey) proxy.Member {
	switch k.Protocol {
	case inet.TCP:
		return proxy.Member{Set: proxy.SetNodePortTCP, Port: k.Port}
	case inet.UDP:
		return proxy.Member{Set: proxy.SetNodePortUDP, Port: k.Port}
	default:
		return proxy.Member{Set: proxy.SetNodePortSCTP, Addr: k.Address, Proto: k.Protocol, Port: k.Port}
	}
}

// vouchers is everything in the kernel whose presence makes virtual server k kipvs's by
// the ownership rule: its address on the dummy link and its set members. apply keeps them
// while k's delete has not succeeded.
func vouchers(f inet.Family, k proxy.VSKey) (netip.Addr, []proxy.Member) {
	return k.Address, append(vipMembers(f, k), nodePortMember(f, k))
}
