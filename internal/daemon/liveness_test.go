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

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/reconcile"
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

// Rules that keep failing to apply make /healthz fail after 2 x syncPeriod, as
// kube-proxy's does (its iptables-restore), but never /livez: the loop is alive and
// retrying, and a restart by the kubelet would fix nothing and program nothing until the
// new process's first sync. A virtual server the kernel keeps refusing does not make the
// node unhealthy (kube-proxy logs "Failed to sync service" and counts the sync done): one
// bad object must not take a node out of its load balancers.
func TestPersistentSyncErrorKeepsLivez(t *testing.T) {
	const syncPeriod = 30 * time.Second
	d, node, src, clk := livenessDaemon(t, syncPeriod)
	var failed atomic.Int64
	node.ipvs.SetFault(func(_ int, _ ipvs.Op) error {
		failed.Add(1)
		return errors.New("injected: the kernel refuses every change")
	})
	// Someone deletes one of kipvs's rules, and restoring the rules fails from now on: every
	// full sync finds the drift and fails to repair it.
	if err := node.nf.Restore("*nat\n-D KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT\nCOMMIT\n"); err != nil {
		t.Fatal(err)
	}
	rulesFault := faulty.New(1, 1)
	rulesFault.SetFilter(func(op string) bool { return strings.HasPrefix(op, "iptables-restore") })
	node.nf.SetFaulty(rulesFault)
	svcs, slices := stallObjects(true)
	src.Set(svcs, slices, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, false)
	poll.Until(t, waitLimit, "a failed sync", func() (bool, string) { return failed.Load() > 0, "no mutation refused yet" })
	// The periodic full sync finds the deleted rule and fails to restore it; then a change
	// comes (a sync is queued) whose sync fails to apply the rules again.
	poll.Until(t, waitLimit, "a failed rules restore", func() (bool, string) {
		clk.Step(time.Second)
		return len(rulesFault.Injected()) > 0, "no restore refused yet"
	})
	svcs, slices = stallObjects(false)
	src.Set(svcs, slices, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, false)

	// Retries (backoff up to syncPeriod) for ten minutes of the injected clock, far past
	// every timeout, with at least five more failed restores.
	start, before := clk.Now(), len(rulesFault.Injected())
	poll.Until(t, waitLimit, "ten minutes of failing retries", func() (bool, string) {
		clk.Step(syncPeriod)
		n := len(rulesFault.Injected())
		return clk.Since(start) >= 10*time.Minute && n >= before+5, fmt.Sprintf("%v, %d refused restores", clk.Since(start), n)
	})
	if code, body := probe(t, d, "/healthz"); code != 503 {
		t.Errorf("/healthz = %d %s after minutes of failing syncs, want 503 (kube-proxy's semantics)", code, body)
	}
	if code, body := probe(t, d, "/livez"); code != 200 {
		t.Errorf("/livez = %d %s while a sync keeps failing, want 200: the kubelet would restart a process that is not stuck", code, body)
	}

	// The rules apply again, and a change whose virtual server the kernel refuses comes:
	// /healthz recovers and stays healthy while that virtual server keeps failing.
	node.nf.SetFaulty(nil)
	svcs, slices = stallObjects(true)
	src.Set(svcs, slices, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, false)
	poll.Until(t, waitLimit, "/healthz to recover with a virtual server failing", func() (bool, string) {
		clk.Step(time.Second)
		code, body := probe(t, d, "/healthz")
		return code == 200, body
	})
	refused := failed.Load()
	poll.Until(t, waitLimit, "the failing virtual server's retries", func() (bool, string) {
		clk.Step(syncPeriod)
		return failed.Load() >= refused+5, fmt.Sprintf("%d refused mutations", failed.Load())
	})
	if code, body := probe(t, d, "/healthz"); code != 200 {
		t.Errorf("/healthz = %d %s while only a virtual server fails, want 200 (kube-proxy's semantics)", code, body)
	}
	if st := d.State(); len(st.Families[0].Failed) == 0 || st.Families[0].Failed[0].Kind != "virtual_server" || !st.Families[0].Synced {
		t.Errorf("state document: synced %v, failed %+v; want synced with the failing virtual server listed", st.Families[0].Synced, st.Families[0].Failed)
	}

	// The kernel takes changes again: everything is applied at the next retry.
	node.ipvs.SetFault(nil)
	poll.Until(t, waitLimit, "the failed virtual servers to be applied", func() (bool, string) {
		clk.Step(time.Second)
		d.mu.Lock()
		defer d.mu.Unlock()
		var failed []reconcile.ObjectStatus
		for _, f := range d.families {
			failed = append(failed, f.rec.Failed()...)
		}
		return len(failed) == 0, fmt.Sprintf("%d objects still failed", len(failed))
	})
	if code, body := probe(t, d, "/healthz"); code != 200 {
		t.Errorf("/healthz = %d %s after recovery", code, body)
	}
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
