package reconcile

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/proxy"
)

// The steps of a Pass: what each compares with the Read and repairs (Step calls them in
// order; see Pass).

// setup is the first step: the dummy link, and the sets the Read found missing (their
// members are known: none).
func (p *Pass) setup(ctx context.Context) {
	r := p.r
	if _, err := r.kernel.Dummy.EnsureLink(); err != nil {
		p.fail(fmt.Errorf("ensure dummy link %s: %w", r.kernel.Dummy.Name(), err))
		return
	}
	p.started = true
	if len(p.rd.missing) == 0 {
		return
	}
	plan := &Plan{CreateSets: p.rd.missing}
	failed := p.apply(ctx, plan, r.applied)
	p.settleCreated(plan, failed, func(k ObjectKey) bool { return k.Kind == KindSet }, plan.CreateSets)
}

// apply applies a step's plan. It is not journaled: the journal holds what other syncs
// touched since the Read (their objects' copies are stale); a step's own objects are
// compared once, and the copy of the others is what the Read found, as in FullSyncFrom,
// which applies its whole plan after comparing everything (a member a step adds does not
// make a virtual server of the copy kipvs's in this pass).
func (p *Pass) apply(ctx context.Context, plan *Plan, base *state) failures {
	return p.applyBound(ctx, plan, base, nil)
}

// applyBound is apply for a plan whose addresses were bound already (see
// Reconciler.applyBound).
func (p *Pass) applyBound(ctx context.Context, plan *Plan, base *state, bound []error) failures {
	r := p.r
	j := r.journal
	r.journal = nil
	defer func() { r.journal = j }()
	return r.applyBound(ctx, plan, base, bound)
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
		if !failed && !p.adopting {
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
	failed := p.apply(ctx, plan, applied)
	for k, err := range unread {
		failed.add(vsObject(k), err)
	}
	p.settle(plan, failed, func(k ObjectKey) bool {
		_, ok := chunk[k.VS]
		return k.Kind == KindVirtualServer && ok
	})
	// What vouched for a virtual server that is gone now stays only while its delete has not
	// succeeded (apply keeps it): a sync between steps may have kept it after the member
	// and address steps compared it. Compared again with the deletes.
	for _, k := range keys {
		if _, ok := applied.vs[k]; ok || p.d.VirtualServer(k) != nil {
			continue
		}
		a, ms := vouchers(r.opts.Family, k)
		if _, ok := applied.addrs[a]; ok && !p.d.HasAddress(a) {
			p.delAddrs = append(p.delAddrs, a)
		}
		for _, m := range ms {
			if _, ok := applied.members[m]; ok && !p.d.HasMember(m) {
				p.delMembers = append(p.delMembers, m)
			}
		}
	}
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
		if vs == nil || want == nil || !drains(k.Protocol) {
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
		if _, had := applied.members[m]; had != have && !failed && !p.adopting {
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
	p.delMembers = append(p.delMembers, plan.DelMembers...)
	plan.DelMembers = nil
	adds := make(map[proxy.Member]struct{}, len(plan.AddMembers))
	for _, m := range plan.AddMembers {
		adds[m] = struct{}{}
	}
	p.settle(plan, p.apply(ctx, plan, applied), func(k ObjectKey) bool {
		_, ok := adds[k.Member]
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
		if _, had := applied.addrs[a]; had != have && !failed && !p.adopting {
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
	p.delAddrs = append(p.delAddrs, plan.DelAddrs...)
	plan.DelAddrs = nil
	adds := make(map[netip.Addr]struct{}, len(plan.AddAddrs))
	for _, a := range plan.AddAddrs {
		adds[a] = struct{}{}
	}
	if p.binds != nil && len(plan.AddAddrs) > 0 {
		p.binds.submit(plan, adds, as[0]) // settled before a virtual server needs them
		return
	}
	p.settle(plan, p.apply(ctx, plan, applied), func(k ObjectKey) bool {
		_, ok := adds[k.Addr]
		return k.Kind == KindAddress && ok
	})
}

// stepDeletes applies the member and address deletes the earlier steps found, compared
// again with the model and the desired state (a sync may have changed them since).
func (p *Pass) stepDeletes(ctx context.Context, ms []proxy.Member, as []netip.Addr) {
	r := p.r
	in := &diffInput{desired: p.d, observed: r.applied, exclude: r.opts.ExcludeCIDRs, graceful: r.opts.GracefulPeriod}
	plan := diffKeys(in, nil, ms, as)
	members := make(map[proxy.Member]struct{}, len(ms))
	for _, m := range ms {
		members[m] = struct{}{}
	}
	addrs := make(map[netip.Addr]struct{}, len(as))
	for _, a := range as {
		addrs[a] = struct{}{}
	}
	p.settle(plan, p.apply(ctx, plan, r.applied), func(k ObjectKey) bool {
		_, m := members[k.Member]
		_, a := addrs[k.Addr]
		return (k.Kind == KindSetMember && m) || (k.Kind == KindAddress && a)
	})
}

// finish compares and applies the rules, ends the journal and reports the drift.
func (p *Pass) finish(ctx context.Context) {
	r := p.r
	observed := p.rd.rules.String()
	if r.rules != "" && !p.j.rules && observed != r.rules && !p.adopting {
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
	if p.adopting {
		if ce := r.opts.Logger.Check(zap.DebugLevel, "adoption plan"); ce != nil && plan.Rules != nil {
			ce.Write(zap.String("plan", "apply iptables rules"), zap.Strings("rules", rs.Diff(p.rd.rules)))
		}
	}
	p.settle(plan, p.apply(ctx, plan, r.applied), func(k ObjectKey) bool {
		return k.Kind == KindRules || k.Kind == KindSet
	})
	p.rd.release()
	if p.adopting {
		if p.res.Changes > 0 {
			r.opts.Logger.Info("adopting existing kernel state", zap.Int("changes", p.res.Changes))
		}
		r.adopted = true
	} else if r.opts.Metrics != nil {
		for kind, n := range p.res.Drift {
			r.opts.Metrics.DriftRepaired.WithLabelValues(kind, r.family()).Add(float64(n))
		}
	}
	if len(p.res.Drift) > 0 {
		r.opts.Logger.Warn("kernel state drifted from what kipvs applied; repairing", zap.Any("drift", p.res.Drift))
	}
	p.over = true
}

// settle records a step's outcome (see Reconciler.settle) and counts its changes (keeps
// its plan if asked) and failures.
func (p *Pass) settle(plan *Plan, failed failures, inScope func(ObjectKey) bool) {
	p.settleCreated(plan, failed, inScope, nil)
}

// settleCreated is settle for a step that created the sets created.
func (p *Pass) settleCreated(plan *Plan, failed failures, inScope func(ObjectKey) bool, created []dataplane.SetSpec) {
	p.res.Changes += plan.Len()
	if p.keepPlan {
		p.plan.append(plan)
	}
	if p.adopting && !plan.Empty() && plan.Rules == nil { // the rules: see finish
		if ce := p.r.opts.Logger.Check(zap.DebugLevel, "adoption plan"); ce != nil {
			ce.Write(zap.String("plan", plan.String()))
		}
	}
	err := p.r.settle(failed, inScope, created)
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
