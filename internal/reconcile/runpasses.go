package reconcile

import (
	"context"
	"runtime"
	"slices"
	"sync"
)

// RunPasses runs passes (one per family, begun under mu over Reads taken together) to their
// end, and reports false if ctx ended first (the passes are then closed and their Results
// must not be used).
//
// The locking contract, for every caller: mu is the lock that serializes the reconcilers'
// methods (incremental syncs, drains, full syncs). RunPasses takes it for one step at a
// time and releases it between steps, so a change waits for one step at most, whatever the
// number of Services:
//   - Collect copies chunk keys of the desired state and the model per hold of mu;
//   - Prepare, once a pass has all its keys, runs without mu (it touches only the pass and
//     its Read);
//   - Step compares and repairs chunk objects per hold of mu.
//
// The passes run in order, each to its end before the next. stepped, if not nil, is called
// after each step without mu held (tests observe the steps there).
func RunPasses(ctx context.Context, mu sync.Locker, passes []*Pass, chunk int, stepped func()) bool {
	for over := false; !over; {
		if ctx.Err() != nil {
			for _, p := range passes {
				p.Close()
			}
			return false
		}
		over = StepPasses(ctx, mu, passes, chunk)
		if stepped != nil {
			stepped()
		}
		runtime.Gosched() // let a change waiting for mu have it
	}
	return true
}

// StepPasses runs one step of the first of passes not over (under mu, as RunPasses says)
// and reports whether every pass is over. RunPasses calls it until they are; a test may
// interleave other work between its calls.
func StepPasses(ctx context.Context, mu sync.Locker, passes []*Pass, chunk int) bool {
	mu.Lock()
	i := slices.IndexFunc(passes, func(p *Pass) bool { return !p.Over() })
	if i < 0 {
		mu.Unlock()
		return true
	}
	p := passes[i]
	if !p.Prepared() {
		done := p.Collect(chunk)
		mu.Unlock()
		if done {
			p.Prepare()
		}
		return false
	}
	defer mu.Unlock()
	return p.Step(ctx, chunk) && i == len(passes)-1
}
