package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"net/netip"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/watch"
)

// sync is the runner's SyncFunc. An incremental sync builds only the changed Services and
// applies only what they touched; a full sync (first, periodic, after an error, or after a
// node change that alters the options) rebuilds everything and reads the kernel back.
func (d *Daemon) sync(ctx context.Context, full bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := d.deps.Clock.Now()
	src := d.deps.Source
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
		for _, f := range d.families {
			if !f.opts.Equal(buildOptions(&d.cfg, f.f, d.nodeName, src.Node(), host)) {
				full = true // node labels, pod CIDRs or addresses changed: rebuild all
			}
		}
	}
	if full {
		s, err := src.All()
		if err != nil {
			return err
		}
		snap = &s
		changes = mergeChanges(changes, s.Pending)
	}
	d.m.ServiceChangesTotal.Add(float64(changes.ServiceEvents))
	d.m.EndpointChangesTotal.Add(float64(changes.EndpointEvents))

	var errs []error
	for _, f := range d.families {
		fam := f.f.String()
		fstart := d.deps.Clock.Now()
		var ferr error
		if full {
			ferr = d.fullSync(ctx, f, snap, host)
		} else {
			ferr = d.incrementalSync(ctx, f, changes)
		}
		elapsed := d.deps.Clock.Since(fstart).Seconds()
		d.m.SyncProxyRulesLatency.WithLabelValues(fam).Observe(elapsed)
		if full {
			d.m.SyncFullProxyRulesLatency.WithLabelValues(fam).Observe(elapsed)
			d.m.SyncFull.WithLabelValues(fam).Inc()
		} else {
			d.m.SyncPartialProxyRulesLatency.WithLabelValues(fam).Observe(elapsed)
			d.m.SyncIncr.WithLabelValues(fam).Inc()
		}
		if ferr != nil {
			d.m.SyncErrors.WithLabelValues(fam).Inc()
			errs = append(errs, fmt.Errorf("%s: %w", fam, ferr))
			continue
		}
		now := d.deps.Clock.Now()
		d.m.SyncProxyRulesLastTimestamp.WithLabelValues(fam).Set(float64(now.UnixNano()) / 1e9)
		d.health.Updated(fam)
		for _, times := range changes.TriggerTimes {
			for _, t := range times {
				d.m.NetworkProgrammingLatency.WithLabelValues(fam).Observe(now.Sub(t).Seconds())
			}
		}
	}
	svc, eps := src.PendingCounts()
	d.m.ServiceChangesPending.Set(float64(svc))
	d.m.EndpointChangesPending.Set(float64(eps))
	if err := errors.Join(errs...); err != nil {
		d.log.Error("sync failed; retrying as a full sync with backoff", zap.Bool("full", full), zap.Error(err))
		return err
	}
	d.log.Debug("synced", zap.Bool("full", full), zap.Int("services", len(changes.Services)),
		zap.Duration("took", d.deps.Clock.Since(start)))
	if !d.ready {
		d.ready = true
		if d.deps.Ready != nil {
			close(d.deps.Ready)
		}
	}
	return nil
}

func (d *Daemon) fullSync(ctx context.Context, f *family, snap *watch.Snapshot, host []netip.Addr) error {
	f.opts = buildOptions(&d.cfg, f.f, d.nodeName, snap.Node, host)
	f.desired = proxy.NewDesired(f.f)
	for name, info := range snap.Services {
		f.desired.Update(name, proxy.BuildService(proxy.ServiceInput{Service: info.Service, Slices: info.Slices}, &f.opts), nil)
	}
	res, err := f.rec.FullSync(ctx, f.desired, &f.opts)
	d.report(f, f.desired.Problems())
	if err != nil {
		return err
	}
	if !res.Plan.Empty() {
		d.log.Info("full sync applied changes", zap.String("family", f.f.String()), zap.Int("changes", res.Plan.Len()),
			zap.Int("services", f.desired.NumServices()))
	}
	return nil
}

func (d *Daemon) incrementalSync(ctx context.Context, f *family, ch watch.Changes) error {
	touched := proxy.NewTouched()
	var problems []proxy.Problem
	for name, info := range ch.Services {
		var st *proxy.ServiceState
		if info != nil {
			st = proxy.BuildService(proxy.ServiceInput{Service: info.Service, Slices: info.Slices}, &f.opts)
			problems = append(problems, st.Problems...)
		}
		f.desired.Update(name, st, touched)
	}
	d.report(f, problems)
	if touched.Empty() {
		return nil
	}
	res, err := f.rec.Sync(ctx, f.desired, &f.opts, touched)
	if err != nil {
		return err
	}
	d.log.Debug("incremental sync", zap.String("family", f.f.String()), zap.Int("touched", touched.Len()), zap.Int("changes", res.Plan.Len()))
	return nil
}

// report logs each Service problem once (until the set of problems changes).
func (d *Daemon) report(f *family, problems []proxy.Problem) {
	for _, p := range problems {
		key := f.f.String() + " " + p.String()
		if d.problems[key] {
			continue
		}
		d.problems[key] = true
		d.log.Warn("service cannot be programmed as written", zap.String("family", f.f.String()),
			zap.String("service", p.Service.String()), zap.String("field", p.Field), zap.String("reason", p.Reason), zap.String("message", p.Message))
	}
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
