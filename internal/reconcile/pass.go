package reconcile

import (
	"context"
	"errors"
	"net/netip"
	"slices"

	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/proxy"
)

// A Pass is a full sync over a Read, done in steps so that the caller's lock is never held
// for more than a bounded number of objects: the periodic full sync of a large node. Each
// step compares a chunk of objects with the Read, counts their drift and repairs them, as
// FullSyncFrom does for all of them at once; between steps the caller may release its lock
// and run incremental syncs and drains. Those keep recording what they touch in the Read's
// journal until the pass ends, so an object a sync touched before its chunk is compared
// is taken from the model of what was applied, never from the (then stale) copy: a step
// never applies a plan computed from a stale copy. Objects a chunk has repaired are
// current in the model, which the syncs in between diff against as usual.
//
// Chunks go in this order: virtual servers, then set members, then addresses, then the
// rules. A pass that a full sync overtakes (it begins a Read of its own, or a read fails)
// stops: that sync compares everything.
//
// Use: BeginPass and every Step under the lock that serializes the reconciler's methods;
// Prepare without it; Result once Step reported the end.
type Pass struct {
	r  *Reconciler
	rd *Read
	j  *journal
	d  *proxy.Desired
	po *proxy.Options
	// whole: the pass cannot be done in steps (see BeginPass); its one step is FullSyncFrom.
	whole bool

	// The objects to compare: every key the Read, the desired state, the model and the owned
	// list named when the pass began (sorted and made unique by Prepare).
	vs      []proxy.VSKey
	members []proxy.Member
	addrs   []netip.Addr
	next    int // index into the concatenation vs, members, addrs
	// table indexes the Read's virtual servers; vouch holds its members and addresses,
	// those the journal named at BeginPass taken from the model (the ownership rule).
	table     map[proxy.VSKey]*ipvs.Entry
	vouch     *state
	nodeAddrs []netip.Addr

	res     Result
	plan    Plan // the steps' plans, appended
	failed  map[ObjectKey]struct{}
	errs    []error
	err     error // a failure that is not an *ApplyError (the whole pass's)
	over    bool
	aborted bool
}

// BeginPass starts a full sync over rd (filled by ReadKernel) for desired state d, in steps.
// A Read that cannot be completed from the model (see FullSyncFrom), a family whose Read
// failed or found sets missing, or a reconciler without a model yet gets a pass of one
// step: FullSyncFrom.
func (r *Reconciler) BeginPass(d *proxy.Desired, po *proxy.Options, rd *Read) *Pass {
	p := &Pass{r: r, rd: rd, j: rd.journal, d: d, po: po, res: Result{Full: true, Drift: map[string]int{}},
		failed: map[ObjectKey]struct{}{}}
	if rd.err != nil || !rd.valid(r) || r.applied == nil || len(rd.missing) > 0 {
		p.whole = true
		return p
	}
	p.vs, p.members, p.addrs = d.Keys()
	for k := range r.applied.vs {
		p.vs = append(p.vs, k)
	}
	for k := range r.owned {
		p.vs = append(p.vs, k)
	}
	for i := range rd.table {
		p.vs = append(p.vs, fromIPVSKey(rd.table[i].Service.ServiceKey))
	}
	for m := range r.applied.members {
		p.members = append(p.members, m)
	}
	for m := range rd.members {
		p.members = append(p.members, m)
	}
	p.vouch = &state{members: rd.members, addrs: map[netip.Addr]struct{}{}}
	if p.vouch.members == nil {
		p.vouch.members = map[proxy.Member]struct{}{}
	}
	for _, pfx := range rd.addrs {
		if a := pfx.Addr().Unmap(); r.opts.Family.Matches(a) && !dummyif.KernelLinkLocal(pfx) {
			p.vouch.addrs[a] = struct{}{}
		}
	}
	for a := range r.applied.addrs {
		p.addrs = append(p.addrs, a)
	}
	for a := range p.vouch.addrs {
		p.addrs = append(p.addrs, a)
	}
	if po != nil {
		p.nodeAddrs = slices.Clone(po.NodePortAddresses)
	}
	return p
}

// Prepare sorts the pass's objects and indexes the Read. It touches only the pass and the
// Read (no reconciler state), so it runs without the caller's lock.
func (p *Pass) Prepare() {
	if p.whole {
		return
	}
	slices.SortFunc(p.vs, proxy.VSKey.Compare)
	p.vs = slices.Compact(p.vs)
	slices.SortFunc(p.members, proxy.Member.Compare)
	p.members = slices.Compact(p.members)
	slices.SortFunc(p.addrs, netip.Addr.Compare)
	p.addrs = slices.Compact(p.addrs)
	p.table = make(map[proxy.VSKey]*ipvs.Entry, len(p.rd.table))
	for i := range p.rd.table {
		p.table[fromIPVSKey(p.rd.table[i].Service.ServiceKey)] = &p.rd.table[i]
	}
}

// Step compares and repairs up to n more objects of one kind (after the last of them: the
// rules) and reports whether the pass is over.
func (p *Pass) Step(ctx context.Context, n int) bool {
	if p.over {
		return true
	}
	r := p.r
	if p.whole {
		p.res, p.err = r.FullSyncFrom(ctx, p.d, p.po, p.rd)
		p.over = true
		return true
	}
	if r.journal != p.j || r.applied == nil {
		// A full sync began since, or a read failed: that sync compares everything.
		p.aborted, p.over = true, true
		p.rd.release()
		return true
	}
	if p.j.invalid {
		// A sync created a set the copy found missing: the copy of its members cannot be
		// completed from the model. Read the kernel again, all of it.
		r.opts.Logger.Debug("kernel read outdated by a set created during the pass; reading again")
		p.rd.release()
		p.res, p.err = r.FullSync(ctx, p.d, p.po)
		p.over = true
		return true
	}
	n = max(n, 1)
	nv, nm := len(p.vs), len(p.vs)+len(p.members)
	switch i := p.next; {
	case i < nv:
		end := min(i+n, nv)
		p.stepVS(ctx, p.vs[i:end])
		p.next = end
	case i < nm:
		end := min(i+n, nm)
		p.stepMembers(ctx, p.members[i-nv:end-nv])
		p.next = end
	case i < nm+len(p.addrs):
		end := min(i+n, nm+len(p.addrs))
		p.stepAddrs(ctx, p.addrs[i-nm:end-nm])
		p.next = end
	default:
		p.finish(ctx)
	}
	return p.over
}

// Progress is how many objects the steps so far compared, of how many (the rules aside).
func (p *Pass) Progress() (done, total int) {
	return p.next, len(p.vs) + len(p.members) + len(p.addrs)
}

// Over reports whether the pass is over (Step reported it).
func (p *Pass) Over() bool { return p.over }

// Aborted reports that a full sync overtook the pass (it did not finish; that sync did).
func (p *Pass) Aborted() bool { return p.aborted }

// Result is the pass's outcome once Step reported the end: as FullSyncFrom's, with the
// plans of every step appended and the objects that failed in any of them.
func (p *Pass) Result() (Result, error) {
	if p.whole || p.err != nil {
		return p.res, p.err
	}
	p.res.Plan = &p.plan
	if len(p.failed) == 0 {
		return p.res, nil
	}
	keys := make([]ObjectKey, 0, len(p.failed))
	for k := range p.failed {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareObjectKey)
	return p.res, &ApplyError{Failed: keys, Err: errors.Join(p.errs...)}
}

// stepVS compares the virtual servers keys with the Read and repairs them.
func (p *Pass) stepVS(ctx context.Context, keys []proxy.VSKey) {
	r := p.r
	applied := r.applied
	// What vouches for a virtual server, as of now: a sync between steps may have bound a
	// VIP or added a member that makes a virtual server of the copy kipvs's.
	p.j.overlayVouchers(p.vouch, applied)
	chunk := make(map[proxy.VSKey]struct{}, len(keys))
	var retry []ObjectKey
	for _, k := range keys {
		chunk[k] = struct{}{}
		_, failed := r.failed[vsObject(k)]
		if _, touched := p.j.vs[k]; touched {
			// The model is current, except for a failed object: read it again alone.
			if failed {
				retry = append(retry, vsObject(k))
			}
			continue
		}
		var o *vsState
		if e := p.table[k]; e != nil && owns(r.opts.Family, r.opts.ExcludeCIDRs, p.d, p.vouch, k, p.nodeAddrs, r.owned) {
			o = vsFromEntry(e)
		}
		if !failed {
			vsDrift(applied.vs[k], o, p.res.Drift)
		}
		if o == nil {
			delete(applied.vs, k)
		} else {
			applied.vs[k] = o
		}
	}
	unread := r.resolve(applied, retry, p.d)
	// kipvs owns what the model now holds (the apply below keeps the list current).
	for _, k := range keys {
		if _, ok := applied.vs[k]; ok {
			r.owned[k] = struct{}{}
		} else {
			delete(r.owned, k)
		}
	}
	p.rebuildDraining(keys)
	scope := keys
	if len(unread) > 0 {
		scope = slices.DeleteFunc(slices.Clone(keys), func(k proxy.VSKey) bool { _, ok := unread[k]; return ok })
	}
	in := &diffInput{desired: p.d, observed: applied, exclude: r.opts.ExcludeCIDRs, graceful: r.opts.GracefulPeriod}
	plan := diffKeys(in, scope, nil, nil)
	failed := r.apply(ctx, plan, applied)
	for k, err := range unread {
		failed.add(vsObject(k), err)
	}
	p.settle(plan, failed, func(k ObjectKey) bool {
		_, ok := chunk[k.VS]
		return k.Kind == KindVirtualServer && ok
	})
}

// vsFromEntry is the model of a virtual server the Read found.
func vsFromEntry(e *ipvs.Entry) *vsState {
	vs := &vsState{svc: e.Service, dests: make(map[netip.AddrPort]destState, len(e.Destinations))}
	vs.svc.Stats = nil
	for _, dst := range e.Destinations {
		vs.dests[dst.AddrPort()] = destState{weight: dst.Weight, active: dst.ActiveConns, inactive: dst.InactiveConns}
	}
	return vs
}

// vsDrift counts into drift how virtual server o, as the kernel holds it (nil: not there or
// not kipvs's), differs from a, what kipvs applied (nil: none).
func vsDrift(a, o *vsState, drift map[string]int) {
	vs, rs := 0, 0
	switch {
	case a == nil && o == nil:
	case a == nil:
		vs, rs = 1, len(o.dests)
	case o == nil:
		vs, rs = 1, len(a.dests)
	default:
		if !serviceSettingsEqual(a.svc, o.svc) {
			vs = 1
		}
		for ap, ad := range a.dests {
			if od, ok := o.dests[ap]; !ok || od.weight != ad.weight {
				rs++
			}
		}
		for ap := range o.dests {
			if _, ok := a.dests[ap]; !ok {
				rs++
			}
		}
	}
	if vs > 0 {
		drift["virtual_server"] += vs
	}
	if rs > 0 {
		drift["real_server"] += rs
	}
}

// rebuildDraining makes the drain list of the virtual servers keys match the model, as rebuildDraining does for a whole sync.
func (p *Pass) rebuildDraining(keys []proxy.VSKey) {
	r := p.r
	if len(keys) == 0 {
		return
	}
	chunk := make(map[proxy.VSKey]struct{}, len(keys))
	for _, k := range keys {
		chunk[k] = struct{}{}
	}
	was := map[DrainKey]struct{}{}
	for k := range r.draining {
		if _, ok := chunk[k.VS]; ok {
			was[k] = struct{}{}
		}
	}
	next := map[DrainKey]bool{}
	now := r.opts.Clock.Now()
	for _, k := range keys {
		vs := r.applied.vs[k]
		want := p.d.VirtualServer(k)
		if vs == nil || want == nil || k.Protocol == inet.UDP {
			continue
		}
		for ap, dst := range vs.dests {
			if dst.weight != 0 || wants(want, ap) {
				continue
			}
			dk := DrainKey{VS: k, Dest: ap}
			next[dk] = true
			if _, ok := was[dk]; !ok {
				r.draining[dk] = now
			}
		}
	}
	for k := range was {
		if !next[k] {
			delete(r.draining, k)
		}
	}
}

// stepMembers compares the set members ms with the Read and repairs them.
func (p *Pass) stepMembers(ctx context.Context, ms []proxy.Member) {
	r := p.r
	applied := r.applied
	var retry []ObjectKey
	for _, m := range ms {
		_, failed := r.failed[memberObject(m)]
		if _, touched := p.j.members[m]; touched {
			if failed {
				retry = append(retry, memberObject(m))
			}
			continue
		}
		_, have := p.rd.members[m]
		if _, had := applied.members[m]; had != have && !failed {
			p.res.Drift["ipset_member"]++
		}
		if have {
			applied.members[m] = struct{}{}
		} else {
			delete(applied.members, m)
		}
	}
	r.resolve(applied, retry, p.d)
	in := &diffInput{desired: p.d, observed: applied, exclude: r.opts.ExcludeCIDRs, graceful: r.opts.GracefulPeriod}
	plan := diffKeys(in, nil, ms, nil)
	chunk := make(map[proxy.Member]struct{}, len(ms))
	for _, m := range ms {
		chunk[m] = struct{}{}
	}
	p.settle(plan, r.apply(ctx, plan, applied), func(k ObjectKey) bool {
		_, ok := chunk[k.Member]
		return k.Kind == KindSetMember && ok
	})
}

// stepAddrs compares the dummy link's addresses as with the Read and repairs them.
func (p *Pass) stepAddrs(ctx context.Context, as []netip.Addr) {
	r := p.r
	applied := r.applied
	var retry []ObjectKey
	for _, a := range as {
		_, failed := r.failed[addrObject(a)]
		if _, touched := p.j.addrs[a]; touched {
			if failed {
				retry = append(retry, addrObject(a))
			}
			continue
		}
		_, have := p.vouch.addrs[a]
		if _, had := applied.addrs[a]; had != have && !failed {
			p.res.Drift["address"]++
		}
		if have {
			applied.addrs[a] = struct{}{}
		} else {
			delete(applied.addrs, a)
		}
	}
	r.resolve(applied, retry, p.d)
	in := &diffInput{desired: p.d, observed: applied, exclude: r.opts.ExcludeCIDRs, graceful: r.opts.GracefulPeriod}
	plan := diffKeys(in, nil, nil, as)
	chunk := make(map[netip.Addr]struct{}, len(as))
	for _, a := range as {
		chunk[a] = struct{}{}
	}
	p.settle(plan, r.apply(ctx, plan, applied), func(k ObjectKey) bool {
		_, ok := chunk[k.Addr]
		return k.Kind == KindAddress && ok
	})
}

// finish compares and applies the rules, ends the journal and reports the drift.
func (p *Pass) finish(ctx context.Context) {
	r := p.r
	observed := p.rd.rules.String()
	if r.rules != "" && !p.j.rules && observed != r.rules {
		p.res.Drift["iptables_rules"]++
	}
	rs := r.kernel.Filter.Rules(proxy.BuildFilter(p.po, p.d))
	want := rs.String()
	plan := &Plan{}
	if (p.j.rules && want != r.rules) || (!p.j.rules && want != observed) {
		plan.Rules = rs
	}
	r.rules = want
	r.journal = nil
	p.rd.release()
	p.settle(plan, r.apply(ctx, plan, r.applied), func(k ObjectKey) bool {
		return k.Kind == KindRules || k.Kind == KindSet
	})
	if r.opts.Metrics != nil {
		for kind, n := range p.res.Drift {
			r.opts.Metrics.DriftRepaired.WithLabelValues(kind, r.family()).Add(float64(n))
		}
	}
	if len(p.res.Drift) > 0 {
		r.opts.Logger.Warn("kernel state drifted from what kipvs applied; repairing", zap.Any("drift", p.res.Drift))
	}
	p.over = true
}

// settle records a step's outcome (see Reconciler.settle) and keeps its plan and failures.
func (p *Pass) settle(plan *Plan, failed failures, inScope func(ObjectKey) bool) {
	p.plan.append(plan)
	err := p.r.settle(failed, inScope, nil)
	if ae, ok := AsApplyError(err); ok {
		for _, k := range ae.Failed {
			p.failed[k] = struct{}{}
		}
		p.errs = append(p.errs, ae.Err)
	}
}

// append adds q's changes to p's, group by group.
func (p *Plan) append(q *Plan) {
	p.CreateSets = append(p.CreateSets, q.CreateSets...)
	p.AddMembers = append(p.AddMembers, q.AddMembers...)
	p.AddAddrs = append(p.AddAddrs, q.AddAddrs...)
	p.IPVS = append(p.IPVS, q.IPVS...)
	if q.Rules != nil {
		p.Rules = q.Rules
	}
	p.IPVSDelete = append(p.IPVSDelete, q.IPVSDelete...)
	p.DelMembers = append(p.DelMembers, q.DelMembers...)
	p.DelAddrs = append(p.DelAddrs, q.DelAddrs...)
	p.Conntrack = append(p.Conntrack, q.Conntrack...)
	p.Drains = append(p.Drains, q.Drains...)
}
