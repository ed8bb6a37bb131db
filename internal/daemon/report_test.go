package daemon

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/proxy"
)

// floodProblems are the n problems of one Service with n multicast externalIPs.
func floodProblems(svc types.NamespacedName, n int) []proxy.Problem {
	ps := make([]proxy.Problem, n)
	for i := range ps {
		ps[i] = proxy.Problem{Service: svc, Field: fmt.Sprintf("spec.externalIPs[%d]", i), Reason: "InvalidExternalIP",
			Message: fmt.Sprintf("239.%d.%d.%d is a multicast address; not served", i>>16&255, i>>8&255, i&255)}
	}
	return ps
}

// reportDaemon is a Daemon with only what report uses: a log and an Event aggregator.
func reportDaemon(log *zap.Logger, ev EventSink) *Daemon {
	d := &Daemon{log: log, problems: map[problemKey][]proxy.Problem{}}
	if ev != nil {
		d.events = newEventAggregator(ev, clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)), EventInterval)
		d.deps.Events = d.events
	}
	return d
}

// An incremental sync of a Service with n bad externalIPs reports its problems again (all
// known already). report looked each one up in the list of the old ones: 10k/20k/40k
// problems cost 0.49/1.7/5.6 s per sync, under the sync lock. With the old problems
// indexed, the cost grows linearly.
func BenchmarkReportKnownProblems(b *testing.B) {
	svc := types.NamespacedName{Namespace: "default", Name: "flood"}
	f := &family{ipFamily: inet.IPv4}
	for _, n := range []int{10_000, 20_000, 40_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d := reportDaemon(zap.NewNop(), &recordedEvents{})
			ps := floodProblems(svc, n)
			d.report(f, svc, slices.Clone(ps))
			b.ResetTimer()
			for b.Loop() {
				d.report(f, svc, slices.Clone(ps))
			}
		})
	}
}

// One Service with 40,000 bad externalIPs is reported with a bounded number of log lines
// and Event notes: the first maxReportedProblems problems, then one line with the count of
// the rest. The Event still counts every problem, and what is kept to tell new problems
// from known ones is complete: a problem that appears later is reported, known ones not.
func TestReportBoundedPerService(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	ev := &recordedEvents{}
	d := reportDaemon(zap.New(core), ev)
	svc := types.NamespacedName{Namespace: "default", Name: "flood"}
	f := &family{ipFamily: inet.IPv4}
	const n = 40_000
	ps := floodProblems(svc, n)
	d.report(f, svc, ps[:n-1])
	d.events.flush()

	lines := logs.TakeAll()
	if len(lines) > maxReportedProblems+1 {
		t.Errorf("%d log lines for one Service's %d problems, want at most %d", len(lines), n-1, maxReportedProblems+1)
	}
	if last := lines[len(lines)-1]; last.Message != moreProblemsMessage || !hasField(last, "more", int64(n-1-maxReportedProblems)) {
		t.Errorf("last log line %q %v, want the count of the %d problems not logged", last.Message, last.ContextMap(), n-1-maxReportedProblems)
	}
	evs := ev.all()
	if len(evs) != 1 {
		t.Fatalf("%d Events, want 1", len(evs))
	}
	if len(evs[0]) > maxNote+200 || !strings.Contains(evs[0], fmt.Sprintf(" %d problems ", n-1)) {
		t.Errorf("Event of %d bytes %q, want one short note counting %d problems", len(evs[0]), evs[0], n-1)
	}
	if got := len(d.problems[problemKey{family: inet.IPv4, svc: svc}]); got != n-1 {
		t.Errorf("%d problems kept for the next report, want all %d", got, n-1)
	}

	// One more problem: only it is reported.
	d.report(f, svc, ps)
	lines = logs.TakeAll()
	if len(lines) != 1 || !hasField(lines[0], "field", fmt.Sprintf("spec.externalIPs[%d]", n-1)) {
		t.Errorf("after one new problem: %d log lines %v, want one for spec.externalIPs[%d]", len(lines), lines, n-1)
	}
}

func hasField(e observer.LoggedEntry, key string, want any) bool {
	v, ok := e.ContextMap()[key]
	return ok && v == want
}
