package reconcile

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/proxy"
)

// Plan is an ordered set of kernel changes. Apply runs the groups in field order, which is
// the order the kernel needs: sets exist before members and rules use them, virtual servers
// exist before their VIPs attract traffic, rules change before the members they stop using
// go away, and real servers go before their virtual servers. A virtual server's VIP and the
// set members that mark it as kipvs's go only after it is gone: when its delete fails they
// stay (see apply), so the next sync still knows it as kipvs's and retries.
type Plan struct {
	// CreateSets and AddMembers (one filter transaction), then AddAddrs, are applied before
	// IPVS: a virtual server is created only with what makes it kipvs's already in place.
	CreateSets []dataplane.SetSpec
	AddMembers []proxy.Member
	AddAddrs   []netip.Addr
	// IPVS holds service adds and updates (each service before its destinations), then
	// destination adds and updates, including drains (weight 0).
	IPVS []ipvs.Op
	// Rules is the ruleset to apply (a filter transaction of its own), or nil when it is
	// unchanged.
	Rules dataplane.Rules
	// IPVSDelete holds destination deletes, then service deletes.
	IPVSDelete []ipvs.Op
	// DelMembers is the last filter transaction.
	DelMembers []proxy.Member
	DelAddrs   []netip.Addr
	// Conntrack lists UDP flows to remove once the IPVS changes are in.
	Conntrack []conntrack.Filter
	// Drains are the real servers this plan sets to weight 0 to drain them.
	Drains []DrainKey
}

// DrainKey names a real server of a virtual server.
type DrainKey struct {
	VS   proxy.VSKey
	Dest netip.AddrPort
}

func (k DrainKey) String() string { return k.VS.String() + " -> " + k.Dest.String() }

// Len counts the kernel changes (a rules apply counts as one).
func (p *Plan) Len() int {
	n := len(p.CreateSets) + len(p.IPVS) + len(p.AddAddrs) + len(p.AddMembers) + len(p.DelMembers) +
		len(p.IPVSDelete) + len(p.DelAddrs) + len(p.Conntrack)
	if p.Rules != nil {
		n++
	}
	return n
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return p.Len() == 0 }

// String renders the plan one change per line, in apply order, for logs, --dry-run and tests.
func (p *Plan) String() string {
	var b strings.Builder
	for _, s := range p.CreateSets {
		fmt.Fprintf(&b, "create set %s %s\n", s.Name, s.Type)
	}
	for _, m := range p.AddMembers {
		fmt.Fprintf(&b, "add member %s %s\n", m.Set, m)
	}
	for _, a := range p.AddAddrs {
		fmt.Fprintf(&b, "bind %s\n", a)
	}
	for _, op := range p.IPVS {
		b.WriteString(formatOp(op))
	}
	if p.Rules != nil {
		b.WriteString("apply iptables rules\n")
	}
	for _, op := range p.IPVSDelete {
		b.WriteString(formatOp(op))
	}
	for _, m := range p.DelMembers {
		fmt.Fprintf(&b, "del member %s %s\n", m.Set, m)
	}
	for _, a := range p.DelAddrs {
		fmt.Fprintf(&b, "unbind %s\n", a)
	}
	for _, f := range p.Conntrack {
		fmt.Fprintf(&b, "conntrack delete %s\n", f)
	}
	return b.String()
}

func formatOp(op ipvs.Op) string {
	k := fromIPVSKey(op.Service.ServiceKey)
	d := op.Destination.AddrPort()
	switch op.Kind {
	case ipvs.OpAddService:
		return fmt.Sprintf("add vs %s %s\n", k, describeService(op.Service))
	case ipvs.OpUpdateService:
		return fmt.Sprintf("update vs %s %s\n", k, describeService(op.Service))
	case ipvs.OpDeleteService:
		return fmt.Sprintf("delete vs %s\n", k)
	case ipvs.OpAddDestination:
		return fmt.Sprintf("add rs %s -> %s w=%d\n", k, d, op.Destination.Weight)
	case ipvs.OpUpdateDestination:
		return fmt.Sprintf("update rs %s -> %s w=%d\n", k, d, op.Destination.Weight)
	case ipvs.OpDeleteDestination:
		return fmt.Sprintf("delete rs %s -> %s\n", k, d)
	}
	return fmt.Sprintf("op %d %s\n", op.Kind, k)
}

func describeService(s ipvs.Service) string {
	out := s.Scheduler
	if names := ipvs.SchedulerFlagNames(s.Scheduler, s.Flags); len(names) > 0 {
		out += " flags=" + strings.Join(names, ",")
	}
	if s.Flags&ipvs.FlagPersistent != 0 {
		out += fmt.Sprintf(" persistent=%d", s.Timeout)
	}
	return out
}

// diffInput is what Diff compares.
type diffInput struct {
	desired  *proxy.Desired
	observed *state
	exclude  []netip.Prefix
	// graceful is how long removed TCP real servers drain; 0 deletes them at once;
	// NoDrainLimit drains them until their connections end.
	graceful time.Duration
}

func (in *diffInput) excluded(a netip.Addr) bool {
	for _, p := range in.exclude {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// diffScoped compares only the objects named in t.
func diffScoped(in *diffInput, t *proxy.Touched) *Plan {
	return diffKeys(in, sortedKeys(t.VirtualServers, proxy.VSKey.Compare), sortedKeys(t.Members, proxy.Member.Compare),
		sortedKeys(t.Addresses, netip.Addr.Compare))
}

// diffKeys compares the objects named, each list sorted and without duplicates.
func diffKeys(in *diffInput, vs []proxy.VSKey, members []proxy.Member, addrs []netip.Addr) *Plan {
	p := &Plan{}
	if n := addOps(in, vs); n > 0 {
		p.IPVS = make([]ipvs.Op, 0, n)
	}
	for _, k := range vs {
		diffVS(in, p, k)
	}
	for _, m := range members {
		_, have := in.observed.members[m]
		want := in.desired.HasMember(m)
		switch {
		case want && !have:
			p.AddMembers = append(p.AddMembers, m)
		case have && !want:
			p.DelMembers = append(p.DelMembers, m)
		}
	}
	for _, a := range addrs {
		_, have := in.observed.addrs[a]
		want := in.desired.HasAddress(a)
		switch {
		case want && !have:
			p.AddAddrs = append(p.AddAddrs, a)
		case have && !want:
			p.DelAddrs = append(p.DelAddrs, a)
		}
	}
	// Deletes run destinations first, then services.
	slices.SortStableFunc(p.IPVSDelete, func(a, b ipvs.Op) int {
		return deleteRank(a) - deleteRank(b)
	})
	return p
}

// addOps counts the ops that create the desired virtual servers of keys the kernel does
// not have, with their real servers: on a first sync nearly the whole plan, which is then
// allocated once instead of grown (an op is some 300 bytes; a plan for 10,000 Services x
// 10 endpoints, 110,000 ops, grown by appending allocates five times its final size).
func addOps(in *diffInput, keys []proxy.VSKey) int {
	n := 0
	for _, k := range keys {
		if _, have := in.observed.vs[k]; have {
			continue
		}
		if want := in.desired.VirtualServer(k); want != nil {
			n += 1 + len(want.Destinations)
		}
	}
	return n
}

func deleteRank(op ipvs.Op) int {
	if op.Kind == ipvs.OpDeleteDestination {
		return 0
	}
	return 1
}

// diffVS plans one virtual server and its real servers.
func diffVS(in *diffInput, p *Plan, k proxy.VSKey) {
	want := in.desired.VirtualServer(k)
	have := in.observed.vs[k]
	excluded := in.excluded(k.Address)
	switch {
	case want == nil && have == nil:
		return
	case want == nil:
		if !excluded {
			p.IPVSDelete = append(p.IPVSDelete, ipvs.DeleteServiceOp(have.svc.ServiceKey))
		}
		return
	case have == nil:
		svc := toIPVSService(want)
		p.IPVS = append(p.IPVS, ipvs.AddServiceOp(svc))
		for _, d := range want.Destinations {
			p.IPVS = append(p.IPVS, ipvs.AddDestinationOp(svc.ServiceKey, masq(d.Address, d.Port, d.Weight)))
		}
		if k.Protocol == inet.UDP && len(want.Destinations) > 0 {
			p.Conntrack = append(p.Conntrack, conntrack.ByOrigDst(inet.UDP, netip.AddrPortFrom(k.Address, k.Port)))
		}
		return
	}
	if excluded {
		return
	}
	svc := toIPVSService(want)
	if !serviceSettingsEqual(svc, have.svc) {
		p.IPVS = append(p.IPVS, ipvs.UpdateServiceOp(svc))
	}
	liveBefore := 0
	for _, d := range have.dests {
		if d.weight > 0 {
			liveBefore++
		}
	}
	found := 0
	for _, d := range want.Destinations {
		ap := netip.AddrPortFrom(d.Address, d.Port)
		cur, ok := have.dests[ap]
		switch {
		case !ok:
			p.IPVS = append(p.IPVS, ipvs.AddDestinationOp(svc.ServiceKey, masq(d.Address, d.Port, d.Weight)))
		case cur.weight != d.Weight:
			found++
			p.IPVS = append(p.IPVS, ipvs.UpdateDestinationOp(svc.ServiceKey, masq(d.Address, d.Port, d.Weight)))
		default:
			found++
		}
	}
	if found < len(have.dests) {
		diffExtraDests(in, p, k, want, have)
	}
	if k.Protocol == inet.UDP && liveBefore == 0 && len(want.Destinations) > 0 {
		// Flows created while the service had no endpoint point nowhere; clear them so the
		// next packet is scheduled to a real endpoint.
		p.Conntrack = append(p.Conntrack, conntrack.ByOrigDst(inet.UDP, netip.AddrPortFrom(k.Address, k.Port)))
	}
}

// drains reports whether removed real servers of protocol p drain at weight 0 (TCP) rather
// than go at once (UDP and SCTP, whose connections the kernel expires on their next packet
// with expire_nodest_conn), as kube-proxy's IsRsGracefulTerminationNeeded.
func drains(p inet.Protocol) bool { return p != inet.UDP && p != inet.SCTP }

// diffExtraDests plans the real servers of have that want does not list: deleted, or
// drained (TCP with a graceful period).
func diffExtraDests(in *diffInput, p *Plan, k proxy.VSKey, want *proxy.VirtualServer, have *vsState) {
	svc := toIPVSService(want)
	wanted := make(map[netip.AddrPort]bool, len(want.Destinations))
	for _, d := range want.Destinations {
		wanted[netip.AddrPortFrom(d.Address, d.Port)] = true
	}
	for _, ap := range sortedKeys(have.dests, compareAddrPort) {
		if wanted[ap] {
			continue
		}
		cur := have.dests[ap]
		switch {
		case !drains(k.Protocol) || in.graceful == 0:
			p.IPVSDelete = append(p.IPVSDelete, ipvs.DeleteDestinationOp(svc.ServiceKey, ap))
			if k.Protocol == inet.UDP {
				p.Conntrack = append(p.Conntrack, conntrack.Filter{Protocol: inet.UDP,
					OrigDst: k.Address, OrigDstPort: k.Port, ReplySrc: ap.Addr()})
			}
		case cur.weight != 0:
			// TCP drains: no new connections, existing ones finish (seed-004).
			p.IPVS = append(p.IPVS, ipvs.UpdateDestinationOp(svc.ServiceKey, masq(ap.Addr(), ap.Port(), 0)))
			p.Drains = append(p.Drains, DrainKey{VS: k, Dest: ap})
		}
	}
}

func masq(a netip.Addr, port uint16, weight int) ipvs.Destination {
	return ipvs.Destination{Addr: a, Port: port, Forward: ipvs.Masq, Weight: weight}
}

func compareAddrPort(a, b netip.AddrPort) int { return a.Compare(b) }
