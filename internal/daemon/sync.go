package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/healthcheck"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
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
	host, err := d.deps.HostAddrs()
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
		d.probeSchedulers(s.Services, true)
		d.removeProbeLeftover()
		// One read of the kernel for every family: the IPVS table and the dummy link are
		// node-wide.
		reads = d.beginReads()
		readStart := d.deps.Clock.Now()
		err = reconcile.ReadKernel(ctx, reads...)
		readTook = d.deps.Clock.Since(readStart)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, f := range d.families {
				d.metrics.SyncErrors.WithLabelValues(f.ipFamily.String()).Inc()
			}
			d.log.Error("sync failed; retrying as a full sync with backoff", zap.Bool("full", full), zap.Error(err))
			return err
		}
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
	return d.synced(err, full, len(changes.Services), start)
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

// synced ends a sync: pending-change gauges, the log line, readiness.
func (d *Daemon) synced(err error, full bool, services int, start time.Time) error {
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
		if d.deps.firstSynced != nil {
			close(d.deps.firstSynced)
		}
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

// beginReads starts a kernel read for every family (under d.mu).
func (d *Daemon) beginReads() []*reconcile.Read {
	reads := make([]*reconcile.Read, len(d.families))
	for i, f := range d.families {
		reads[i] = f.rec.BeginRead()
	}
	return reads
}

// periodicRead is the first part of the periodic full sync (the runner's PeriodicFunc): it
// reads the kernel, every family at once, without holding d.mu, so incremental syncs go on
// meanwhile. Reading the IPVS table is most of a periodic sync's time (one dump of the
// real servers per virtual server); what is left for periodicFinish is in memory.
func (d *Daemon) periodicRead(ctx context.Context) (func(context.Context) error, error) {
	defer d.health.Begin("periodic full sync's kernel read")()
	d.mu.Lock()
	reads := d.beginReads()
	d.mu.Unlock()
	start := d.deps.Clock.Now()
	if err := reconcile.ReadKernel(ctx, reads...); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for _, f := range d.families {
			d.metrics.SyncErrors.WithLabelValues(f.ipFamily.String()).Inc()
		}
		d.log.Error("periodic sync failed to read the kernel; retrying as a full sync with backoff", zap.Error(err))
		return nil, err
	}
	took := d.deps.Clock.Since(start)
	d.log.Debug("periodic sync read the kernel", zap.Duration("took", took))
	return func(ctx context.Context) error {
		defer d.collect()
		defer d.health.Begin("periodic full sync")()
		return d.periodicFinish(ctx, reads, took)
	}, nil
}

// periodicFinish is the second part of the periodic full sync (readTook: how long the first
// part's read took; the sync duration metrics include it), under d.mu: each family
// compares its desired state, kept current by the incremental syncs, with the read (objects
// synced during the read taken from what was applied) and repairs the drift. Desired
// state is not rebuilt unless the options changed (then, or when a family needs a full
// sync, this is a full sync of its own).
func (d *Daemon) periodicFinish(ctx context.Context, reads []*reconcile.Read, readTook time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := d.deps.Clock.Now()
	d.checkClusterCIDR()
	host, err := d.deps.HostAddrs()
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
	err = d.syncFamilies(ctx, true, readTook, nil, func(i int, f *family) error {
		res, err := f.rec.FullSyncFrom(ctx, f.desired, &f.opts, reads[i])
		if err == nil && !res.Plan.Empty() {
			d.log.Info("full sync applied changes", zap.String("family", f.ipFamily.String()), zap.Int("changes", res.Plan.Len()),
				zap.Int("services", f.desired.NumServices()))
		}
		return err
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.syncHealthChecks(ctx, nil)
	return d.synced(err, true, 0, start)
}

// options computes one family's proxy options now.
func (d *Daemon) options(f inet.Family, node *v1.Node, host []netip.Addr) proxy.Options {
	o := buildOptions(&d.cfg, f, d.nodeName, node, host)
	if o.LocalDetector.Mode == proxy.LocalClusterCIDR {
		// A clusterCIDR overlapping the Service CIDR is no pod CIDR (checkClusterCIDR).
		o.LocalDetector.CIDRs = slices.DeleteFunc(o.LocalDetector.CIDRs, func(p netip.Prefix) bool {
			return slices.Contains(d.badClusterCIDRs, p)
		})
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
	for _, a := range d.deps.APIServerAddrs {
		if f.Matches(a) {
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

// probeSchedulers checks that every scheduler a Service asks for by annotation can be
// loaded, so a missing module degrades that Service to the global scheduler (with a Warning
// Event) instead of failing its virtual servers. A scheduler is probed when first asked
// for; one found unavailable is probed again on every full sync (retry), so a module that
// becomes loadable later is used: the options then change and the full sync rebuilds the
// Services that asked for it.
func (d *Daemon) probeSchedulers(services map[types.NamespacedName]*watch.ServiceInfo, retry bool) {
	probed := map[string]bool{}
	for _, info := range services {
		if info == nil {
			continue
		}
		s, ok := proxy.RequestedScheduler(info.Service)
		if !ok || probed[s] {
			continue
		}
		avail, known := d.schedulers[s]
		if known && (avail || !retry) {
			continue
		}
		probed[s] = true
		d.probeScheduler(s, known)
	}
}

// reprobeSchedulers probes again every scheduler found unavailable (the periodic full
// sync's retry, see probeSchedulers).
func (d *Daemon) reprobeSchedulers() {
	for _, s := range slices.Sorted(maps.Keys(d.schedulers)) {
		if !d.schedulers[s] {
			d.probeScheduler(s, true)
		}
	}
}

// probeScheduler probes s and records the result; known: s was probed before.
func (d *Daemon) probeScheduler(s string, known bool) {
	err := probeScheduler(d.deps.IPVS, s)
	if errors.Is(err, errProbeLeftover) {
		d.probeLeftover = true
		err = nil
	}
	if err != nil && !kerr.IsNotFound(err) {
		// A transient failure tells nothing about the scheduler: ask again next sync.
		d.log.Debug("scheduler probe failed; probing again at the next sync", zap.String("scheduler", s), zap.Error(err))
		return
	}
	d.schedulers[s] = err == nil
	switch {
	case err == nil && known:
		d.log.Info("scheduler requested by a Service is available now", zap.String("scheduler", s))
	case err != nil && !known:
		d.log.Warn("scheduler requested by a Service is unavailable", zap.String("scheduler", s), zap.Error(err))
	case err != nil:
		d.log.Debug("scheduler requested by a Service is still unavailable", zap.String("scheduler", s), zap.Error(err))
	}
}

func (d *Daemon) fullSync(ctx context.Context, f *family, snap *watch.Snapshot, host []netip.Addr, rd *reconcile.Read) error {
	f.opts = d.options(f.ipFamily, snap.Node, host)
	f.desired = proxy.NewDesired(f.ipFamily)
	f.desired.SetMemberLimit(f.opts.MaxSetMembers)
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
	res, err := f.rec.FullSyncFrom(ctx, f.desired, &f.opts, rd)
	if err != nil {
		return err
	}
	if !res.Plan.Empty() {
		d.log.Info("full sync applied changes", zap.String("family", f.ipFamily.String()), zap.Int("changes", res.Plan.Len()),
			zap.Int("services", f.desired.NumServices()))
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

// reportService reports the problems a Service has in the family now: its own, and the
// virtual servers it claims but another Service wins (never on the winner).
func (d *Daemon) reportService(f *family, name types.NamespacedName) {
	var problems []proxy.Problem
	if st := f.desired.Service(name); st != nil {
		problems = append(slices.Clone(st.Problems), f.desired.ConflictsOf(name)...)
	}
	d.report(f, name, problems)
}

// track updates the per-Service bookkeeping of one family after a Service was rebuilt: its
// no-local-endpoints state. (Its problems are reported once every change is in, with the
// conflicts the change made: reportService.)
func (d *Daemon) track(f *family, name types.NamespacedName, st *proxy.ServiceState) {
	setFlag(f.noLocalInternal, name, st != nil && st.NoLocalInternal)
	setFlag(f.noLocalExternal, name, st != nil && st.NoLocalExternal)
}

// trackReadmitted updates the bookkeeping of the Services that other Services' changes let
// into a set they had been held back from, and returns them: their problems changed, and the
// caller reports them (reportService).
func (d *Daemon) trackReadmitted(f *family) []types.NamespacedName {
	names := f.desired.TakeReadmitted()
	for _, name := range names {
		d.track(f, name, f.desired.Service(name))
	}
	return names
}

// countNotProgrammed sets the gauge of Services not programmed for a capacity limit from the
// problems reported.
func (d *Daemon) countNotProgrammed(f *family) {
	counts := map[string]int{proxy.ReasonTooManySetMembers: 0, proxy.ReasonSetCapacityExceeded: 0}
	for k, ps := range d.problems {
		if k.family != f.ipFamily {
			continue
		}
		for _, p := range ps {
			if _, ok := counts[p.Reason]; ok {
				counts[p.Reason]++
			}
		}
	}
	for reason, n := range counts {
		d.metrics.ServicesNotProgrammed.WithLabelValues(reason, f.ipFamily.String()).Set(float64(n))
	}
}

func setFlag(m map[types.NamespacedName]bool, k types.NamespacedName, on bool) {
	if on {
		m[k] = true
	} else {
		delete(m, k)
	}
}

// report logs, and sends as Warning Events, the problems of a Service that were not
// already reported; it forgets problems that went away so they are reported again if they
// come back.
func (d *Daemon) report(f *family, svc types.NamespacedName, problems []proxy.Problem) {
	key := problemKey{family: f.ipFamily, svc: svc}
	old := d.problems[key]
	if len(problems) == 0 {
		delete(d.problems, key)
		return
	}
	d.problems[key] = problems
	for _, p := range problems {
		if slices.Contains(old, p) {
			continue
		}
		d.log.Warn("service cannot be programmed as written", zap.String("family", f.ipFamily.String()),
			zap.String("service", p.Service.String()), zap.String("field", p.Field), zap.String("reason", p.Reason), zap.String("message", p.Message))
		if d.deps.Events != nil {
			d.deps.Events.Warn(p.Service, p.Reason, fmt.Sprintf("%s: %s", p.Field, p.Message))
		}
	}
}

// syncHealthChecks serves a health check for every Service with a healthCheckNodePort (the
// local endpoint count is the largest any family sees). changed nil means all Services.
func (d *Daemon) syncHealthChecks(ctx context.Context, changed map[types.NamespacedName]*watch.ServiceInfo) {
	before := maps.Clone(d.hcWant)
	consider := func(name types.NamespacedName) {
		var want healthcheck.Service
		for _, f := range d.families {
			if st := f.desired.Service(name); st != nil && st.HealthCheckNodePort != 0 {
				want.Port = st.HealthCheckNodePort
				want.LocalEndpoints = max(want.LocalEndpoints, st.LocalEndpoints)
			}
		}
		if want.Port == 0 {
			delete(d.hcWant, name)
		} else {
			d.hcWant[name] = want
		}
	}
	if changed == nil {
		clear(d.hcWant)
		for _, f := range d.families {
			for _, v := range f.desired.VirtualServers() {
				consider(v.Owner.NamespacedName)
			}
		}
	} else {
		for name := range changed {
			consider(name)
		}
	}
	if healthChecksChanged(before, d.hcWant) || changed == nil {
		d.hc.Sync(ctx, d.hcWant)
	}
}

// healthChecksChanged reports whether the health check servers wanted changed: a Service
// added or removed, or any field of one (its port, its local endpoint count).
func healthChecksChanged(a, b map[types.NamespacedName]healthcheck.Service) bool {
	return !maps.Equal(a, b)
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
