package daemon

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Deps.Collect (the real daemon's runtime.GC) is started once the source has synced and
// after each full sync (first and periodic), never after an incremental sync, one at a time,
// and never delays a change: here each collection blocks until the test releases it, and
// the first one is held while the first sync runs and a change is programmed.
func TestCollectAfterFullSyncsWithoutDelayingChanges(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	node := newFakeNode()
	src := newMemSource("node-a")
	svcs, slices0 := stallObjects(false)
	src.Set(svcs, slices0, nil, false)
	reg := prometheus.NewRegistry()
	deps := node.deps(src, reg)
	deps.Clock = clk

	var (
		mu      sync.Mutex
		calls   []string // the full syncs done when each collection started
		release = make(chan struct{})
	)
	deps.Collect = func() {
		mu.Lock()
		calls = append(calls, fmt.Sprintf("after %v full syncs", counter(t, reg, "kipvs_sync_full_total")))
		mu.Unlock()
		<-release
	}
	numCalls := func(n int) func() (bool, string) {
		return func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(calls) == n, fmt.Sprintf("collections %q", calls)
		}
	}
	web := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}
	webHas := func(n int) func() (bool, string) { // real servers taking traffic (weight > 0)
		return func() (bool, string) {
			dests, err := node.ipvs.Destinations(web)
			live := 0
			for _, d := range dests {
				if d.Weight > 0 {
					live++
				}
			}
			return live == n, fmt.Sprintf("real servers of web %v, %v", dests, err)
		}
	}
	cfg := testConfig(t)
	cfg.IPVS.SyncPeriod = 30 * time.Second
	d := newDaemon(t, cfg, zaptest.NewLogger(t), deps)
	d.start(t) // the first sync ends while the first collection is held

	// A change is programmed while that collection is still held.
	svcs, slices1 := stallObjects(true)
	src.Set(svcs, slices1, nil, false)
	poll.Until(t, waitLimit, "a change programmed during a collection", webHas(2))
	poll.Until(t, waitLimit, "one collection", numCalls(1))
	release <- struct{}{}

	// An incremental sync with no collection running starts none.
	svcs, _ = stallObjects(false)
	src.Set(svcs, slices0, nil, false)
	poll.Until(t, waitLimit, "the second change", webHas(1))

	// The periodic full sync starts one.
	poll.Until(t, waitLimit, "the periodic full sync", func() (bool, string) {
		clk.Step(time.Second)
		return fullSyncs(t, reg, 2)()
	})
	poll.Until(t, waitLimit, "a collection after the periodic full sync", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 2, fmt.Sprintf("collections %q", calls)
	})
	release <- struct{}{}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	// One started before the first sync (it may record the count after it: it runs beside
	// it), none after the first sync (one was running), none after the incremental syncs, one
	// after the periodic full sync.
	if len(calls) != 2 || !slices.Contains([]string{"after 0 full syncs", "after 1 full syncs"}, calls[0]) || calls[1] != "after 2 full syncs" {
		t.Errorf("collections %q, want [after 0 (or 1) full syncs, after 2 full syncs]", calls)
	}
}
