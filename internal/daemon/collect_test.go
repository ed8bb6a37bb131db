package daemon

import (
	"fmt"
	"net/netip"
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

// Deps.Collect (the real daemon's runtime.GC) runs once the source has synced, after the
// first full sync and after each periodic full sync, never after an incremental sync and
// never while the daemon lock is held (a collection at 10,000 Services takes long enough
// to delay a change).
func TestCollectAfterFullSyncsOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	node := newFakeNode()
	src := newMemSource("node-a")
	svcs, slices := stallObjects(false)
	src.Set(svcs, slices, nil, false)
	reg := prometheus.NewRegistry()
	deps := node.deps(src, reg)
	deps.Clock = clk

	var (
		mu    sync.Mutex
		calls []string // the full syncs done at each call, and whether d.mu was free
		d     *running
	)
	deps.Collect = func() {
		free := d.mu.TryLock()
		if free {
			d.mu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, fmt.Sprintf("after %v full syncs, lock free %v", counter(t, reg, "kipvs_sync_full_total"), free))
	}
	numCalls := func(n int) func() (bool, string) {
		return func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(calls) >= n, fmt.Sprintf("calls %q", calls)
		}
	}
	cfg := testConfig(t)
	cfg.IPVS.SyncPeriod = 30 * time.Second
	d = newDaemon(t, cfg, zaptest.NewLogger(t), deps)
	d.start(t)
	poll.Until(t, waitLimit, "a collection after the first sync", numCalls(2))

	web := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}
	// An incremental change: programmed, with no collection after it.
	svcs, slices = stallObjects(true)
	src.Set(svcs, slices, nil, false)
	poll.Until(t, waitLimit, "the change to be programmed", func() (bool, string) {
		dests, err := node.ipvs.Destinations(web)
		return len(dests) == 2, fmt.Sprintf("real servers of web %v, %v", dests, err)
	})

	// The periodic full sync.
	poll.Until(t, waitLimit, "the periodic full sync", func() (bool, string) {
		clk.Step(time.Second)
		return fullSyncs(t, reg, 2)()
	})
	poll.Until(t, waitLimit, "a collection after the periodic full sync", numCalls(3))
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"after 0 full syncs, lock free true",
		"after 1 full syncs, lock free true",
		"after 2 full syncs, lock free true",
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("collections:\n%q\nwant:\n%q", calls, want)
	}
}
