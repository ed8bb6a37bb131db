package filesource

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/watch/watchtest"
)

// Tests of what the file source does with revisions it must not apply as they are: files
// caught half-written, empty, broken, too big, or not files at all.

// manyServices returns a YAML stream of n block-style Services (svc-0 ... svc-n-1); ipOf
// gives each one's cluster IP.
func manyServices(n int, ipOf func(i int) string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  namespace: ns\nspec:\n  clusterIP: %s\n  ports:\n  - port: 80\n    targetPort: 8080\n", i, ipOf(i))
	}
	return b.String()
}

func ipA(i int) string { return fmt.Sprintf("10.96.1.%d", i) }

// startSynced starts a source on path (content written first) and checks it synced.
func startSynced(t *testing.T, path, content string) (*Source, *clocktesting.FakeClock) {
	t.Helper()
	writeFile(t, path, content)
	src, clk, err := startFileSourceEvery(t, path, "", nil, 1000*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.All(); err != nil {
		t.Fatal(err)
	}
	return src, clk
}

// noDeletions fails the test when the pending changes delete any Service.
func noDeletions(t *testing.T, what string, src *Source) []string {
	t.Helper()
	ch, err := src.Pending()
	if err != nil {
		t.Fatal(err)
	}
	got := watchtest.Describe(ch.Services)
	for _, l := range got {
		if strings.HasSuffix(l, "<deleted>") {
			t.Errorf("%s: a Service was deleted: %q", what, got)
			break
		}
	}
	return got
}

// A file rewritten in place (truncate, then write, as `cmd > file` does) is seen by a poll
// between the two halves of the write. The half file must never be applied: whatever the
// cut, no Service is deleted, and the complete new revision is applied once it has settled.
func TestFileSourceRewriteInPlace(t *testing.T) {
	const n = 10
	path := filepath.Join(t.TempDir(), "src.yaml")
	src, clk := startSynced(t, path, manyServices(n, ipA))
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("ns/svc-%d -> %s[]", i, ipA(i)))
	}
	next := manyServices(n, func(i int) string { return fmt.Sprintf("10.96.2.%d", i) })
	cuts := []int{0, 1, 40, len(next) / 3, len(next)/2 - 1, len(next) / 2, len(next) - 30, len(next) - 1}
	for k, cut := range cuts {
		target := next
		if k%2 == 1 { // alternate between the two revisions so every round changes something
			target = manyServices(n, ipA)
		}
		writeFile(t, path, target[:cut]) // truncate + first half
		if _, err := src.reload(false); err != nil && cut != 0 {
			t.Logf("cut %d: reload: %v", cut, err)
		}
		noDeletions(t, fmt.Sprintf("cut %d, half written", cut), src)

		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(target[cut:]); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		_, _ = src.reload(false)
		noDeletions(t, fmt.Sprintf("cut %d, written", cut), src)
		if _, err := settle(t, src, clk); err != nil {
			t.Fatalf("cut %d: settled reload: %v", cut, err)
		}
		noDeletions(t, fmt.Sprintf("cut %d, settled", cut), src)
		snap, _ := src.All()
		want := all
		if target == next {
			want = nil
			for i := range n {
				want = append(want, fmt.Sprintf("ns/svc-%d -> 10.96.2.%d[]", i, i))
			}
		}
		watchtest.AssertLines(t, fmt.Sprintf("cut %d: services once settled", cut), watchtest.Describe(snap.Services), want)
	}
}

// An empty file is a revision not yet written, not "no Services": the last good revision
// stays. Only an explicit empty list means "no Services".
func TestFileSourceEmptyFileKeepsLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "src.yaml")
	src, clk := startSynced(t, path, fileSvcA+"---\n"+fileSvcB)
	want := []string{"ns/a -> 10.96.0.1[]", "ns/b -> 10.96.0.2[]"}
	for _, empty := range []string{"", "\n  \n", "# nothing yet\n---\n"} {
		writeFile(t, path, empty)
		applied, err := settle(t, src, clk)
		if applied || err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: reload() = %v, %v; want not applied, an error naming the file", empty, applied, err)
		}
		noDeletions(t, fmt.Sprintf("%q", empty), src)
		snap, _ := src.All()
		watchtest.AssertLines(t, fmt.Sprintf("%q: services", empty), watchtest.Describe(snap.Services), want)
		if res := src.LastResult(); res.Err == nil || res.Generation != 1 {
			t.Errorf("%q: LastResult() = %+v, want generation 1 and an error", empty, res)
		}
	}
	// A deliberate empty list does remove everything.
	for i, explicit := range []string{"apiVersion: v1\nkind: List\nitems: []\n", fileSvcA, "[]"} {
		writeFile(t, path, explicit)
		applied, err := settle(t, src, clk)
		if !applied || err != nil {
			t.Fatalf("%q: reload() = %v, %v; want applied", explicit, applied, err)
		}
		snap, _ := src.All()
		var wantNow []string
		if i == 1 {
			wantNow = []string{"ns/a -> 10.96.0.1[]"}
		}
		watchtest.AssertLines(t, fmt.Sprintf("%q: services", explicit), watchtest.Describe(snap.Services), wantNow)
	}
}

// An empty file at start-up does not sync the source (the daemon would otherwise remove every
// Service a previous run programmed): it syncs once real content arrives.
func TestFileSourceEmptyAtStartWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "src.yaml")
	writeFile(t, path, "")
	src, clk, err := startFileSourceEvery(t, path, "", nil, 1000*time.Hour)
	if err != nil {
		t.Fatalf("Start() = %v; an empty file is waited for", err)
	}
	if src.Synced() {
		t.Fatal("synced on an empty file")
	}
	if _, err := settle(t, src, clk); err == nil || src.Synced() {
		t.Fatalf("settled empty file: err %v, synced %v", err, src.Synced())
	}
	writeFile(t, path, fileSvcA)
	if applied, err := settle(t, src, clk); !applied || err != nil {
		t.Fatalf("reload() = %v, %v", applied, err)
	}
	if !src.Synced() {
		t.Fatal("not synced after content arrived")
	}
	snap, _ := src.All()
	watchtest.AssertLines(t, "services", watchtest.Describe(snap.Services), []string{"ns/a -> 10.96.0.1[]"})
}

// startWithin runs Start in a goroutine and fails the test if it does not return promptly.
func startWithin(t *testing.T, path string, unblock func()) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, _, err := startFileSource(t, path, "", nil)
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-time.After(5 * time.Second):
		unblock()
		<-errc
		t.Fatal("Start blocked on " + path)
		return nil
	}
}

// unblockFIFO opens the FIFO for writing and closes it, so a reader stuck in open or read
// sees EOF.
func unblockFIFO(path string) func() {
	return func() {
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			_ = f.Close()
		}
	}
}

// A FIFO, a device or a directory at the path is refused at once, never read.
func TestFileSourceRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"fifo", fifo, "named pipe"},
		{"device", os.DevNull, "device"},
		{"directory", dir, "directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := startWithin(t, tc.path, unblockFIFO(fifo))
			if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Start() = %v, want an error naming %s as a %s, not a regular file", err, tc.path, tc.want)
			}
		})
	}

	// A FIFO renamed over the file later: refused, the last good content stays.
	path := filepath.Join(dir, "src.yaml")
	src, clk := startSynced(t, path, fileSvcA)
	fifo2 := filepath.Join(dir, "fifo2")
	if err := syscall.Mkfifo(fifo2, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo2, path); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := settle(t, src, clk)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("reload() = %v, want a not-a-regular-file error", err)
		}
	case <-time.After(5 * time.Second):
		unblockFIFO(path)()
		<-done
		t.Fatal("reload blocked on a FIFO")
	}
	noDeletions(t, "fifo", src)
	snap, _ := src.All()
	watchtest.AssertLines(t, "services", watchtest.Describe(snap.Services), []string{"ns/a -> 10.96.0.1[]"})
}

// A file over the size bound is not read: an error at start, the last good content later.
func TestFileSourceOversize(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	writeFile(t, big, "")
	if err := os.Truncate(big, 64<<20+1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	if _, _, err := startFileSourceEvery(t, big, "", nil, 1000*time.Hour); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("Start() = %v, want a size limit error", err)
	}

	path := filepath.Join(dir, "src.yaml")
	src, clk := startSynced(t, path, fileSvcA)
	if err := os.Truncate(path, 64<<20+1); err != nil {
		t.Fatal(err)
	}
	if applied, err := settle(t, src, clk); applied || err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("reload() = %v, %v; want a size limit error", applied, err)
	}
	noDeletions(t, "oversize", src)
	snap, _ := src.All()
	watchtest.AssertLines(t, "services", watchtest.Describe(snap.Services), []string{"ns/a -> 10.96.0.1[]"})
}

// A revision that does not parse is rejected whole: the last good one stays.
func TestFileSourceSyntaxErrorKeepsLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "src.yaml")
	src, clk := startSynced(t, path, fileSvcA+"---\n"+fileSvcB)
	m := Metrics{
		ReloadErrors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "reload_errors"}),
		LastGood:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "last_good"}),
		SkippedObjects: prometheus.NewCounter(prometheus.CounterOpts{Name: "skipped"}),
	}
	src.SetMetrics(m)
	firstGood := src.LastResult().LastGood
	if got := metricValue(t, m.LastGood); firstGood.IsZero() || got != unixSeconds(firstGood) {
		t.Errorf("last good gauge = %v, want %v", got, unixSeconds(firstGood))
	}
	want := []string{"ns/a -> 10.96.0.1[]", "ns/b -> 10.96.0.2[]"}
	for _, tc := range []struct{ name, content, wantErr string }{
		{"YAML", strings.Replace(fileSvcA, "10.96.0.1", "10.96.0.9", 1) + "---\napiVersion: v1\nkind: Service\nmetadata: [unclosed\n", "line 8"},
		{"JSON", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"ns"},"spec":{"clusterIP":"10.96.0.9","ports":[{"port":80}]}}` + "\n{\"apiVersion\": \"v1\",", "line 2"},
		{"YAML scalar document", fileSvcA + "---\napiVers\n", "line 6"},
	} {
		writeFile(t, path, tc.content)
		applied, err := settle(t, src, clk)
		if applied || err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: reload() = %v, %v; want not applied, an error naming the file and %q", tc.name, applied, err, tc.wantErr)
		}
		noDeletions(t, tc.name, src)
		snap, _ := src.All()
		watchtest.AssertLines(t, tc.name+": services", watchtest.Describe(snap.Services), want)
	}
	// Each rejected revision is counted once, however often it is polled.
	_, _ = settle(t, src, clk)
	if got, res := metricValue(t, m.ReloadErrors), src.LastResult(); got != 3 || res.ReloadErrors != 3 || res.Generation != 1 {
		t.Errorf("reload errors = %v (LastResult %+v), want 3 at generation 1", got, res)
	}
	if got := metricValue(t, m.LastGood); got != unixSeconds(firstGood) {
		t.Errorf("last good gauge moved to %v", got)
	}

	// A good revision again: applied, the error cleared, the gauge moved, the skipped
	// object counted.
	writeFile(t, path, fileSvcA+"---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
	if applied, err := settle(t, src, clk); !applied || err != nil {
		t.Fatalf("reload() = %v, %v", applied, err)
	}
	res := src.LastResult()
	if res.Err != nil || res.Generation != 2 || metricValue(t, m.LastGood) != unixSeconds(res.LastGood) || !res.LastGood.After(firstGood) {
		t.Errorf("after a good revision: %+v, gauge %v", res, metricValue(t, m.LastGood))
	}
	if got := metricValue(t, m.SkippedObjects); got != 1 {
		t.Errorf("skipped objects = %v, want 1", got)
	}
}

// One object that decodes but is wrong is skipped; the rest of the revision applies, even
// inside a typed list.
func TestFileSourceBadObjectSkipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "src.yaml")
	src, clk := startSynced(t, path, fileSvcA)
	writeFile(t, path, `apiVersion: v1
kind: ServiceList
items:
- metadata: {name: a, namespace: ns}
  spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
- metadata: {name: typo, namespace: ns}
  spec: {clusterIP: 10.96.0.3, prots: [{port: 80}]}
- metadata: {name: b, namespace: ns}
  spec: {clusterIP: 10.96.0.2, ports: [{port: 80}]}
---
apiVersion: v2
kind: Service
metadata: {name: c, namespace: ns}
spec: {clusterIP: 10.96.0.4}
`)
	if applied, err := settle(t, src, clk); !applied || err != nil {
		t.Fatalf("reload() = %v, %v; want applied", applied, err)
	}
	snap, _ := src.All()
	watchtest.AssertLines(t, "services", watchtest.Describe(snap.Services), []string{"ns/a -> 10.96.0.1[]", "ns/b -> 10.96.0.2[]"})
	matchIssues(t, src.LastResult().Issues, []string{
		`doc 1 line 1 item 2: unknown field "spec.prots"`,
		"doc 2 line 11 item 0: unsupported kind v2 Service",
	})
}

// A revision of which no object is usable is rejected whole, like a syntax error: it is
// never "no Services".
func TestFileSourceNothingUsableKeepsLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "src.yaml")
	src, clk := startSynced(t, path, fileSvcA)
	writeFile(t, path, strings.Replace(fileSvcA, "ports:", "prots:", 1))
	if applied, err := settle(t, src, clk); applied || err == nil || !strings.Contains(err.Error(), "spec.prots") {
		t.Errorf("reload() = %v, %v; want not applied, an error with the object's issue", applied, err)
	}
	noDeletions(t, "nothing usable", src)
	snap, _ := src.All()
	watchtest.AssertLines(t, "services", watchtest.Describe(snap.Services), []string{"ns/a -> 10.96.0.1[]"})
}

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.GetCounter().GetValue()
	}
	return d.GetGauge().GetValue()
}
