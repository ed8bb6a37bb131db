package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/watch"
)

// sync runs one sync under the daemon lock (syncThenCollect is the runner's SyncFunc). An
// incremental sync builds only the changed Services and applies only what they touched,
// with the failed objects due for their retry; a full sync (first, after a failed kernel
// read, or after a node or scheduler change that alters the options) rebuilds everything
// and reads the kernel back. The periodic full sync is periodicRead and periodicFinish.
func (d *Daemon) sync(ctx context.Context, full bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.syncLocked(ctx, full)
}

// syncThenCollect is the runner's SyncFunc: sync, then, after a full sync, collect. The
// health tracker sees it run (/livez fails when one runs too long: a stuck process).
func (d *Daemon) syncThenCollect(ctx context.Context, full bool) error {
	end := d.health.Begin("sync")
	err := d.sync(ctx, full)
	end()
	if full {
		d.collect()
	}
	return err
}

// collect starts Deps.Collect, if set and not already running, in the background.
func (d *Daemon) collect() {
	if d.deps.Collect == nil || !d.collecting.CompareAndSwap(false, true) {
		return
	}
	d.collectWG.Go(func() {
		defer d.collecting.Store(false)
		d.deps.Collect()
	})
}

func (d *Daemon) syncLocked(ctx context.Context, full bool) error {
	start := d.deps.Clock.Now()
	src := d.deps.Source
	d.checkClusterCIDR()
	host, err := d.readHost()
	if err != nil {
		return fmt.Errorf("read the node's addresses: %w", err)
	}
	for _, f := range d.families {
		full = full || f.rec.NeedsFull()
	}

	var changes watch.Changes
	var snap *watch.Snapshot
	if !full {
		changes, err = src.Pending()
		if err != nil {
			return err
		}
		for name, info := range changes.Services {
			d.endpointNodes.update(name, info)
		}
		d.probeSchedulers(changes.Services, false)
		for _, f := range d.families {
			if !f.opts.Equal(d.options(f.ipFamily, src.Node(), host)) {
				full = true // node labels, pod CIDRs, addresses or schedulers changed: rebuild all
			}
		}
	}
	var reads []*reconcile.Read
	var readTook time.Duration
	if full {
		s, err := src.All()
		if err != nil {
			return err
		}
		snap = &s
		changes = mergeChanges(changes, s.Pending)
		d.endpointNodes.reset(s.Services)
		d.probeSchedulers(s.Services, true)
		d.removeProbeLeftover()
		// One read of the kernel for every family: the IPVS table and the dummy link are
		// node-wide.
		reads = d.beginReads()
		readStart := d.deps.Clock.Now()
		err = reconcile.ReadKernel(ctx, reads...)
		readTook = d.deps.Clock.Since(readStart)
		if err != nil {
			return d.readFailed(ctx, "full sync", err)
		}
		d.observeConnections(reads)
	}
	d.metrics.ServiceChangesTotal.Add(float64(changes.ServiceEvents))
	d.metrics.EndpointChangesTotal.Add(float64(changes.EndpointEvents))

	err = d.syncFamilies(ctx, full, readTook, changes.TriggerTimes, func(i int, f *family) error {
		if full {
			return d.fullSync(ctx, f, snap, host, reads[i])
		}
		return d.incrementalSync(ctx, f, changes)
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if full {
		d.syncHealthChecks(ctx, nil)
	} else {
		d.syncHealthChecks(ctx, changes.Services)
	}
	return d.synced(ctx, err, full, len(changes.Services), start)
}

// syncFamilies runs one sync step per family, timing each into the sync metrics (full or
// partial; read is the time the kernel read shared by the families took, counted in each).
// A family that synced is healthy and observes the network programming latency of the
// changes it carried (triggers).
func (d *Daemon) syncFamilies(ctx context.Context, full bool, read time.Duration, triggers map[types.NamespacedName][]time.Time, step func(int, *family) error) error {
	var errs []error
	for i, f := range d.families {
		fam := f.ipFamily.String()
		fstart := d.deps.Clock.Now()
		ferr := step(i, f)
		if ferr != nil && ctx.Err() != nil {
			// Shutting down: the sync was interrupted (its iptables-save or -restore
			// killed), which is neither a sync error nor worth an ERROR line.
			return ctx.Err()
		}
		elapsed := (d.deps.Clock.Since(fstart) + read).Seconds()
		d.metrics.SyncProxyRulesLatency.WithLabelValues(fam).Observe(elapsed)
		if full {
			d.metrics.SyncFullProxyRulesLatency.WithLabelValues(fam).Observe(elapsed)
			d.metrics.SyncFull.WithLabelValues(fam).Inc()
		} else {
			d.metrics.SyncPartialProxyRulesLatency.WithLabelValues(fam).Observe(elapsed)
			d.metrics.SyncIncr.WithLabelValues(fam).Inc()
		}
		d.metrics.NoLocalEndpointsTotal.WithLabelValues("internal", fam).Set(float64(len(f.noLocalInternal)))
		d.metrics.NoLocalEndpointsTotal.WithLabelValues("external", fam).Set(float64(len(f.noLocalExternal)))
		if ferr != nil {
			d.metrics.SyncErrors.WithLabelValues(fam).Inc()
			if !reconcile.IsApplyError(ferr) {
				errs = append(errs, fmt.Errorf("%s: %w", fam, ferr))
				continue
			}
			// Some objects failed; everything else is applied, and the reconciler retries
			// those objects alone: no full sync, and other changes do not wait. As in
			// kube-proxy, a virtual server, address or set member that fails leaves the
			// node healthy; rules that fail to apply do not (/healthz, last timestamp).
			d.log.Warn("some kernel objects were not applied; retrying each with backoff", zap.String("family", fam), zap.Error(ferr))
			d.reportRefusedVirtualServers(f, ferr)
		}
		now := d.deps.Clock.Now()
		if !f.rec.HasFailed(reconcile.KindRules) {
			d.metrics.SyncProxyRulesLastTimestamp.WithLabelValues(fam).Set(float64(now.UnixNano()) / 1e9)
			d.health.Updated(fam)
		}
		for name, times := range triggers {
			if f.desired.Service(name) == nil {
				// Not a Service of this family (no cluster IP of it): as upstream, whose
				// proxier of a family sees only that family's EndpointSlices.
				continue
			}
			for _, t := range times {
				d.metrics.NetworkProgrammingLatency.WithLabelValues(fam).Observe(now.Sub(t).Seconds())
			}
		}
	}
	return errors.Join(errs...)
}

// reasonVirtualServerRefused is the Warning Event on a Service whose virtual server this
// node's kernel refused.
const reasonVirtualServerRefused = "FailedToProgramVirtualServer"

// reportRefusedVirtualServers sends a Warning Event on the Service of each virtual server
// the kernel refused in this sync (ferr, an *ApplyError), naming it and the kernel's error,
// so the Service's owner sees it and not only this node's log. The virtual server is
// retried alone with backoff; the aggregator keeps it to one Event a minute per Service.
func (d *Daemon) reportRefusedVirtualServers(f *family, ferr error) {
	ae, ok := reconcile.AsApplyError(ferr)
	if !ok || d.deps.Events == nil {
		return
	}
	errs := map[reconcile.ObjectKey]error{}
	for _, s := range f.rec.Failed() {
		errs[s.Key] = s.Err
	}
	for _, k := range ae.Failed {
		if k.Kind != reconcile.KindVirtualServer {
			continue
		}
		owners := f.desired.Claimants(k.VS)
		if len(owners) == 0 {
			continue // a delete that failed: no Service wants it any more
		}
		d.deps.Events.Warn(owners[0], reasonVirtualServerRefused,
			fmt.Sprintf("the kernel refused virtual server %s on node %s: %v; retrying with backoff", k.VS, d.nodeName, errs[k]))
	}
}

// synced ends a sync: pending-change gauges, the log line, readiness.
func (d *Daemon) synced(ctx context.Context, err error, full bool, services int, start time.Time) error {
	if d.events != nil {
		d.events.flush() // what this sync found goes out now, one Event per Service and reason
	}
	svc, eps := d.deps.Source.PendingCounts()
	d.metrics.ServiceChangesPending.Set(float64(svc))
	d.metrics.EndpointChangesPending.Set(float64(eps))
	if err != nil {
		d.log.Error("sync failed; retrying as a full sync with backoff", zap.Bool("full", full), zap.Error(err))
		return err
	}
	d.log.Debug("synced", zap.Bool("full", full), zap.Int("services", services), zap.Duration("took", d.deps.Clock.Since(start)))
	if !d.ready {
		d.ready = true
		d.removeLeftovers(ctx)
	}
	return nil
}

// nextRetry is when the earliest object that failed to apply is due for its retry, every
// family (zero: none); the runner runs an incremental sync then.
func (d *Daemon) nextRetry() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	var next time.Time
	for _, f := range d.families {
		if t := f.rec.NextRetry(); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// readFailed ends a sync (what) whose read of the kernel failed: ctx's error when it ended
// (shutting down), else err, counted and logged; the runner retries it as a full sync.
func (d *Daemon) readFailed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, f := range d.families {
		d.metrics.SyncErrors.WithLabelValues(f.ipFamily.String()).Inc()
	}
	d.log.Error(what+" failed to read the kernel; retrying as a full sync with backoff", zap.Error(err))
	return err
}

// beginReads starts a kernel read for every family (under d.mu).
func (d *Daemon) beginReads() []*reconcile.Read {
	reads := make([]*reconcile.Read, len(d.families))
	for i, f := range d.families {
		reads[i] = f.rec.BeginRead()
	}
	return reads
}

// periodicRead is the first part of the periodic full sync (the runner's PeriodicFunc),
// which runs beside incremental syncs: it reads the kernel, every family at once, without
// holding d.mu (reading the IPVS table, one dump of the real servers per virtual server, is
// most of a periodic sync's time), then compares the read with the desired state and
// repairs the drift in steps of reconcile.StepSize objects (as pace says), taking d.mu for
// one step at a time, so a change waits for one step at most, not for the whole comparison
// (runPasses). What is left for periodicFinish is the bookkeeping.
func (d *Daemon) periodicRead(ctx context.Context, pace passPace) (func(context.Context) error, error) {
	defer d.health.Begin("periodic full sync's kernel read and comparison")()
	d.mu.Lock()
	reads := d.beginReads()
	d.mu.Unlock()
	start := d.deps.Clock.Now()
	if err := reconcile.ReadKernel(ctx, reads...); err != nil {
		return nil, d.readFailed(ctx, "periodic full sync", err)
	}
	took := d.deps.Clock.Since(start)
	d.log.Debug("periodic sync read the kernel", zap.Duration("took", took))
	d.observeConnections(reads)
	passes := d.runPasses(ctx, reads, pace)
	took = d.deps.Clock.Since(start)
	return func(ctx context.Context) error {
		defer d.collect()
		defer d.health.Begin("periodic full sync")()
		return d.periodicFinish(ctx, reads, passes, took)
	}, nil
}

// passPace is how a periodic full sync steps through its passes (runPasses); the zero
// value is the daemon's. Only this package's tests set it (runHooks).
type passPace struct {
	// chunk is how many objects one step compares under d.mu (0: reconcile.StepSize).
	chunk int
	// stepped, if set, is called after each step, without d.mu.
	stepped func([]*reconcile.Pass)
}

// runPasses runs a reconcile.Pass of every family over its read (reconcile.RunPasses: one
// step at a time under d.mu, as pace says). It returns nil, having compared nothing, when a
// family needs a full sync or its options changed (periodicFinish runs that full sync), and
// when ctx ends.
func (d *Daemon) runPasses(ctx context.Context, reads []*reconcile.Read, pace passPace) []*reconcile.Pass {
	passes := d.beginPasses(reads)
	if passes == nil {
		return nil
	}
	var stepped func()
	if pace.stepped != nil {
		stepped = func() { pace.stepped(passes) }
	}
	if !reconcile.RunPasses(ctx, &d.mu, passes, cmp.Or(pace.chunk, reconcile.StepSize), stepped) {
		return nil
	}
	return passes
}

// beginPasses begins a pass of every family over its read (under d.mu); nil when a family
// needs a full sync or its options changed. RunPasses collects and prepares them.
func (d *Daemon) beginPasses(reads []*reconcile.Read) []*reconcile.Pass {
	d.mu.Lock()
	defer d.mu.Unlock()
	host, err := d.readHost()
	if err != nil {
		return nil
	}
	for _, f := range d.families {
		if f.rec.NeedsFull() || !f.opts.Equal(d.options(f.ipFamily, d.deps.Source.Node(), host)) {
			return nil
		}
	}
	passes := make([]*reconcile.Pass, len(d.families))
	for i, f := range d.families {
		passes[i] = f.rec.BeginPass(f.desired, &f.opts, reads[i])
	}
	return passes
}

// observeConnections hands the connection counts of the table reads found to the traffic
// metrics (svcstats.Connections), so that a scrape need not read every real server.
func (d *Daemon) observeConnections(reads []*reconcile.Read) {
	tables := make([][]ipvs.Entry, len(reads))
	for i, rd := range reads {
		tables[i] = rd.Table()
	}
	d.conns.Observe(d.deps.Clock.Now(), tables...)
}

// periodicFinish is the second part of the periodic full sync (took: how long the first
// part took; the sync duration metrics include it), under d.mu: each family's result of
// its pass, which compared its desired state, kept current by the incremental syncs, with
// the read (objects synced during the read taken from what was applied) and repaired the
// drift. Without passes (nil), each family does that comparison here, at once. Desired
// state is not rebuilt unless the options changed (then, or when a family needs a full
// sync, this is a full sync of its own).
func (d *Daemon) periodicFinish(ctx context.Context, reads []*reconcile.Read, passes []*reconcile.Pass, took time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := d.deps.Clock.Now()
	d.checkClusterCIDR()
	host, err := d.readHost()
	if err != nil {
		return fmt.Errorf("read the node's addresses: %w", err)
	}
	d.reprobeSchedulers()
	d.removeProbeLeftover()
	for _, f := range d.families {
		if f.rec.NeedsFull() || !f.opts.Equal(d.options(f.ipFamily, d.deps.Source.Node(), host)) {
			return d.syncLocked(ctx, true)
		}
	}
	if passes != nil && !slices.ContainsFunc(passes, func(p *reconcile.Pass) bool { return !p.Aborted() }) {
		return nil // a full sync overtook every pass, and did their work
	}
	err = d.syncFamilies(ctx, true, took, nil, func(i int, f *family) error {
		var res reconcile.Result
		var err error
		switch {
		case passes == nil:
			res, err = f.rec.FullSyncFrom(ctx, f.desired, &f.opts, reads[i])
		case passes[i].Aborted():
			return nil
		default:
			res, err = passes[i].Result()
		}
		if err == nil && res.Changes > 0 {
			d.log.Info("full sync applied changes", zap.String("family", f.ipFamily.String()), zap.Int("changes", res.Changes),
				zap.Int("services", f.desired.NumServices()))
		}
		return err
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.syncHealthChecks(ctx, nil)
	return d.synced(ctx, err, true, 0, start)
}

func (d *Daemon) fullSync(ctx context.Context, f *family, snap *watch.Snapshot, host hostState, rd *reconcile.Read) error {
	start := d.deps.Clock.Now()
	f.opts = d.options(f.ipFamily, snap.Node, host)
	f.desired = proxy.NewDesired(f.ipFamily)
	f.desired.SetMemberLimit(f.opts.MaxSetMembers)
	f.desired.RealServerLimit(f.opts.MaxRealServers)
	clear(f.noLocalInternal)
	clear(f.noLocalExternal)
	seen := map[types.NamespacedName]bool{}
	built := make([]*proxy.ServiceState, 0, len(snap.Services))
	for name, info := range snap.Services {
		st := proxy.BuildService(proxy.ServiceInput{Service: info.Service, Slices: info.Slices}, &f.opts)
		if st == nil {
			st = &proxy.ServiceState{Name: name}
		}
		built = append(built, st)
		seen[name] = true
	}
	// Smallest first, so that when sets are short of room (--kipvs-max-set-members) the
	// largest Services are the ones held back, whatever their names or the order they came in.
	slices.SortFunc(built, func(a, b *proxy.ServiceState) int {
		return cmp.Or(cmp.Compare(len(a.Members), len(b.Members)), cmp.Compare(a.Name.String(), b.Name.String()))
	})
	for _, st := range built {
		f.desired.Update(st.Name, st, nil)
		d.track(f, st.Name, f.desired.Service(st.Name))
	}
	d.trackReadmitted(f)
	for k := range d.problems {
		if k.family == f.ipFamily && !seen[k.svc] {
			delete(d.problems, k)
		}
	}
	// Conflicts are known once every Service is in.
	for name := range snap.Services {
		d.reportService(f, name)
	}
	d.countNotProgrammed(f)
	// Every step under d.mu (this sync holds it): the model is complete only at the end
	// (a first sync), and each step's plan is applied and dropped before the next is made.
	// The VIPs are bound beside the steps after theirs (Pass.Run).
	prepared := d.deps.Clock.Now()
	p := f.rec.BeginPass(f.desired, &f.opts, rd)
	p.Run(ctx, reconcile.StepSize)
	res, err := p.Result()
	if err != nil {
		return err
	}
	if res.Changes > 0 {
		// Where a first sync's time goes: building the desired state, then the kernel.
		// The binds of the VIPs (binding: the kernel's time in them; bound: when the last
		// ended, from the apply's start) go beside the steps, which waited for them.
		t := p.RunTimes()
		d.log.Info("full sync applied changes", zap.String("family", f.ipFamily.String()), zap.Int("changes", res.Changes),
			zap.Int("services", f.desired.NumServices()), zap.Duration("build", prepared.Sub(start)),
			zap.Duration("apply", d.deps.Clock.Since(prepared)), zap.Duration("binding", t.Binding),
			zap.Duration("bound", t.Bound), zap.Duration("waited", t.Waited))
	}
	return nil
}

func (d *Daemon) incrementalSync(ctx context.Context, f *family, ch watch.Changes) error {
	touched := proxy.NewTouched()
	for name, info := range ch.Services {
		var st *proxy.ServiceState
		if info != nil {
			st = proxy.BuildService(proxy.ServiceInput{Service: info.Service, Slices: info.Slices}, &f.opts)
		}
		f.desired.Update(name, st, touched)
		d.track(f, name, f.desired.Service(name))
	}
	// A changed Service may have won or lost a virtual server from another one, and may have
	// let a held-back Service into a set: report each of them as they are now.
	report := map[types.NamespacedName]bool{}
	for name := range ch.Services {
		report[name] = true
	}
	for _, name := range d.trackReadmitted(f) {
		report[name] = true
	}
	for k := range touched.VirtualServers {
		for _, name := range f.desired.Claimants(k) {
			report[name] = true
		}
	}
	for name := range report {
		d.reportService(f, name)
	}
	d.countNotProgrammed(f)
	if touched.Empty() && !f.rec.RetryDue() {
		return nil
	}
	res, err := f.rec.Sync(ctx, f.desired, &f.opts, touched)
	if err != nil {
		return err
	}
	d.log.Debug("incremental sync", zap.String("family", f.ipFamily.String()), zap.Int("touched", touched.Len()), zap.Int("changes", res.Plan.Len()))
	return nil
}

// mergeChanges adds b's counters and trigger times to a (a full sync after a Pending call
// that found the options changed).
func mergeChanges(a, b watch.Changes) watch.Changes {
	a.ServiceEvents += b.ServiceEvents
	a.EndpointEvents += b.EndpointEvents
	if a.Services == nil {
		a.Services = map[types.NamespacedName]*watch.ServiceInfo{}
	}
	for k, v := range b.Services {
		a.Services[k] = v
	}
	if a.TriggerTimes == nil {
		a.TriggerTimes = map[types.NamespacedName][]time.Time{}
	}
	for k, v := range b.TriggerTimes {
		a.TriggerTimes[k] = append(a.TriggerTimes[k], v...)
	}
	if b.Node != nil || b.NodeChanged {
		a.Node, a.NodeChanged = b.Node, a.NodeChanged || b.NodeChanged
	}
	return a
}

// removeLeftovers starts Deps.RemoveLeftovers in the background (the first sync has
// programmed this backend's rules, so the other backend's can go); its failure is logged,
// and the next start tries again.
func (d *Daemon) removeLeftovers(ctx context.Context) {
	if d.deps.RemoveLeftovers == nil {
		return
	}
	d.collectWG.Go(func() {
		if err := d.deps.RemoveLeftovers(ctx); err != nil {
			d.log.Warn("could not remove what the other filter backend left", zap.Error(err))
			return
		}
		d.log.Info("removed what the other filter backend left, if anything")
	})
}
