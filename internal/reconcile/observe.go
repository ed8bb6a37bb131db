package reconcile

import (
	"net/netip"
	"slices"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/proxy"
)

// observe picks out of a Read what kipvs owns in the kernel for its family: the members of
// its sets, the addresses on the dummy link, and the virtual servers that are its own, with
// every object j names taken from the model of what was applied instead (see Read). It also
// returns the sets that do not exist yet.
//
// A virtual server is kipvs's when it is desired, when its address is bound on the dummy
// link, when its ip,proto:port is in one of the VIP sets, or when it listens on a node
// address on a port in a node-port set. Everything else (another load balancer's virtual
// servers, excludeCIDRs) is foreign and never touched. The rule works on state upstream
// kube-proxy left behind too, since the names are the same.
func (r *Reconciler) observe(rd *Read, j *journal, d *proxy.Desired, po *proxy.Options) (*state, []dataplane.SetSpec) {
	obs := newState()
	if rd.members != nil {
		obs.members = rd.members // the Read is used once
	}
	for _, p := range rd.addrs {
		if a := p.Addr().Unmap(); r.opts.Family.Matches(a) && !dummyif.KernelLinkLocal(p) {
			obs.addrs[a] = struct{}{}
		}
	}
	if r.applied != nil {
		j.overlayVouchers(obs, r.applied)
	}

	var nodeAddrs []netip.Addr
	if po != nil {
		nodeAddrs = po.NodePortAddresses
	}
	for _, e := range rd.table {
		k := e.Service.ServiceKey
		if k.FWMark != 0 || !r.opts.Family.Matches(k.Addr) {
			continue
		}
		vk := fromIPVSKey(k)
		if !owns(r.opts.Family, r.opts.ExcludeCIDRs, d, obs, vk, nodeAddrs, r.owned) {
			continue
		}
		vs := &vsState{svc: e.Service, dests: make(map[netip.AddrPort]destState, len(e.Destinations))}
		vs.svc.Stats = nil
		for _, dst := range e.Destinations {
			vs.dests[dst.AddrPort()] = destState{weight: dst.Weight, active: dst.ActiveConns, inactive: dst.InactiveConns}
		}
		obs.vs[vk] = vs
	}
	if r.applied != nil {
		j.overlayVirtualServers(obs, r.applied)
	}
	return obs, rd.missing
}

// owns applies the ownership rule of observe to one virtual server of family f. remembered
// holds the virtual servers this process created or adopted and has not seen deleted: they
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

// drift counts the differences between what kipvs applied and what the kernel holds now.
// It runs under the daemon lock on every full sync, so each collection is walked once: what
// the kernel holds beyond what was applied is its size minus what matched.
func drift(applied, obs *state, failed map[ObjectKey]*ObjectStatus) map[string]int {
	var vs, rs, members, addrs int
	matchedVS := 0
	// A failed object's model is unknown: it is neither drift nor a match.
	skip := func(k ObjectKey) bool {
		if len(failed) == 0 {
			return false
		}
		_, ok := failed[k]
		return ok
	}
	for k, a := range applied.vs {
		if skip(vsObject(k)) {
			if _, ok := obs.vs[k]; ok {
				matchedVS++
			}
			continue
		}
		o, ok := obs.vs[k]
		if !ok {
			vs++
			rs += len(a.dests)
			continue
		}
		matchedVS++
		if !serviceSettingsEqual(a.svc, o.svc) {
			vs++
		}
		matched := 0
		for ap, ad := range a.dests {
			od, ok := o.dests[ap]
			if ok {
				matched++
			}
			if !ok || od.weight != ad.weight {
				rs++
			}
		}
		rs += len(o.dests) - matched
	}
	if matchedVS < len(obs.vs) {
		for k, o := range obs.vs {
			if _, ok := applied.vs[k]; !ok && !skip(vsObject(k)) {
				vs++
				rs += len(o.dests)
			}
		}
	}
	matched := 0
	for m := range applied.members {
		if _, ok := obs.members[m]; ok {
			matched++
		} else if !skip(memberObject(m)) {
			members++
		}
	}
	members += len(obs.members) - matched
	matched = 0
	for a := range applied.addrs {
		if _, ok := obs.addrs[a]; ok {
			matched++
		} else if !skip(addrObject(a)) {
			addrs++
		}
	}
	addrs += len(obs.addrs) - matched
	// A failed member or address the kernel has and the model does not was counted as extra.
	for k := range failed {
		switch k.Kind {
		case KindSetMember:
			_, inObs := obs.members[k.Member]
			if _, inApplied := applied.members[k.Member]; inObs && !inApplied {
				members--
			}
		case KindAddress:
			_, inObs := obs.addrs[k.Addr]
			if _, inApplied := applied.addrs[k.Addr]; inObs && !inApplied {
				addrs--
			}
		}
	}
	out := map[string]int{}
	for kind, n := range map[string]int{"virtual_server": vs, "real_server": rs, "ipset_member": members, "address": addrs} {
		if n > 0 {
			out[kind] = n
		}
	}
	return out
}
