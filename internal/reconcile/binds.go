package reconcile

import (
	"cmp"
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/kipvs/kipvs/internal/dummyif"
	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// Run runs the pass to its end with n objects a step, all of it under the caller's hold of
// the lock that serializes the reconciler's methods (no sync between its steps: a first
// full sync, or one the runner asked for). The address steps only compare: their binds go
// to a goroutine of their own and overlap with the steps after them. A step of virtual
// servers first waits for the binds of the addresses up to its last one (both go in
// address order) and records their outcome, so a virtual server is still created only with
// its VIP bound, and a VIP whose bind failed still keeps its virtual server out (see
// claimedOps). The kernel binds a device's addresses in time quadratic in their number
// (the longest part of a first sync at 50,000 Services), and the virtual servers, the
// members and the binds take different kernel locks, so on a node with more than one CPU
// they go on at the same time. Every bind is settled before the deletes; Run returns once
// the binding goroutine has.
func (p *Pass) Run(ctx context.Context, n int) { p.run(ctx, n, nil) }

// run is Run; awaiting, if not nil (tests), is called with an address step's binds before a
// step waits for their outcome.
func (p *Pass) run(ctx context.Context, n int, awaiting func(adds []netip.Addr)) {
	clk := p.r.opts.Clock
	start := clk.Now()
	p.Prepare()
	if !p.whole && !p.over {
		b := startBinder(ctx, p.r.kernel.Dummy, clk, len(p.addrs)/max(n, 1)+1, p.r.favorBinder)
		b.awaiting = awaiting
		p.binds = b
		defer func() {
			b.stop()
			p.times.Binding = b.busy
			if !b.last.IsZero() {
				p.times.Bound = b.last.Sub(start)
			}
			p.binds = nil
		}()
	}
	for !p.Step(ctx, n) {
	}
}

// favorBinder calls Kernel.FavorBinder, if set, (on the binding goroutine) and returns its
// restore; its first failure is logged.
func (r *Reconciler) favorBinder() (restore func()) {
	if r.kernel.FavorBinder == nil {
		return func() {}
	}
	restore, err := r.kernel.FavorBinder()
	if err != nil && !r.unfavored {
		r.unfavored = true
		r.opts.Logger.Info("binding VIPs on the ordinary scheduler (slower at tens of thousands of Services)", zap.Error(err))
	}
	if restore == nil {
		return func() {}
	}
	return restore
}

// RunTimes says where a Pass.Run's time went, for the log of a first sync.
type RunTimes struct {
	// Binding is the binding goroutine's time in the kernel's binds, Waited the steps' time
	// waiting for them, and Bound the time from Run's start to the end of the last bind.
	Binding, Waited, Bound time.Duration
}

// RunTimes is where Run's time went (zero before Run returned, or without binds).
func (p *Pass) RunTimes() RunTimes { return p.times }

// A binder binds the VIPs of a Pass's address steps in order, in a goroutine (Pass.Run).
type binder struct {
	in   chan *bindChunk
	quit chan struct{} // closed by stop
	done chan struct{}
	// pending are the chunks submitted and not yet settled, in address order.
	pending []*bindChunk
	// busy is the goroutine's time in the binds, last when the last one ended (read once
	// done is closed).
	busy time.Duration
	last time.Time
	// awaiting: see Pass.run.
	awaiting func(adds []netip.Addr)
}

// A bindChunk is an address step's plan (AddAddrs only) and, once bound is closed, the
// outcome of each bind.
type bindChunk struct {
	plan  *Plan
	adds  map[netip.Addr]struct{}
	first netip.Addr // the first address the step compared: no add of it is lower
	errs  []error
	bound chan struct{}
}

// errBindMissing is the outcome of a bind EnsureAddresses returned none for.
var errBindMissing = errors.New("not bound: no outcome from the adapter")

// errBindStopped is the outcome of the binds a stopped binder did not send.
var errBindStopped = errors.New("not bound: the sync stopped")

// startBinder starts the goroutine binding on dummy the chunks submitted (at most room
// waiting: no submit blocks). Once ctx is done, or stop called, it binds nothing more: each
// add fails with ctx's error (errBindStopped).
// favor is called first on the goroutine, and what it returns last (Reconciler.favorBinder).
func startBinder(ctx context.Context, dummy dummyif.Interface, clk clock.PassiveClock, room int, favor func() func()) *binder {
	b := &binder{in: make(chan *bindChunk, room), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		defer favor()()
		var group []*bindChunk
		first := true
		for c := range b.in {
			group = append(group[:0], c)
			if !first { // the first chunk goes alone: the steps after it wait for it
				group = b.gather(group)
			}
			first = false
			b.bind(ctx, dummy, clk, group)
		}
	}()
	return b
}

// bindGroup is how many binds the binding goroutine sends together at most (the chunks
// queued when it is ready, whole; dummyif sends them in messages of up to 1,024), but for
// the first chunk, bound alone so that the steps after it start early. Each of its calls
// into the kernel ends with the goroutine asking Go's scheduler for a processor again, a
// wait when the node's CPUs are busy (a first sync's other steps and garbage collection
// beside it): fewer, longer calls wait fewer times. (At 50,000 VIPs in the VM the binds
// themselves are most of the binding time: docs/performance.md.)
const bindGroup = 1024

// gather adds to group the chunks already queued, while the group holds fewer than
// bindGroup binds.
func (b *binder) gather(group []*bindChunk) []*bindChunk {
	n := len(group[0].plan.AddAddrs)
	for n < bindGroup {
		select {
		case c, ok := <-b.in:
			if !ok {
				return group
			}
			group = append(group, c)
			n += len(c.plan.AddAddrs)
		default:
			return group
		}
	}
	return group
}

// bind binds the VIPs of group's chunks in one call and settles each chunk; once ctx is
// done or the binder stopped, it binds nothing and each add fails.
func (b *binder) bind(ctx context.Context, dummy dummyif.Interface, clk clock.PassiveClock, group []*bindChunk) {
	var addrs []netip.Addr
	for _, c := range group {
		addrs = append(addrs, c.plan.AddAddrs...)
	}
	err := ctx.Err()
	select {
	case <-b.quit:
		err = cmp.Or(err, errBindStopped)
	default:
	}
	var errs []error
	if err != nil {
		errs = make([]error, len(addrs))
		for i := range errs {
			errs[i] = err
		}
	} else {
		t := clk.Now()
		errs = dummy.EnsureAddresses(addrs)
		b.last = clk.Now()
		b.busy += b.last.Sub(t)
		for len(errs) < len(addrs) { // not per Interface's contract: no outcome is no bind
			errs = append(errs, errBindMissing)
		}
	}
	for _, c := range group {
		n := len(c.plan.AddAddrs)
		c.errs, errs = errs[:n:n], errs[n:]
		close(c.bound)
	}
}

// submit queues an address step's binds.
func (b *binder) submit(plan *Plan, adds map[netip.Addr]struct{}, first netip.Addr) {
	c := &bindChunk{plan: plan, adds: adds, first: first, bound: make(chan struct{})}
	b.pending = append(b.pending, c)
	b.in <- c
}

// stop ends the goroutine and waits for it. The chunks not settled are dropped: a pass
// stops before settling them only when it failed, which leaves no model (a full sync
// follows and reads the kernel).
func (b *binder) stop() {
	close(b.quit)
	close(b.in)
	<-b.done
	b.pending = nil
}

// awaitBinds waits for the binds of every address up to upTo (all: every one submitted)
// and records their outcome as the address steps would have.
func (p *Pass) awaitBinds(ctx context.Context, upTo netip.Addr, all bool) {
	b := p.binds
	if b == nil {
		return
	}
	for len(b.pending) > 0 && (all || b.pending[0].first.Compare(upTo) <= 0) {
		c := b.pending[0]
		b.pending = b.pending[1:]
		if b.awaiting != nil {
			b.awaiting(c.plan.AddAddrs)
		}
		t := p.r.opts.Clock.Now()
		<-c.bound
		p.times.Waited += p.r.opts.Clock.Since(t)
		p.settle(c.plan, p.applyBound(ctx, c.plan, p.r.applied, c.errs), func(k ObjectKey) bool {
			_, ok := c.adds[k.Addr]
			return k.Kind == KindAddress && ok
		})
	}
}
