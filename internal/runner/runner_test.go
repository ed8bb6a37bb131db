package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/testutil/poll"
)

type call struct {
	at   time.Duration // since start
	full bool
	// part is "" for SyncFunc, "read" and "finish" for the two parts of Options.Periodic.
	part string
	// reply receives the call's result.
	reply chan error
}

// harness drives a Runner on a fake clock. Every sync reports on a channel and waits until
// the test lets it finish, so the test knows exactly when syncs happen.
type harness struct {
	t      *testing.T
	clk    *clocktesting.FakeClock
	start  time.Time
	r      *Runner
	calls  chan call
	cancel context.CancelFunc
	done   chan struct{}
}

func newHarness(t *testing.T, opt Options) *harness {
	h := &harness{t: t, clk: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), calls: make(chan call), done: make(chan struct{})}
	h.start = h.clk.Now()
	opt.Clock = h.clk
	h.r = New(func(ctx context.Context, full bool) error {
		return h.call(ctx, call{at: h.clk.Since(h.start), full: full})
	}, opt)
	if opt.Periodic != nil {
		r := h.r
		r.opt.Periodic = func(ctx context.Context) (func(context.Context) error, error) {
			if err := h.call(ctx, call{at: h.clk.Since(h.start), part: "read"}); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				return h.call(ctx, call{at: h.clk.Since(h.start), part: "finish"})
			}, nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { _ = h.r.Run(ctx); close(h.done) }()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

// call reports c and returns what the test answers.
func (h *harness) call(ctx context.Context, c call) error {
	c.reply = make(chan error, 1)
	select {
	case h.calls <- c:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expect waits for the next sync and checks when it happened and whether it was full.
func (h *harness) expect(at time.Duration, full bool, result error) {
	h.t.Helper()
	h.expectCall(call{at: at, full: full}, result)
}

// expectPart waits for a part ("read", "finish") of a periodic full sync.
func (h *harness) expectPart(part string, at time.Duration, result error) {
	h.t.Helper()
	h.expectCall(call{at: at, part: part}, result)
}

func (h *harness) expectCall(want call, result error) {
	h.t.Helper()
	h.next(want).reply <- result
}

// next waits for the next call, checks it and returns it unanswered.
func (h *harness) next(want call) call {
	h.t.Helper()
	select {
	case c := <-h.calls:
		if c.at != want.at || c.full != want.full || c.part != want.part {
			h.t.Fatalf("got call at %v full=%v part=%q, want at %v full=%v part=%q", c.at, c.full, c.part, want.at, want.full, want.part)
		}
		return c
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no call happened; wanted one at %v full=%v part=%q (clock at %v)", want.at, want.full, want.part, h.clk.Since(h.start))
	}
	return call{}
}

// none checks that no sync starts while the clock is stepped to `to`.
func (h *harness) none() {
	h.t.Helper()
	select {
	case c := <-h.calls:
		h.t.Fatalf("unexpected call at %v full=%v part=%q", c.at, c.full, c.part)
	case <-time.After(50 * time.Millisecond):
	}
}

// stepTo advances the fake clock once the runner is waiting on a timer.
func (h *harness) stepTo(d time.Duration) {
	h.t.Helper()
	poll.Until(h.t, 5*time.Second, "the runner waiting on the clock", func() (bool, string) {
		return h.clk.HasWaiters(), "the runner never waited on the clock"
	})
	h.clk.SetTime(h.start.Add(d))
}

func TestFirstSyncIsFullThenPeriodic(t *testing.T) {
	h := newHarness(t, Options{MinInterval: time.Second, MaxInterval: 30 * time.Second})
	h.expect(0, true, nil)
	h.stepTo(29 * time.Second)
	h.none()
	h.stepTo(30 * time.Second)
	h.expect(30*time.Second, true, nil)
}

func TestRequestsCoalesceAndRespectMinInterval(t *testing.T) {
	h := newHarness(t, Options{MinInterval: 2 * time.Second, MaxInterval: 30 * time.Second})
	h.expect(0, true, nil)
	h.stepTo(time.Second)
	h.r.Request()
	h.r.Request()
	h.r.Request()
	h.none() // too soon: min interval is 2 s from the last start
	h.stepTo(2 * time.Second)
	h.expect(2*time.Second, false, nil)
	h.none() // three requests, one sync
	h.stepTo(10 * time.Second)
	h.r.Request()
	h.expect(10*time.Second, false, nil) // idle long enough: runs at once
}

func TestRequestFullUpgrades(t *testing.T) {
	h := newHarness(t, Options{MaxInterval: 30 * time.Second})
	h.expect(0, true, nil)
	h.stepTo(5 * time.Second)
	h.r.Request()
	h.r.RequestFull()
	h.expect(5*time.Second, true, nil)
	// A full sync resets the periodic timer.
	h.stepTo(34 * time.Second)
	h.none()
	h.stepTo(35 * time.Second)
	h.expect(35*time.Second, true, nil)
}

func TestFailureRetriesFullWithBackoff(t *testing.T) {
	h := newHarness(t, Options{MaxInterval: time.Minute, InitialBackoff: time.Second, MaxBackoff: 4 * time.Second})
	boom := errors.New("kernel said no")
	h.expect(0, true, boom)
	h.stepTo(time.Second)
	h.expect(time.Second, true, boom)
	h.r.Request() // an event during backoff waits for the retry
	h.stepTo(2 * time.Second)
	h.none()
	h.stepTo(3 * time.Second)
	h.expect(3*time.Second, true, boom)
	h.stepTo(7 * time.Second) // capped at 4 s
	h.expect(7*time.Second, true, nil)
	h.stepTo(8 * time.Second)
	h.r.Request()
	h.expect(8*time.Second, false, nil) // healthy again: incremental
}

// A failure that outlasts the periodic full-sync deadline keeps its backoff: the overdue
// periodic sync must not turn the retries into a hot loop.
func TestLongFailureKeepsBackoffPastPeriodicDeadline(t *testing.T) {
	h := newHarness(t, Options{MaxInterval: 10 * time.Second, InitialBackoff: 4 * time.Second, MaxBackoff: 8 * time.Second})
	boom := errors.New("xtables lock held")
	h.expect(0, true, boom)
	h.stepTo(4 * time.Second)
	h.expect(4*time.Second, true, boom) // next retry in 8 s, at 12 s, past the periodic deadline (10 s)
	h.stepTo(10 * time.Second)
	h.none()
	h.stepTo(12 * time.Second)
	h.expect(12*time.Second, true, boom) // lastFull is still 0: the periodic deadline is long past
	h.r.Request()
	h.none() // neither the overdue deadline nor an event starts a sync before the retry
	h.stepTo(19 * time.Second)
	h.none()
	h.stepTo(20 * time.Second)
	h.expect(20*time.Second, true, nil)
	h.stepTo(29 * time.Second)
	h.none() // healthy again: the next periodic sync is 10 s after the successful one
	h.stepTo(30 * time.Second)
	h.expect(30*time.Second, true, nil)
}

func TestOnQueued(t *testing.T) {
	var mu sync.Mutex
	var queued []time.Time
	h := newHarness(t, Options{MaxInterval: time.Minute, OnQueued: func(t time.Time) {
		mu.Lock()
		queued = append(queued, t)
		mu.Unlock()
	}})
	h.expect(0, true, nil)
	h.stepTo(5 * time.Second)
	h.r.Request()
	h.expect(5*time.Second, false, nil)
	mu.Lock()
	defer mu.Unlock()
	// Once for the first sync when Run starts, once for the request.
	if len(queued) != 2 || !queued[0].Equal(h.start) || !queued[1].Equal(h.start.Add(5*time.Second)) {
		t.Errorf("queued = %v", queued)
	}
}

// periodicStub marks Options for newHarness to install its own Periodic.
func periodicStub(context.Context) (func(context.Context) error, error) { return nil, nil }

// With Options.Periodic, the periodic full sync reads while incremental syncs run; its
// finish runs alone, and the next one is due MaxInterval after it ended.
func TestPeriodicReadsBesideIncrementalSyncs(t *testing.T) {
	h := newHarness(t, Options{MinInterval: time.Second, MaxInterval: 30 * time.Second, Periodic: periodicStub})
	h.expect(0, true, nil) // the first full sync is a SyncFunc one
	h.stepTo(30 * time.Second)
	read := h.next(call{at: 30 * time.Second, part: "read"}) // held: the read is under way
	h.r.Request()
	h.expect(30*time.Second, false, nil) // the change does not wait for the read
	h.r.Request()
	h.stepTo(31 * time.Second) // min interval
	h.expect(31*time.Second, false, nil)
	read.reply <- nil
	h.expectPart("finish", 31*time.Second, nil)
	h.stepTo(60 * time.Second) // 30 s after the previous one started
	h.none()
	h.stepTo(61 * time.Second) // 30 s after it ended
	h.expectPart("read", 61*time.Second, nil)
	h.expectPart("finish", 61*time.Second, nil)
}

// MaxInterval counts from the end of a full sync, as kube-proxy's runner counts it: a full
// sync longer than MaxInterval (a first or periodic one at 50,000 Services under qemu TCG)
// is not followed by another at once, back to back, all the time.
func TestPeriodicDueAfterTheLastFullSyncEnded(t *testing.T) {
	h := newHarness(t, Options{MaxInterval: 30 * time.Second, Periodic: periodicStub})
	first := h.next(call{at: 0, full: true})
	h.clk.SetTime(h.start.Add(45 * time.Second)) // the first full sync takes 45 s
	first.reply <- nil
	h.stepTo(74 * time.Second)
	h.none()
	h.stepTo(75 * time.Second)
	read := h.next(call{at: 75 * time.Second, part: "read"})
	h.clk.SetTime(h.start.Add(110 * time.Second)) // the periodic read takes 35 s
	read.reply <- nil
	finish := h.next(call{at: 110 * time.Second, part: "finish"})
	h.clk.SetTime(h.start.Add(112 * time.Second))
	finish.reply <- nil
	h.stepTo(141 * time.Second)
	h.none()
	h.stepTo(142 * time.Second) // 30 s after the finish ended
	h.expectPart("read", 142*time.Second, nil)
	h.expectPart("finish", 142*time.Second, nil)
}

// A failed read or finish is retried as a SyncFunc full sync with backoff; a full sync that
// ran while a read was under way makes its result moot (no finish).
func TestPeriodicFailuresAndSupersededRead(t *testing.T) {
	boom := errors.New("read failed")
	h := newHarness(t, Options{MaxInterval: 30 * time.Second, InitialBackoff: time.Second, MaxBackoff: 4 * time.Second, Periodic: periodicStub})
	h.expect(0, true, nil)
	h.stepTo(30 * time.Second)
	h.expectPart("read", 30*time.Second, boom)
	h.stepTo(31 * time.Second)
	h.expect(31*time.Second, true, nil) // the retry
	h.stepTo(61 * time.Second)
	h.expectPart("read", 61*time.Second, nil)
	h.expectPart("finish", 61*time.Second, boom)
	h.stepTo(62 * time.Second)
	h.expect(62*time.Second, true, nil)
	h.stepTo(92 * time.Second)
	read := h.next(call{at: 92 * time.Second, part: "read"})
	h.r.RequestFull()
	h.expect(92*time.Second, true, nil) // asked for: runs as a SyncFunc full sync at once
	read.reply <- nil
	h.none() // superseded: no finish
	h.stepTo(121 * time.Second)
	h.none()
	h.stepTo(122 * time.Second) // 30 s after the full sync
	h.expectPart("read", 122*time.Second, nil)
	h.expectPart("finish", 122*time.Second, nil)
}

// A SyncFunc that retries objects of its own (Options.RetryAt) gets an incremental sync at
// their time, not before, never a full one for them, and other requests run meanwhile
// without waiting for it (the sync that left the retries returned nil: no backoff).
func TestObjectRetriesRunIncrementalAtTheirTime(t *testing.T) {
	var mu sync.Mutex
	var retryAt time.Time
	setRetry := func(at time.Time) { mu.Lock(); retryAt = at; mu.Unlock() }
	h := newHarness(t, Options{MinInterval: time.Second, MaxInterval: time.Minute, RetryAt: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return retryAt
	}})
	setRetry(h.start.Add(4 * time.Second)) // the first sync leaves an object to retry at 4 s
	h.expect(0, true, nil)
	h.stepTo(2 * time.Second)
	h.r.Request() // a change: runs at once, does not wait for the retry
	h.expect(2*time.Second, false, nil)
	h.stepTo(3 * time.Second)
	h.none()
	setRetry(h.start.Add(10 * time.Second)) // the retry at 4 s fails again: next at 10 s
	h.stepTo(4 * time.Second)
	h.expect(4*time.Second, false, nil)
	h.stepTo(9 * time.Second)
	h.none()
	setRetry(time.Time{}) // the retry at 10 s succeeds
	h.stepTo(10 * time.Second)
	h.expect(10*time.Second, false, nil)
	h.stepTo(30 * time.Second)
	h.none() // nothing left to retry: the next sync is the periodic one at 60 s
	h.stepTo(60 * time.Second)
	h.expect(60*time.Second, true, nil)
}

// A RetryAt that does not move past a sync that should have retried (the SyncFunc did not
// retry) is not asked about again in a loop.
func TestObjectRetryInThePastDoesNotLoop(t *testing.T) {
	h := newHarness(t, Options{MaxInterval: time.Minute, RetryAt: func() time.Time { return time.Unix(1_000_000, 0).Add(time.Second) }})
	h.expect(0, true, nil)
	h.stepTo(time.Second)
	h.expect(time.Second, false, nil)
	h.stepTo(30 * time.Second)
	h.none()
}
