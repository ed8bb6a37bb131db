package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/proxy"
)

// apply runs p against the kernel in plan order. A failing step does not stop the steps
// after it (one bad object must not block every other Service). It returns the objects
// that failed, with their errors; base, the state p was computed against, becomes the
// applied model with every change that succeeded, and without those of a failed object
// (whose kernel state stays unknown until its retry reads or re-applies it: see resolve).
func (r *Reconciler) apply(ctx context.Context, p *Plan, base *state) failures {
	return r.applyBound(ctx, p, base, nil)
}

// applyBound is apply for a plan whose AddAddrs were bound before it is applied, with the
// outcomes bound (one each, nil when bound; a nil slice: apply binds them itself): a Pass
// run whole binds its VIPs beside its other steps (see Pass.Run).
func (r *Reconciler) applyBound(ctx context.Context, p *Plan, base *state, bound []error) failures {
	failed := failures{}
	done := &Plan{}
	// What makes a virtual server kipvs's (its set members, its VIP) goes in before the
	// virtual server, so that no virtual server kipvs created is ever without them: one
	// that was, once no longer wanted, would look foreign and stay forever.
	res := r.runFilter(ctx, &dataplane.Tx{CreateSets: p.CreateSets, AddMembers: p.AddMembers}, failed)
	failedSets := memberFailures(p.AddMembers, res.FailedSets(dataplane.StepAdd), failed)
	done.AddMembers = withoutSets(p.AddMembers, failedSets)
	failedAddrs := map[netip.Addr]bool{}
	if bound == nil {
		bound = r.kernel.Dummy.EnsureAddresses(p.AddAddrs)
	}
	for i, err := range bound {
		if a := p.AddAddrs[i]; err != nil {
			failedAddrs[a] = true
			failed.add(addrObject(a), fmt.Errorf("bind %s on %s: %w", a, r.kernel.Dummy.Name(), err))
		} else {
			done.AddAddrs = append(done.AddAddrs, a)
			r.count("address", "add", 1)
		}
	}
	ops, unclaimed := claimedOps(r.opts.Family, p, base, failedAddrs, failedSets, r.failedVouchers())
	failedVS := r.applyIPVS(ops, failed)
	for _, k := range unclaimed {
		failedVS[k] = true
		failed.add(vsObject(k), fmt.Errorf("virtual server %s not created: neither its address nor a set member that marks it kipvs's could be added", k))
	}
	done.IPVS = withoutVS(p.IPVS, failedVS)
	if p.Rules != nil {
		r.rulesResult(p.Rules, r.runFilter(ctx, &dataplane.Tx{Rules: p.Rules}, failed).Rules, failed)
	}
	// A virtual server whose delete failed keeps what makes it kipvs's (its VIP and set
	// members), so the next sync, even after a restart, does not take it for a foreign one
	// and retries the delete.
	failedDel := r.applyIPVS(p.IPVSDelete, failed)
	done.IPVSDelete = withoutVS(p.IPVSDelete, failedDel)
	keepAddrs := map[netip.Addr]bool{}
	keepMembers := map[proxy.Member]bool{}
	keep := func(k proxy.VSKey) {
		a, ms := vouchers(r.opts.Family, k)
		keepAddrs[a] = true
		for _, m := range ms {
			keepMembers[m] = true
		}
	}
	for _, op := range p.IPVSDelete {
		if k := vsOf(&op); op.Kind == ipvs.OpDeleteService && failedDel[k] {
			keep(k)
		}
	}
	// So do the virtual servers still kipvs's whose change failed in an earlier plan (a
	// full sync in steps deletes a virtual server in one step and its set members in a
	// later one).
	if len(p.DelMembers) > 0 || len(p.DelAddrs) > 0 {
		for k := range r.failed {
			if _, owned := r.owned[k.VS]; k.Kind == KindVirtualServer && owned {
				keep(k.VS)
			}
		}
	}
	delMembers := make([]proxy.Member, 0, len(p.DelMembers))
	for _, m := range p.DelMembers {
		if !keepMembers[m] {
			delMembers = append(delMembers, m)
		}
	}
	res = r.runFilter(ctx, &dataplane.Tx{DeleteMembers: delMembers}, failed)
	failedSets = memberFailures(delMembers, res.FailedSets(dataplane.StepDelete), failed)
	done.DelMembers = withoutSets(delMembers, failedSets)
	for _, a := range p.DelAddrs {
		if keepAddrs[a] {
			continue
		}
		if _, err := r.kernel.Dummy.RemoveAddress(a); err != nil {
			failed.add(addrObject(a), fmt.Errorf("unbind %s from %s: %w", a, r.kernel.Dummy.Name(), err))
		} else {
			done.DelAddrs = append(done.DelAddrs, a)
			r.count("address", "delete", 1)
		}
	}
	r.cleanConntrack(p.Conntrack)

	now := r.opts.Clock.Now()
	for _, k := range p.Drains {
		if _, ok := r.draining[k]; !ok && !failedVS[k.VS] {
			r.draining[k] = now
		}
	}
	applyToModel(base, done)
	if r.journal != nil {
		// What changed in the kernel, or may have (failed): not what a plan left alone (a
		// voucher kept for a virtual server whose delete failed), whose copy stays true.
		r.journal.record(done)
		r.journal.recordFailed(failed)
		if p.Rules != nil || len(p.CreateSets) > 0 {
			r.journal.rules = true
		}
		if len(p.CreateSets) > 0 {
			r.journal.invalid = true // a set the copy found missing exists now
		}
	}
	for k := range r.draining {
		if vs, ok := base.vs[k.VS]; !ok {
			delete(r.draining, k)
		} else if d, ok := vs.dests[k.Dest]; !ok || d.weight != 0 {
			delete(r.draining, k)
		}
	}
	r.applied = base
	return failed
}

// runFilter runs tx on the filter, counts what changed and records the sets that could not
// be created in failed; the caller takes the member and rule failures from the result.
func (r *Reconciler) runFilter(ctx context.Context, tx *dataplane.Tx, failed failures) dataplane.TxResult {
	if len(tx.CreateSets) == 0 && len(tx.AddMembers) == 0 && tx.Rules == nil && len(tx.DeleteMembers) == 0 {
		return dataplane.TxResult{}
	}
	res := r.kernel.Filter.Run(ctx, tx)
	for s, err := range res.FailedSets(dataplane.StepCreate) {
		failed.add(setObject(s), err)
	}
	r.count("ipset", "add", res.Created)
	r.count("ipset_member", "add", res.Added)
	r.count("ipset_member", "delete", res.Deleted)
	return res
}

// rulesResult records the result of applying the ruleset rs; a failure leaves the rules
// unknown (r.rules "", so the next sync applies them again).
func (r *Reconciler) rulesResult(rs dataplane.Rules, err error, failed failures) {
	if err != nil {
		switch {
		case r.opts.Metrics == nil:
		case r.opts.NFTables:
			r.opts.Metrics.NFTablesSyncFailuresTotal.WithLabelValues(r.family()).Inc()
		default:
			r.opts.Metrics.IPTablesRestoreFailuresTotal.WithLabelValues(r.family()).Inc()
		}
		r.rules = ""
		failed.add(rulesObject(), err)
		return
	}
	r.count("iptables_ruleset", "update", 1)
	if r.opts.Metrics != nil && !r.opts.NFTables {
		for table, n := range rs.Counts() {
			r.opts.Metrics.IPTablesRulesTotal.WithLabelValues(table, r.family()).Set(float64(n))
			r.opts.Metrics.IPTablesRulesLastSync.WithLabelValues(table, r.family()).Set(float64(n))
		}
	}
}

// cleanConntrack removes stale UDP flows. Best effort: a failed cleanup leaves stale flows
// that expire on their own; it is logged, not retried. Measured as kube-proxy's conntrack
// reconciler is, failed or not.
func (r *Reconciler) cleanConntrack(filters []conntrack.Filter) {
	if len(filters) == 0 || r.kernel.Conntrack == nil {
		return
	}
	start := r.opts.Clock.Now()
	n, err := r.kernel.Conntrack.Delete(filters...)
	if err != nil {
		r.opts.Logger.Warn("conntrack cleanup failed", zap.Error(err), zap.Int("flowsDeleted", n))
	} else if n > 0 {
		r.opts.Logger.Debug("deleted stale conntrack flows", zap.Int("flows", n))
	}
	if r.opts.Metrics != nil {
		r.opts.Metrics.ConntrackReconcileLatency.WithLabelValues(r.family()).Observe(r.opts.Clock.Since(start).Seconds())
		r.opts.Metrics.ConntrackDeletedEntries.WithLabelValues(r.family()).Add(float64(n))
	}
}

// withoutVS returns the ops of ops whose virtual server is not in skip (ops itself when
// skip is empty).
func withoutVS(ops []ipvs.Op, skip map[proxy.VSKey]bool) []ipvs.Op {
	if len(skip) == 0 {
		return ops
	}
	out := make([]ipvs.Op, 0, len(ops))
	for _, op := range ops {
		if !skip[vsOf(&op)] {
			out = append(out, op)
		}
	}
	return out
}

// withoutSets returns the members of ms whose set is not in skip.
func withoutSets(ms []proxy.Member, skip map[proxy.Set]bool) []proxy.Member {
	if len(skip) == 0 {
		return ms
	}
	out := make([]proxy.Member, 0, len(ms))
	for _, m := range ms {
		if !skip[m.Set] {
			out = append(out, m)
		}
	}
	return out
}

// applyIPVS applies ops as one batch. It keeps r.owned up to date with the services added
// and deleted, records each failed virtual server in failed (every one of the batch when
// the whole batch failed) and returns them.
func (r *Reconciler) applyIPVS(ops []ipvs.Op, failed failures) map[proxy.VSKey]bool {
	bad := map[proxy.VSKey]bool{}
	if len(ops) == 0 {
		return bad
	}
	err := r.kernel.IPVS.Apply(ops)
	opErr := map[int]error{}
	var be *ipvs.BatchError
	whole := false
	if errors.As(err, &be) {
		for _, oe := range be.Errors {
			opErr[oe.Index] = oe
		}
	} else if err != nil {
		whole = true
		err = fmt.Errorf("apply %d IPVS changes: %w", len(ops), err)
	}
	for i, op := range ops {
		k := vsOf(&op)
		if whole || opErr[i] != nil {
			bad[k] = true
			e := opErr[i]
			if whole {
				e = err
			}
			failed.add(vsObject(k), e)
			continue
		}
		kind, verb := "real_server", "add"
		switch op.Kind {
		case ipvs.OpAddService:
			kind = "virtual_server"
			r.owned[k] = struct{}{}
		case ipvs.OpUpdateService:
			kind, verb = "virtual_server", "update"
		case ipvs.OpDeleteService:
			kind, verb = "virtual_server", "delete"
			delete(r.owned, k)
		case ipvs.OpUpdateDestination:
			verb = "update"
		case ipvs.OpDeleteDestination:
			verb = "delete"
		}
		r.count(kind, verb, 1)
	}
	return bad
}

// failedVouchers returns whether a set member or an address failed in an earlier plan (nil
// when none has: the common case costs nothing).
func (r *Reconciler) failedVouchers() func(ObjectKey) bool {
	for k := range r.failed {
		if k.Kind == KindSetMember || k.Kind == KindAddress {
			return func(k ObjectKey) bool { _, ok := r.failed[k]; return ok }
		}
	}
	return nil
}

// claimedOps drops from p.IPVS the creation of every virtual server (with its real
// servers) none of whose vouchers (see vouchers) is in the kernel: each one this plan tried
// to add failed, or failed in an earlier plan (earlier (nil: none); a full sync in steps
// adds members and addresses in steps before the virtual servers), and base did not hold
// one already. Those keys are returned; the next sync retries them. A set whose add failed
// counts as holding none of the members added.
func claimedOps(f inet.Family, p *Plan, base *state, failedAddrs map[netip.Addr]bool, failedSets map[proxy.Set]bool, earlier func(ObjectKey) bool) ([]ipvs.Op, []proxy.VSKey) {
	if len(failedAddrs) == 0 && len(failedSets) == 0 && earlier == nil {
		return p.IPVS, nil
	}
	adding := map[proxy.Member]bool{}
	for _, m := range p.AddMembers {
		adding[m] = true
	}
	bound := map[netip.Addr]bool{}
	for _, a := range p.AddAddrs {
		bound[a] = true
	}
	claimed := func(k proxy.VSKey) bool {
		a, ms := vouchers(f, k)
		tried := false
		if _, ok := base.addrs[a]; ok {
			return true
		}
		if bound[a] {
			if !failedAddrs[a] {
				return true
			}
			tried = true
		} else if earlier != nil && earlier(addrObject(a)) {
			tried = true
		}
		for _, m := range ms {
			if _, ok := base.members[m]; ok {
				return true
			}
			if adding[m] {
				if !failedSets[m.Set] {
					return true
				}
				tried = true
			} else if earlier != nil && earlier(memberObject(m)) {
				tried = true
			}
		}
		// Nothing of it was tried (no voucher in the plan): not this rule's business.
		return !tried
	}
	var out []ipvs.Op
	var skipped []proxy.VSKey
	skip := map[proxy.VSKey]bool{}
	for _, op := range p.IPVS {
		k := fromIPVSKey(op.Service.ServiceKey)
		if op.Kind == ipvs.OpAddService && !claimed(k) {
			skip[k] = true
			skipped = append(skipped, k)
		}
		if skip[k] {
			continue
		}
		out = append(out, op)
	}
	return out, skipped
}

// memberFailures records each member of ms whose set's batch failed (bad, from the
// filter's result) in failed, with its set's error: what of that batch reached the kernel
// is not known. It returns those sets.
func memberFailures(ms []proxy.Member, bad map[proxy.Set]error, failed failures) map[proxy.Set]bool {
	sets := make(map[proxy.Set]bool, len(bad))
	for s := range bad {
		sets[s] = true
	}
	if len(bad) == 0 {
		return sets
	}
	for _, m := range ms {
		if err, ok := bad[m.Set]; ok {
			failed.add(memberObject(m), err)
		}
	}
	return sets
}

func (r *Reconciler) count(kind, op string, n int) {
	if r.opts.Metrics != nil && n > 0 {
		r.opts.Metrics.ObjectsChanged.WithLabelValues(kind, op, r.family()).Add(float64(n))
	}
}

// applyToModel updates s as if p had been applied successfully.
func applyToModel(s *state, p *Plan) {
	for _, ops := range [][]ipvs.Op{p.IPVS, p.IPVSDelete} {
		for i := range ops {
			applyOpToModel(s, &ops[i])
		}
	}
	for _, a := range p.AddAddrs {
		s.addrs[a] = struct{}{}
	}
	for _, a := range p.DelAddrs {
		delete(s.addrs, a)
	}
	for _, m := range p.AddMembers {
		s.members[m] = struct{}{}
	}
	for _, m := range p.DelMembers {
		delete(s.members, m)
	}
}

// applyOpToModel updates s as if op had been applied successfully.
func applyOpToModel(s *state, op *ipvs.Op) {
	k := fromIPVSKey(op.Service.ServiceKey)
	switch op.Kind {
	case ipvs.OpAddService:
		svc := op.Service
		if svc.Netmask == 0 {
			svc.Netmask = ipvs.FullNetmask(svc.Family)
		}
		s.vs[k] = &vsState{svc: svc, dests: map[netip.AddrPort]destState{}}
	case ipvs.OpUpdateService:
		if vs, ok := s.vs[k]; ok {
			vs.svc = op.Service
		}
	case ipvs.OpDeleteService:
		delete(s.vs, k)
	case ipvs.OpAddDestination, ipvs.OpUpdateDestination:
		if vs, ok := s.vs[k]; ok {
			vs.dests[op.Destination.AddrPort()] = destState{weight: op.Destination.Weight}
		}
	case ipvs.OpDeleteDestination:
		if vs, ok := s.vs[k]; ok {
			delete(vs.dests, op.Destination.AddrPort())
		}
	}
}
