// Package runner schedules syncs: it coalesces change notifications into incremental syncs
// no closer together than a minimum interval, runs a full sync at least every maximum
// interval, and retries a failed sync as a full sync with exponential backoff. Time comes
// from an injected clock so tests step it instead of sleeping.
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

// Options configure a Runner.
type Options struct {
	// MinInterval is the least time between the starts of two syncs (--ipvs-min-sync-period).
	MinInterval time.Duration
	// MaxInterval is the most time between two full syncs (--ipvs-sync-period).
	MaxInterval time.Duration
	// InitialBackoff and MaxBackoff bound the retry delay after a failed sync (defaults 1 s
	// and MaxInterval).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	Clock          clock.WithTicker
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
	var (
		lastStart  time.Time // zero: never ran, no min-interval wait
		lastFull   = c.Now()
		retryAt    time.Time
		backoff    time.Duration
		timer      clock.Timer
		timerArmed bool
	)
	for {
		now := c.Now()
		r.mu.Lock()
		pending, full := r.pending, r.full
		r.mu.Unlock()

		// When may the next sync start, and is it full? After a failure nothing runs before
		// the retry: not the periodic full sync (its deadline passes during a long outage,
		// and honouring it would retry in a hot loop) and not an event (a failing kernel is
		// not hammered by a stream of them). The retry is a full sync, so it serves both.
		next := lastFull.Add(r.opt.MaxInterval)
		switch {
		case !retryAt.IsZero():
			next = retryAt
		case pending:
			due := now
			if !lastStart.IsZero() {
				if earliest := lastStart.Add(r.opt.MinInterval); earliest.After(due) {
					due = earliest
				}
			}
			if due.Before(next) {
				next = due
			}
		}

		if !next.After(now) {
			fullDue := !now.Before(lastFull.Add(r.opt.MaxInterval))
			retrying := !retryAt.IsZero() && !now.Before(retryAt)
			r.mu.Lock()
			r.pending = false
			full = r.full || fullDue || retrying
			r.full = false
			r.mu.Unlock()

			lastStart = now
			err := r.fn(ctx, full)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				if backoff == 0 {
					backoff = r.opt.InitialBackoff
				} else if backoff *= 2; backoff > r.opt.MaxBackoff {
					backoff = r.opt.MaxBackoff
				}
				retryAt = c.Now().Add(backoff)
			} else {
				backoff, retryAt = 0, time.Time{}
				if full {
					lastFull = lastStart
				}
			}
			continue
		}

		wait := next.Sub(now)
		if timerArmed && !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer = c.NewTimer(wait)
		timerArmed = true
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-r.kick:
		case <-timer.C():
			timerArmed = false
		}
	}
}
