package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// The apiserver rejects an Event whose note is over 1024 characters (the seed-001 Node
// Warning was lost that way); fitNote keeps notes within it without splitting a rune.
func TestFitNote(t *testing.T) {
	for _, msg := range []string{
		"short",
		strings.Repeat("a", maxNote),
		strings.Repeat("a", maxNote+1),
		strings.Repeat("é", maxNote),
		strings.Repeat("x", 1020) + "日本語",
	} {
		got := fitNote(msg)
		if len(got) > maxNote || !utf8.ValidString(got) {
			t.Errorf("fitNote(%d bytes) = %d bytes, valid UTF-8 %v", len(msg), len(got), utf8.ValidString(got))
		}
		if len(msg) <= maxNote && got != msg {
			t.Errorf("fitNote changed a note of %d bytes", len(msg))
		}
		if len(msg) > maxNote && !strings.HasSuffix(got, "...") {
			t.Errorf("a cut note does not end in ...: %q", got[len(got)-10:])
		}
	}
}

// floodService is one Service with n multicast externalIPs: each is a problem of its own
// (a VIP the kernel refuses), all with one reason.
func floodService(n int) *v1.Service {
	svc, _ := stallService("flood", "10.96.0.40")
	for i := range n {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, fmt.Sprintf("239.1.%d.%d", i/250, i%250+1))
	}
	return svc
}

// eventsBy counts recorded Events by "object reason".
func eventsBy(evs []string) map[string]int {
	n := map[string]int{}
	for _, e := range evs {
		f := strings.SplitN(e, " ", 3)
		n[f[0]+" "+f[1]]++
	}
	return n
}

// Issue 23, finding 4: one Service with 2,000 multicast externalIPs made 2,000 Warning
// Events from one node, and as many again after every restart. Now the node sends one Event
// per Service and reason per EventInterval, with the count in its note; a restart sends one
// again (the daemon keeps nothing across restarts), not 2,000.
func TestEventFloodAggregated(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	node := newFakeNode()
	src := newMemSource("node-a")
	nodeObj := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	svcs, slices := stallObjects(false)
	src.Set(append(svcs, floodService(2000)), slices, nodeObj, false)
	ev := &recordedEvents{}
	var reg *prometheus.Registry
	run := func() *running {
		reg = prometheus.NewRegistry()
		deps := node.deps(src, reg)
		deps.Clock, deps.Events = clk, ev
		return startDaemon(t, testConfig(t), zap.NewNop(), deps)
	}
	d := run()
	evs := ev.all()
	by := eventsBy(evs)
	if len(by) != 1 || len(evs) != 1 {
		t.Fatalf("%d Events after the first sync (by object and reason: %v), want 1", len(evs), by)
	}
	if !strings.HasPrefix(evs[0], "default/flood ") || !strings.Contains(evs[0], " 2000 problems (at most one Event per 1m0s") ||
		!strings.Contains(evs[0], "239.1.0.1") || !strings.HasSuffix(evs[0], "; and 1997 more") {
		t.Errorf("Event %q, want one on default/flood counting 2000 problems and quoting the first", evs[0])
	}

	// More bad addresses within the interval: counted, sent once the interval has passed.
	synced := counter(t, reg, "kipvs_sync_incremental_total")
	src.Set(append(svcs, floodService(2100)), slices, nodeObj, false)
	poll.Until(t, waitLimit, "the change to be synced", func() (bool, string) {
		n := counter(t, reg, "kipvs_sync_incremental_total")
		return n > synced, fmt.Sprint(n, " incremental syncs")
	})
	if got := len(ev.all()); got != 1 {
		t.Fatalf("%d Events within the interval, want still 1: %q", got, ev.all()[1:])
	}
	clk.Step(EventInterval)
	poll.Until(t, waitLimit, "the held Event", func() (bool, string) {
		evs := ev.all()
		return len(evs) == 2 && strings.Contains(evs[1], " 100 problems "), fmt.Sprint(len(evs), " Events")
	})
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}

	// A restart reports the Service once more: one Event, not 2,100.
	run()
	if evs := ev.all(); len(evs) != 3 || !strings.Contains(evs[2], " 2100 problems ") {
		t.Fatalf("after a restart: %d Events in all (%v), want 3, the last counting 2100", len(evs), eventsBy(evs))
	}
}
