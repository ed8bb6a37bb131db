package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/metrics"
	"github.com/kipvs/kipvs/internal/proxy"
)

// Kernel is the set of adapters one family's reconciler drives. Conntrack may be nil
// (no stale-flow cleanup).
type Kernel struct {
	IPVS      ipvs.Interface
	Filter    dataplane.Filter // the sets and the filter rules (see internal/dataplane)
	Dummy     dummyif.Interface
	Conntrack conntrack.Interface
	// ReadIPVS and ReadFilter, if set, are what a full sync reads the IPVS table and the
	// sets through (ReadKernel): clients of their own, so the long dumps of a full sync's
	// read never hold a socket an incremental sync is waiting for. nil: IPVS and Filter.
	ReadIPVS   ipvs.Interface
	ReadFilter dataplane.Filter
	// FavorBinder, if set, is called on the goroutine that binds a Pass.Run's VIPs before
	// its first bind, and restore before the goroutine returns (rtsched.Favor: the kernel
	// then checks its addresses' lifetimes once per message of binds instead of once per
	// VIP). Its error is logged once, and the binds go on.
	FavorBinder func() (restore func(), err error)
}

// Options configure a Reconciler.
type Options struct {
	Family inet.Family
	// ExcludeCIDRs: virtual servers with an address inside are never deleted or changed.
	ExcludeCIDRs []netip.Prefix
	// GracefulPeriod is the longest a removed TCP real server drains at weight 0; 0
	// deletes at once; NoDrainLimit drains until its connections end, however long.
	GracefulPeriod time.Duration
	Clock          clock.Clock
	Logger         *zap.Logger
	Metrics        *metrics.Metrics // may be nil
	// NFTables says the filter is the nftables backend: a failure to apply the rules counts
	// in kubeproxy_sync_proxy_rules_nftables_sync_failures_total (as in kube-proxy's
	// nftables mode) instead of the iptables-restore failures, and no iptables rule count
	// is exported.
	NFTables bool
	// RetryBackoff bounds the wait before a failed object's retry (defaults 1 s and 30 s).
	RetryBackoff Backoff
}

// Backoff is an exponential backoff: Initial after the first failure, doubling up to Max.
type Backoff struct {
	Initial, Max time.Duration
}

// Reconciler keeps one family's owned kernel objects equal to a proxy.Desired. Its methods
// must not be called concurrently.
type Reconciler struct {
	kernel Kernel
	opts   Options
	// applied is what kipvs believes the kernel holds, failed objects aside; nil until a
	// full sync has compared everything, and after a failure to read the kernel.
	applied *state
	// failed holds the objects whose last change failed (see ObjectStatus).
	failed map[ObjectKey]*ObjectStatus
	// rules is the last ruleset applied successfully (its text); "" when unknown.
	rules string
	// draining maps real servers at weight 0 to when their drain started.
	draining map[DrainKey]time.Time
	// owned holds the virtual servers kipvs created or adopted and has not seen go: they
	// stay its own for the ownership rule (owns) until a delete succeeds or the kernel no longer has them.
	owned   map[proxy.VSKey]struct{}
	adopted bool
	// journal records the objects applies touch while a Read is outstanding (see Read).
	journal *journal
	// unfavored: FavorBinder failed once (logged).
	unfavored bool
}

// New returns a Reconciler over k.
func New(k Kernel, o Options) *Reconciler {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.RetryBackoff.Initial <= 0 {
		o.RetryBackoff.Initial = time.Second
	}
	if o.RetryBackoff.Max < o.RetryBackoff.Initial {
		o.RetryBackoff.Max = max(30*time.Second, o.RetryBackoff.Initial)
	}
	return &Reconciler{kernel: k, opts: o, draining: map[DrainKey]time.Time{},
		owned: map[proxy.VSKey]struct{}{}, failed: map[ObjectKey]*ObjectStatus{}}
}

// Result describes one sync.
type Result struct {
	Plan *Plan
	// Drift counts, by kind, owned objects a full sync found different from what kipvs had
	// applied: changed behind its back. Empty on the first sync (adoption) and on
	// incremental syncs.
	Drift map[string]int
	// Full reports a full sync.
	Full bool
	// Changes counts the kernel changes applied or tried (Plan.Len(); a Pass keeps the
	// count, not its plans: see Pass).
	Changes int
}

// NeedsFull reports whether the next sync must be full: no full sync has compared
// everything yet, or the last one could not read the kernel. Objects that failed to apply
// do not make a full sync necessary: Sync retries them (see Failed).
func (r *Reconciler) NeedsFull() bool { return r.applied == nil }

func (r *Reconciler) family() string { return r.opts.Family.String() }

// FullSync reads back everything kipvs owns, counts drift against what it last applied,
// and applies whatever differs from d. po supplies the node's addresses (NodePort virtual
// servers on them are kipvs's when their port is in a node-port set) and the rule options.
// It reads the kernel itself; see Read for a full sync whose read runs beside incremental
// syncs.
func (r *Reconciler) FullSync(ctx context.Context, d *proxy.Desired, po *proxy.Options) (Result, error) {
	rd := r.BeginRead()
	if err := ReadKernel(ctx, rd); err != nil {
		r.applied = nil
		return Result{Full: true, Drift: map[string]int{}}, err
	}
	return r.FullSyncFrom(ctx, d, po, rd)
}

// FullSyncFrom is FullSync over a Read of the kernel begun earlier (BeginRead) and filled
// (ReadKernel) while other syncs may have run. Objects those syncs touched are taken from
// the model of what was applied, the rest from the Read. When the Read cannot be completed
// that way (it is not the latest, or an apply failed since), the kernel is read again.
//
// It is a Pass run to its end under the caller's one hold of the lock (see Pass.Run): the
// first, requested and periodic full syncs are the same algorithm. Its Result keeps the
// plans of every step (Result.Plan); a periodic pass (BeginPass) keeps only their count.
func (r *Reconciler) FullSyncFrom(ctx context.Context, d *proxy.Desired, po *proxy.Options, rd *Read) (Result, error) {
	p := r.BeginPass(d, po, rd)
	p.keepPlan = true
	p.Run(ctx, StepSize)
	return p.Result()
}

// Sync applies the desired state of the objects in t, comparing with what kipvs applied
// last. It needs a preceding successful FullSync (see NeedsFull).
func (r *Reconciler) Sync(ctx context.Context, d *proxy.Desired, po *proxy.Options, t *proxy.Touched) (Result, error) {
	res := Result{}
	if r.applied == nil {
		return res, errors.New("incremental sync without a successful full sync")
	}
	scope, retried, sets := r.retryScope(t)
	unread := r.resolve(r.applied, retried, d)
	for k := range unread {
		delete(scope.VirtualServers, k)
	}
	in := &diffInput{desired: d, observed: r.applied, exclude: r.opts.ExcludeCIDRs, graceful: r.opts.GracefulPeriod}
	p := diffScoped(in, scope)
	p.CreateSets = sets
	rs := r.kernel.Filter.Rules(proxy.BuildFilter(po, d))
	if text := rs.String(); text != r.rules {
		p.Rules = rs
		r.rules = text
	}
	res.Plan, res.Changes = p, p.Len()
	failed := r.apply(ctx, p, r.applied)
	for k, err := range unread {
		failed.add(vsObject(k), err)
	}
	touched := inTouched(scope)
	return res, r.settle(failed, func(k ObjectKey) bool {
		return touched(k) || (k.Kind == KindSet && slices.Contains(retried, k))
	}, p.CreateSets)
}

// NoDrainLimit is the GracefulPeriod that lets a removed TCP real server drain until its
// active and inactive connections reach 0, with no time limit, as kube-proxy does.
const NoDrainLimit time.Duration = -1

// Drain deletes draining real servers that have no connections left or whose graceful
// period (if it has one) is over. It reads only the virtual servers that have draining real servers.
func (r *Reconciler) Drain(ctx context.Context) (Result, error) {
	res := Result{Plan: &Plan{}}
	if r.applied == nil || len(r.draining) == 0 {
		return res, nil
	}
	now := r.opts.Clock.Now()
	byVS := map[proxy.VSKey][]DrainKey{}
	for k := range r.draining {
		byVS[k.VS] = append(byVS[k.VS], k)
	}
	for _, vk := range sortedKeys(byVS, proxy.VSKey.Compare) {
		dests, err := r.kernel.IPVS.Destinations(toIPVSKey(vk))
		if kerr.IsNotFound(err) {
			for _, k := range byVS[vk] {
				delete(r.draining, k)
			}
			continue
		}
		if err != nil {
			return res, fmt.Errorf("read real servers of %s: %w", vk, err)
		}
		conns := map[netip.AddrPort]uint32{}
		present := map[netip.AddrPort]bool{}
		for _, d := range dests {
			conns[d.AddrPort()] = d.ActiveConns + d.InactiveConns
			present[d.AddrPort()] = d.Weight == 0
		}
		for _, k := range sortedKeys(mapOf(byVS[vk]), compareDrainKey) {
			if !present[k.Dest] {
				delete(r.draining, k) // gone or re-weighted by someone: no longer ours to drain
				continue
			}
			if conns[k.Dest] == 0 || (r.opts.GracefulPeriod > 0 && now.Sub(r.draining[k]) >= r.opts.GracefulPeriod) {
				res.Plan.IPVSDelete = append(res.Plan.IPVSDelete, ipvs.DeleteDestinationOp(toIPVSKey(vk), k.Dest))
			}
		}
	}
	if res.Plan.Empty() {
		return res, nil
	}
	failed := r.apply(ctx, res.Plan, r.applied)
	drained := map[proxy.VSKey]struct{}{}
	for _, op := range res.Plan.IPVSDelete {
		drained[vsOf(&op)] = struct{}{}
	}
	return res, r.settle(failed, func(k ObjectKey) bool {
		_, ok := drained[k.VS]
		return k.Kind == KindVirtualServer && ok
	}, nil)
}

// Draining returns the real servers currently draining, with their start times.
func (r *Reconciler) Draining() map[DrainKey]time.Time {
	out := make(map[DrainKey]time.Time, len(r.draining))
	for k, v := range r.draining {
		out[k] = v
	}
	return out
}

func mapOf(keys []DrainKey) map[DrainKey]struct{} {
	m := make(map[DrainKey]struct{}, len(keys))
	for _, k := range keys {
		m[k] = struct{}{}
	}
	return m
}

func compareDrainKey(a, b DrainKey) int {
	if c := a.VS.Compare(b.VS); c != 0 {
		return c
	}
	return a.Dest.Compare(b.Dest)
}

// wants reports whether v lists real server ap (a linear scan: a handful of real servers
// per virtual server, and no allocation).
func wants(v *proxy.VirtualServer, ap netip.AddrPort) bool {
	for _, d := range v.Destinations {
		if d.Address == ap.Addr() && d.Port == ap.Port() {
			return true
		}
	}
	return false
}
