package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type call struct {
	at   time.Duration // since start
	full bool
}

// harness drives a Runner on a fake clock. Every sync reports on a channel and waits until
// the test lets it finish, so the test knows exactly when syncs happen.
type harness struct {
	t      *testing.T
	clk    *clocktesting.FakeClock
	start  time.Time
	r      *Runner
	calls  chan call
	result chan error
	cancel context.CancelFunc
	done   chan struct{}
}

func newHarness(t *testing.T, opt Options) *harness {
	h := &harness{t: t, clk: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), calls: make(chan call), result: make(chan error), done: make(chan struct{})}
	h.start = h.clk.Now()
	opt.Clock = h.clk
	h.r = New(func(ctx context.Context, full bool) error {
		h.calls <- call{at: h.clk.Since(h.start), full: full}
		select {
		case err := <-h.result:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}, opt)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { _ = h.r.Run(ctx); close(h.done) }()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

// expect waits for the next sync and checks when it happened and whether it was full.
func (h *harness) expect(at time.Duration, full bool, result error) {
	h.t.Helper()
	select {
	case c := <-h.calls:
		if c.at != at || c.full != full {
			h.t.Fatalf("sync at %v full=%v, want at %v full=%v", c.at, c.full, at, full)
		}
		h.result <- result
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no sync happened; wanted one at %v (clock at %v)", at, h.clk.Since(h.start))
	}
}

// none checks that no sync starts while the clock is stepped to `to`.
func (h *harness) none() {
	h.t.Helper()
	select {
	case c := <-h.calls:
		h.t.Fatalf("unexpected sync at %v full=%v", c.at, c.full)
	case <-time.After(50 * time.Millisecond):
	}
}

// stepTo advances the fake clock once the runner is waiting on a timer.
func (h *harness) stepTo(d time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !h.clk.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("runner never waited on the clock")
		}
		time.Sleep(time.Millisecond) // polling for the runner goroutine to park, not synchronising on time
	}
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
