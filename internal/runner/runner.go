package runner

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// SyncFunc performs one sync. full asks for a full sync (read the kernel back and repair
// everything); otherwise only pending changes need applying.
type SyncFunc func(ctx context.Context, full bool) error

// PeriodicFunc starts a periodic full sync in two parts, so that changes do not wait for it:
// it runs beside incremental syncs (so it may only read, e.g. the kernel tables), and the
// finish it returns runs alone, as any sync does.
type PeriodicFunc func(ctx context.Context) (finish func(ctx context.Context) error, err error)

// Options configure a Runner.
type Options struct {
	// MinInterval is the least time between the starts of two syncs (--ipvs-min-sync-period).
	MinInterval time.Duration
	// MaxInterval is the most time from the end of one full sync to the start of the next
	// (--ipvs-sync-period), counted from the end as kube-proxy's runner counts it: a full
	// sync that takes longer than MaxInterval (a periodic one at 50,000 Services under
	// qemu TCG) is not followed at once by the next.
	MaxInterval time.Duration
	// InitialBackoff and MaxBackoff bound the retry delay after a failed sync (defaults 1 s
	// and MaxInterval).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	Clock          clock.WithTicker
	// Periodic, if set, runs the periodic full sync (the one MaxInterval asks for) instead
	// of SyncFunc(ctx, true): incremental syncs go on while its first part runs. Full
	// syncs that were asked for (the first, retries, RequestFull) still go through
	// SyncFunc.
	Periodic PeriodicFunc
	// RetryAt, if set, is asked after every sync when the SyncFunc next wants an
	// incremental sync for a retry of its own (objects that failed to apply, each retried
	// with its own backoff; zero: none). A SyncFunc that leaves such retries returns nil: its
	// sync is done, and neither a full sync nor the runner's backoff follows.
	RetryAt func() time.Time
	// OnQueued is called (if set) each time a sync is requested, and once when Run starts
	// for the first sync, for the last_queued_timestamp metric and the health tracker (a
	// first sync that never succeeds makes the proxy unhealthy).
	OnQueued func(time.Time)
}

// Runner runs SyncFunc according to Options. The first sync is always full.
type Runner struct {
	opt     Options
	fn      SyncFunc
	kick    chan struct{}
	mu      sync.Mutex
	pending bool
	full    bool
}

// New returns a Runner; call Run to start it.
func New(fn SyncFunc, opt Options) *Runner {
	if opt.Clock == nil {
		opt.Clock = clock.RealClock{}
	}
	if opt.MaxInterval <= 0 {
		opt.MaxInterval = 30 * time.Second
	}
	if opt.InitialBackoff <= 0 {
		opt.InitialBackoff = time.Second
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = opt.MaxInterval
	}
	return &Runner{opt: opt, fn: fn, kick: make(chan struct{}, 1), pending: true, full: true}
}

// Request asks for an incremental sync soon. It never blocks; requests coalesce.
func (r *Runner) Request() { r.request(false) }

// RequestFull asks for a full sync soon.
func (r *Runner) RequestFull() { r.request(true) }

func (r *Runner) request(full bool) {
	r.mu.Lock()
	r.pending = true
	r.full = r.full || full
	r.mu.Unlock()
	if r.opt.OnQueued != nil {
		r.opt.OnQueued(r.opt.Clock.Now())
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run loops until ctx ends. It returns ctx's error.
func (r *Runner) Run(ctx context.Context) error {
	c := r.opt.Clock
	if r.opt.OnQueued != nil {
		r.opt.OnQueued(c.Now()) // the first sync is due
	}
	l := &loop{r: r, lastFull: c.Now()}
	defer l.waitPeriodic()
	var (
		timer      clock.Timer
		timerArmed bool
	)
	disarm := func() {
		if timerArmed && !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timerArmed = false
	}
	for {
		now := c.Now()
		r.mu.Lock()
		pending, full := r.pending, r.full
		r.mu.Unlock()

		if l.startPeriodic(ctx, now, full) {
			continue
		}
		next := l.next(now, pending)
		// No timer stays armed while a sync runs: its end is read from the clock, and a
		// test's fake clock must not be stepped before it is (it waits for a waiter).
		disarm()
		if !next.IsZero() && !next.After(now) {
			l.sync(ctx, now)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}

		var fire <-chan time.Time // nil, never ready: nothing to wait for but events
		if !next.IsZero() {
			timer = c.NewTimer(next.Sub(now))
			timerArmed = true
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timerArmed {
				timer.Stop()
			}
			return ctx.Err()
		case <-r.kick:
		case <-fire:
			timerArmed = false
		case res := <-l.periodic: // nil, and never ready, when none runs
			disarm()
			l.finishPeriodic(ctx, res)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
}

// loop is the scheduling state of one Run.
type loop struct {
	r         *Runner
	lastStart time.Time // zero: never ran, no min-interval wait
	lastFull  time.Time // when the last full sync that succeeded ended
	retryAt   time.Time // zero: no failure to retry
	backoff   time.Duration
	// objectRetry is Options.RetryAt as of the last sync: when an incremental sync is due
	// for the SyncFunc's own retries (zero: none).
	objectRetry time.Time
	// periodic delivers the first part of a periodic full sync (Options.Periodic) while it
	// runs, nil otherwise; periodicStale means another full sync succeeded since, so its
	// result is dropped.
	periodic      chan periodicResult
	periodicStale bool
}

type periodicResult struct {
	finish func(context.Context) error
	err    error
}

func (l *loop) periodicDue(now time.Time) bool {
	return !now.Before(l.lastFull.Add(l.r.opt.MaxInterval))
}

// next is when the next sync may start; zero while a periodic full sync reads and nothing
// else is due (only an event or the read's end can start one). After a failure nothing runs before the retry: not
// the periodic full sync (its deadline passes during a long outage, and honouring it would
// retry in a hot loop) and not an event (a failing kernel is not hammered by a stream of
// them). The retry is a full sync, so it serves both.
func (l *loop) next(now time.Time, pending bool) time.Time {
	var next time.Time
	if l.periodic == nil {
		next = l.lastFull.Add(l.r.opt.MaxInterval)
	}
	switch {
	case !l.retryAt.IsZero():
		return l.retryAt
	case pending || !l.objectRetry.IsZero():
		due := now
		if !pending && l.objectRetry.After(due) {
			due = l.objectRetry
		}
		if !l.lastStart.IsZero() {
			if earliest := l.lastStart.Add(l.r.opt.MinInterval); earliest.After(due) {
				due = earliest
			}
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}

// startPeriodic starts the first part of the periodic full sync when it is due, nothing
// asked for a full sync and no retry is pending (those run as SyncFunc full syncs).
func (l *loop) startPeriodic(ctx context.Context, now time.Time, fullAsked bool) bool {
	fn := l.r.opt.Periodic
	if fn == nil || l.periodic != nil || fullAsked || !l.retryAt.IsZero() || !l.periodicDue(now) {
		return false
	}
	ch := make(chan periodicResult, 1)
	l.periodic, l.periodicStale = ch, false
	go func() {
		finish, err := fn(ctx)
		ch <- periodicResult{finish: finish, err: err}
	}()
	return true
}

// finishPeriodic runs the finish of a periodic full sync whose first part is done.
func (l *loop) finishPeriodic(ctx context.Context, res periodicResult) {
	l.periodic = nil
	if l.periodicStale {
		return
	}
	err := res.err
	if err == nil {
		err = res.finish(ctx)
	}
	if l.ended(ctx, err) {
		l.lastFull = l.r.opt.Clock.Now()
	}
	l.askRetry()
}

// sync runs SyncFunc now: full when asked for, when the periodic full sync is due (and
// Options.Periodic does not run it) or when retrying.
func (l *loop) sync(ctx context.Context, now time.Time) {
	r := l.r
	fullDue := l.periodic == nil && l.periodicDue(now)
	retrying := !l.retryAt.IsZero() && !now.Before(l.retryAt)
	r.mu.Lock()
	r.pending = false
	full := r.full || fullDue || retrying
	r.full = false
	r.mu.Unlock()

	l.lastStart = now
	if l.ended(ctx, r.fn(ctx, full)) && full {
		l.lastFull = r.opt.Clock.Now()
		l.periodicStale = l.periodic != nil
	}
	l.askRetry()
}

// askRetry reads Options.RetryAt after a sync. A time not after the sync's start is
// ignored (the sync was due to retry then and did not: asking again at once would loop).
func (l *loop) askRetry() {
	l.objectRetry = time.Time{}
	if fn := l.r.opt.RetryAt; fn != nil {
		if t := fn(); t.After(l.lastStart) {
			l.objectRetry = t
		}
	}
}

// ended records how a sync ended and reports whether it succeeded: a failure schedules
// the retry of a failed sync with exponential backoff, a success clears it. A sync
// interrupted by the end of ctx counts as neither.
func (l *loop) ended(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		l.failed()
		return false
	}
	l.backoff, l.retryAt = 0, time.Time{}
	return true
}

// failed schedules the retry of a failed sync with exponential backoff.
func (l *loop) failed() {
	opt := l.r.opt
	if l.backoff == 0 {
		l.backoff = opt.InitialBackoff
	} else if l.backoff *= 2; l.backoff > opt.MaxBackoff {
		l.backoff = opt.MaxBackoff
	}
	l.retryAt = opt.Clock.Now().Add(l.backoff)
}

// waitPeriodic waits for a periodic first part still running when Run returns (it ends
// with ctx).
func (l *loop) waitPeriodic() {
	if l.periodic != nil {
		<-l.periodic
	}
}
