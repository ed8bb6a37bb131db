package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// probe answers path on the daemon's health server: the status code and the body.
func probe(t *testing.T, d *running, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	d.Health().Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	var r map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", path, rec.Body.String(), err)
	}
	return rec.Code, rec.Body.String()
}

// livenessDaemon runs the daemon of node-a on a fake clock over the stall test's three
// Services, with the given sync period; it returns the daemon, its node, source and clock.
func livenessDaemon(t *testing.T, syncPeriod time.Duration) (*running, *fakeNode, *memSource, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	node := newFakeNode()
	src := newMemSource("node-a")
	svcs, slices := stallObjects(false)
	src.Set(svcs, slices, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, false)
	deps := node.deps(src, prometheus.NewRegistry())
	deps.Clock = clk
	cfg := testConfig(t)
	cfg.IPVS.SyncPeriod = syncPeriod
	return startDaemon(t, cfg, zaptest.NewLogger(t), deps), node, src, clk
}

// A sync that keeps failing (one bad object, a kernel that refuses every change) makes
// /healthz fail after 2 x syncPeriod, as kube-proxy's does, but never /livez: the loop is
// alive and retrying, and a restart by the kubelet would fix nothing and program nothing
// until the new process's first sync.
func TestPersistentSyncErrorKeepsLivez(t *testing.T) {
	const syncPeriod = 30 * time.Second
	d, node, src, clk := livenessDaemon(t, syncPeriod)
	var failed atomic.Int64
	node.ipvs.SetFault(func(_ int, _ ipvs.Op) error {
		failed.Add(1)
		return errors.New("injected: the kernel refuses every change")
	})
	svcs, slices := stallObjects(true)
	src.Set(svcs, slices, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, false)
	poll.Until(t, waitLimit, "a failed sync", func() (bool, string) { return failed.Load() > 0, "no mutation refused yet" })

	// Retries (backoff up to syncPeriod) for ten minutes of the injected clock, far past
	// every timeout, with at least five more failed syncs.
	start, before := clk.Now(), failed.Load()
	poll.Until(t, waitLimit, "ten minutes of failing retries", func() (bool, string) {
		clk.Step(syncPeriod)
		return clk.Since(start) >= 10*time.Minute && failed.Load() >= before+5,
			fmt.Sprintf("%v, %d refused mutations", clk.Since(start), failed.Load())
	})
	if code, body := probe(t, d, "/healthz"); code != 503 {
		t.Errorf("/healthz = %d %s after minutes of failing syncs, want 503 (kube-proxy's semantics)", code, body)
	}
	if code, body := probe(t, d, "/livez"); code != 200 {
		t.Errorf("/livez = %d %s while a sync keeps failing, want 200: the kubelet would restart a process that is not stuck", code, body)
	}

	// The kernel takes changes again: both recover at the next retry.
	node.ipvs.SetFault(nil)
	poll.Until(t, waitLimit, "/healthz to recover", func() (bool, string) {
		clk.Step(time.Second)
		code, body := probe(t, d, "/healthz")
		return code == 200, body
	})
}

// A sync that never returns (here, a kernel call that blocks) is a stuck process: /livez
// fails once it has run StuckTimeout, naming the sync, and recovers when the sync returns.
func TestStuckSyncFailsLivez(t *testing.T) {
	const syncPeriod = 30 * time.Second
	d, node, src, clk := livenessDaemon(t, syncPeriod)
	blocked, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	node.ipvs.SetFault(func(_ int, _ ipvs.Op) error {
		if once.CompareAndSwap(false, true) {
			close(blocked)
			<-release
		}
		return nil
	})
	svcs, slices := stallObjects(true)
	src.Set(svcs, slices, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, false)
	select {
	case <-blocked:
	case <-time.After(waitLimit):
		t.Fatal("the sync never reached the kernel")
	}
	stuck := d.Health().StuckTimeout()
	if stuck < 4*syncPeriod {
		t.Errorf("StuckTimeout = %v, want at least 4 x syncPeriod", stuck)
	}
	clk.Step(stuck - time.Second)
	if code, body := probe(t, d, "/livez"); code != 200 {
		t.Errorf("/livez = %d %s, a sync running %v (< %v) is slow, not stuck", code, body, stuck-time.Second, stuck)
	}
	clk.Step(time.Second)
	code, body := probe(t, d, "/livez")
	if code != 503 || !strings.Contains(body, `"stuck":"sync running since`) {
		t.Errorf("/livez = %d %s with a sync running %v, want 503 naming the stuck sync", code, body, stuck)
	}
	close(release)
	poll.Until(t, waitLimit, "/livez to recover", func() (bool, string) {
		code, body := probe(t, d, "/livez")
		return code == 200, body
	})
}
