package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/proxy"
)

// apply runs p against the kernel in plan order. A failing step does not stop the steps
// after it (one bad object must not block every other Service); all errors are returned
// joined. On success base, the state p was computed against, becomes the applied model; on
// any error the model is dropped so the next sync is full and reads the kernel back.
func (r *Reconciler) apply(ctx context.Context, p *Plan, base *state) error {
	if r.journal != nil {
		r.journal.record(p)
	}
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range p.CreateSets {
		if err := r.kernel.Filter.CreateSet(s); err != nil {
			fail(err)
		} else {
			r.count("ipset", "add", 1)
		}
	}
	// What makes a virtual server kipvs's (its VIP, its set members) goes in before the
	// virtual server, so that no virtual server kipvs created is ever without them: one
	// that was, once no longer wanted, would look foreign and stay forever.
	failedAddrs := map[netip.Addr]bool{}
	for _, a := range p.AddAddrs {
		if _, err := r.kernel.Dummy.EnsureAddress(a); err != nil {
			failedAddrs[a] = true
			fail(fmt.Errorf("bind %s on %s: %w", a, r.kernel.Dummy.Name(), err))
		} else {
			r.count("address", "add", 1)
		}
	}
	failedSets := map[proxy.Set]bool{}
	fail(r.applyMembers(p.AddMembers, true, failedSets))
	ops, unclaimed := claimedOps(r.opts.Family, p, base, failedAddrs, failedSets)
	fail(r.applyIPVS(ops, nil))
	if len(unclaimed) > 0 {
		fail(fmt.Errorf("virtual servers %v not created: neither their address nor a set member that marks them kipvs's could be added", unclaimed))
	}
	if p.Rules != nil {
		if err := r.kernel.Filter.ApplyRules(ctx, p.Rules); err != nil {
			if r.opts.Metrics != nil {
				r.opts.Metrics.IPTablesRestoreFailuresTotal.WithLabelValues(r.family()).Inc()
			}
			fail(err)
		} else {
			r.count("iptables_ruleset", "update", 1)
			if r.opts.Metrics != nil {
				for table, n := range p.Rules.Counts() {
					r.opts.Metrics.IPTablesRulesTotal.WithLabelValues(table, r.family()).Set(float64(n))
					r.opts.Metrics.IPTablesRulesLastSync.WithLabelValues(table, r.family()).Set(float64(n))
				}
			}
		}
	}
	// A virtual server whose delete failed keeps what makes it kipvs's (its VIP and set
	// members), so the next sync, even after a restart, does not take it for a foreign one
	// and retries the delete.
	keepAddrs := map[netip.Addr]bool{}
	keepMembers := map[proxy.Member]bool{}
	fail(r.applyIPVS(p.IPVSDelete, func(k proxy.VSKey) {
		a, ms := vouchers(r.opts.Family, k)
		keepAddrs[a] = true
		for _, m := range ms {
			keepMembers[m] = true
		}
	}))
	delMembers := make([]proxy.Member, 0, len(p.DelMembers))
	for _, m := range p.DelMembers {
		if !keepMembers[m] {
			delMembers = append(delMembers, m)
		}
	}
	fail(r.applyMembers(delMembers, false, nil))
	for _, a := range p.DelAddrs {
		if keepAddrs[a] {
			continue
		}
		if _, err := r.kernel.Dummy.RemoveAddress(a); err != nil {
			fail(fmt.Errorf("unbind %s from %s: %w", a, r.kernel.Dummy.Name(), err))
		} else {
			r.count("address", "delete", 1)
		}
	}
	if len(p.Conntrack) > 0 && r.kernel.Conntrack != nil {
		// Best effort: a failed cleanup leaves stale flows that expire on their own; it is
		// logged, not retried through a full resync. Measured as kube-proxy's conntrack
		// reconciler is, failed or not.
		start := r.opts.Clock.Now()
		n, err := r.kernel.Conntrack.Delete(p.Conntrack...)
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

	now := r.opts.Clock.Now()
	for _, k := range p.Drains {
		if _, ok := r.draining[k]; !ok {
			r.draining[k] = now
		}
	}
	if len(errs) > 0 {
		r.applied = nil
		r.rules = ""
		if r.journal != nil {
			r.journal.invalid = true
		}
		return errors.Join(errs...)
	}
	applyToModel(base, p)
	for k := range r.draining {
		if vs, ok := base.vs[k.VS]; !ok {
			delete(r.draining, k)
		} else if d, ok := vs.dests[k.Dest]; !ok || d.weight != 0 {
			delete(r.draining, k)
		}
	}
	r.applied = base
	return nil
}

// applyIPVS applies ops as one batch. It keeps r.owned up to date with the services added
// and deleted, and calls failedDelete (if not nil) for each service whose delete failed
// (every one, when the whole batch failed).
func (r *Reconciler) applyIPVS(ops []ipvs.Op, failedDelete func(proxy.VSKey)) error {
	if len(ops) == 0 {
		return nil
	}
	err := r.kernel.IPVS.Apply(ops)
	failed := map[int]bool{}
	var be *ipvs.BatchError
	whole := false
	if errors.As(err, &be) {
		for _, oe := range be.Errors {
			failed[oe.Index] = true
		}
	} else if err != nil {
		whole = true
	}
	for i, op := range ops {
		k := fromIPVSKey(op.Service.ServiceKey)
		if whole || failed[i] {
			if op.Kind == ipvs.OpDeleteService && failedDelete != nil {
				failedDelete(k)
			}
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
	if whole {
		return fmt.Errorf("apply %d IPVS changes: %w", len(ops), err)
	}
	if err != nil {
		return fmt.Errorf("apply IPVS changes: %w", err)
	}
	return nil
}

// claimedOps drops from p.IPVS the creation of every virtual server (with its real
// servers) none of whose vouchers (see vouchers) is in the kernel: each one this plan tried
// to add failed, and base did not hold one already. Those keys are returned; the next sync
// retries them. A set whose add failed counts as holding none of the members added.
func claimedOps(f inet.Family, p *Plan, base *state, failedAddrs map[netip.Addr]bool, failedSets map[proxy.Set]bool) ([]ipvs.Op, []proxy.VSKey) {
	if len(failedAddrs) == 0 && len(failedSets) == 0 {
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

// applyMembers adds or deletes ms, one batch per set; each set whose batch failed goes into
// failedSets (if not nil).
func (r *Reconciler) applyMembers(ms []proxy.Member, add bool, failedSets map[proxy.Set]bool) error {
	if len(ms) == 0 {
		return nil
	}
	update, verb := r.kernel.Filter.AddMembers, "add"
	if !add {
		update, verb = r.kernel.Filter.DeleteMembers, "delete"
	}
	n, failed, err := update(ms)
	for _, s := range failed {
		if failedSets != nil {
			failedSets[s] = true
		}
	}
	r.count("ipset_member", verb, n)
	return err
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
