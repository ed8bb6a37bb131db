package filesource

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/testutil/poll"
	"github.com/kipvs/kipvs/internal/watch"
	"github.com/kipvs/kipvs/internal/watch/watchtest"
)

// startFileSource starts a Source on path with a fake clock; the source is stopped (and
// its goroutine awaited) when the test ends.
func startFileSource(t *testing.T, path, nodeName string, hook func()) (*Source, *clocktesting.FakeClock, error) {
	t.Helper()
	return startFileSourceEvery(t, path, nodeName, hook, time.Second)
}

func startFileSourceEvery(t *testing.T, path, nodeName string, hook func(), interval time.Duration) (*Source, *clocktesting.FakeClock, error) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	src, err := New(Options{
		Path: path, NodeName: nodeName, PollInterval: interval, SettleInterval: testSettle, Clock: clk, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = src.start(ctx, hook)
	t.Cleanup(func() {
		cancel()
		<-src.Done()
	})
	if err == nil {
		// The first revision is read once it has settled (the poll interval is longer).
		clk.Step(testSettle)
		_, _ = src.reload(false)
	}
	return src, clk, err
}

// testSettle is the settle interval of the tests' sources: shorter than every poll interval
// they use, so that settling does not fire the poll ticker.
const testSettle = 100 * time.Millisecond

// settle re-reads the file as the poll loop does over a settle interval: a first look at its
// metadata, then, once the clock has moved past the settle interval, the read.
func settle(t *testing.T, src *Source, clk *clocktesting.FakeClock) (bool, error) {
	t.Helper()
	_, _ = src.reload(false)
	clk.Step(src.opts.SettleInterval)
	return src.reload(false)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFileSourceSample(t *testing.T) {
	src, _, err := startFileSource(t, "testdata/sample.yaml", "node-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.WaitForSync(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap, err := src.All()
	if err != nil {
		t.Fatal(err)
	}
	// The headless default/db is not proxied; its slice is not attached to anything.
	watchtest.AssertLines(t, "services", watchtest.Describe(snap.Services), []string{
		"default/web -> 10.96.12.34[web-7xk2p:10.244.1.10,10.244.1.11,10.244.2.20]",
		"kube-system/dns-udp -> 10.96.0.53[dns-udp-q9v4t:10.244.2.53]",
	})
	dns := snap.Services[types.NamespacedName{Namespace: "kube-system", Name: "dns-udp"}].Service
	if p := dns.Spec.Ports[0]; p.Protocol != v1.ProtocolUDP || p.NodePort != 30053 {
		t.Errorf("dns-udp port = %+v", p)
	}
	if snap.Node == nil || snap.Node.Name != "node-a" || snap.Node.Spec.PodCIDRs[0] != "10.244.1.0/24" {
		t.Errorf("node = %+v", snap.Node)
	}
	// Trigger times come from before the source started: not reported.
	if len(snap.Pending.TriggerTimes) != 0 {
		t.Errorf("trigger times = %v", snap.Pending.TriggerTimes)
	}
	res := src.LastResult()
	if res.Generation != 1 || res.Services != 3 || res.EndpointSlices != 3 || !res.Node || len(res.Issues) != 0 || res.Err != nil {
		t.Errorf("LastResult() = %+v", res)
	}
	if got := src.ServiceCIDRs(); got.Origin != watch.ServiceCIDRsUnknown {
		t.Errorf("ServiceCIDRs() = %+v, want unknown", got)
	}
}

func TestFileSourceStartErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
		want error
	}{
		{"missing", filepath.Join(dir, "nope.yaml"), fs.ErrNotExist},
		{"directory", dir, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, _, err := startFileSource(t, tc.path, "", nil)
			if err == nil {
				t.Fatal("Start succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Start() = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %q does not name the file", err)
			}
			if src.Synced() {
				t.Error("source synced after a failed start")
			}
			if _, err := src.All(); !errors.Is(err, watch.ErrNotSynced) {
				t.Errorf("All() = %v, want watch.ErrNotSynced", err)
			}
			select {
			case <-src.Done():
			default:
				t.Error("Done() not closed after a failed start")
			}
		})
	}
}

func TestNewFileSourceValidates(t *testing.T) {
	_, err := New(Options{PollInterval: -time.Second, SettleInterval: -time.Second, MaxFileSize: -1})
	for _, want := range []string{"Path is required", "PollInterval -1s is negative", "SettleInterval -1s is negative", "MaxFileSize -1 is negative", "Logger is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New error %v does not mention %q", err, want)
		}
	}
}

func TestFileSourceMalformedStillSyncs(t *testing.T) {
	src, _, err := startFileSource(t, "testdata/malformed.yaml", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := src.All()
	if err != nil {
		t.Fatal(err)
	}
	watchtest.AssertLines(t, "services", watchtest.Describe(snap.Services), []string{"default/good -> 10.96.0.10[good-abc:10.244.0.5]"})
	res := src.LastResult()
	var docs []int
	for _, is := range res.Issues {
		docs = append(docs, is.Document)
		if is.File != "testdata/malformed.yaml" {
			t.Errorf("issue file = %q", is.File)
		}
	}
	if want := []int{2, 3, 4, 5, 6}; !equalInts(docs, want) {
		t.Errorf("issue documents = %v, want %v", docs, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

const (
	fileSvcA   = "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n"
	fileSliceA = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a-1, namespace: ns, labels: {kubernetes.io/service-name: a}}\naddressType: IPv4\nendpoints: [{addresses: [10.0.0.1]}]\n"
	fileSvcB   = "apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: ns}\nspec: {clusterIP: 10.96.0.2, ports: [{port: 80}]}\n"
)

// TestFileSourceReload drives reload directly (through settle), deterministically.
func TestFileSourceReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "src.yaml")
	writeFile(t, path, fileSvcA+"---\n"+fileSliceA)
	src, clk, err := startFileSource(t, path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.All(); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name        string
		do          func()
		wantApplied bool
		wantErr     bool
		wantPending []string
		wantAll     []string
	}{
		{
			name:    "unchanged file: nothing read",
			do:      func() {},
			wantAll: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.1]"},
		},
		{
			name:    "rewritten with identical content: read, but not applied",
			do:      func() { writeFile(t, path, fileSvcA+"---\n"+fileSliceA) },
			wantAll: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.1]"},
		},
		{
			name: "service added, slice changed",
			do: func() {
				writeFile(t, path, fileSvcA+"---\n"+strings.Replace(fileSliceA, "10.0.0.1", "10.0.0.2", 1)+"---\n"+fileSvcB)
			},
			wantApplied: true,
			wantPending: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.2]", "ns/b -> 10.96.0.2[]"},
			wantAll:     []string{"ns/a -> 10.96.0.1[a-1:10.0.0.2]", "ns/b -> 10.96.0.2[]"},
		},
		{
			name:    "file removed: last good content kept",
			do:      func() { _ = os.Remove(path) },
			wantErr: true,
			wantAll: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.2]", "ns/b -> 10.96.0.2[]"},
		},
		{
			name:        "file back with a service removed",
			do:          func() { writeFile(t, path, fileSvcB) },
			wantApplied: true,
			wantPending: []string{"ns/a -> <deleted>"},
			wantAll:     []string{"ns/b -> 10.96.0.2[]"},
		},
		{
			name: "atomic replace by rename is seen",
			do: func() {
				tmp := path + ".tmp"
				writeFile(t, tmp, fileSvcA)
				if err := os.Rename(tmp, path); err != nil {
					t.Fatal(err)
				}
			},
			wantApplied: true,
			wantPending: []string{"ns/a -> 10.96.0.1[]", "ns/b -> <deleted>"},
			wantAll:     []string{"ns/a -> 10.96.0.1[]"},
		},
	}
	gen := src.LastResult().Generation
	for _, st := range steps {
		st.do()
		applied, err := settle(t, src, clk)
		if applied != st.wantApplied || (err != nil) != st.wantErr {
			t.Fatalf("%s: reload() = %v, %v; want applied=%v, error=%v", st.name, applied, err, st.wantApplied, st.wantErr)
		}
		res := src.LastResult()
		if st.wantApplied {
			gen++
		}
		if res.Generation != gen || (res.Err != nil) != st.wantErr {
			t.Errorf("%s: LastResult() generation %d err %v; want %d, error=%v", st.name, res.Generation, res.Err, gen, st.wantErr)
		}
		ch, err := src.Pending()
		if err != nil {
			t.Fatal(err)
		}
		watchtest.AssertLines(t, st.name+": Pending", watchtest.Describe(ch.Services), st.wantPending)
		snap, _ := src.All()
		watchtest.AssertLines(t, st.name+": All", watchtest.Describe(snap.Services), st.wantAll)
	}
}

// TestFileSourcePollLoop checks that the background loop re-reads on the clock's tick.
func TestFileSourcePollLoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "src.json")
	writeFile(t, path, `{"apiVersion":"v1","kind":"List","items":[]}`)
	polled := make(chan struct{}, 16)
	src, clk, err := startFileSource(t, path, "n1", func() { polled <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	<-src.Changed() // the sync signal
	poll.Until(t, 10*time.Second, "poll ticker", watchtest.ClockWaiting(clk))

	// A tick with the file unchanged: a poll happens, nothing changes.
	clk.Step(time.Second)
	watchtest.Recv(t, "poll", polled)
	if len(src.Changed()) != 0 {
		t.Fatal("Changed() fired for an unchanged file")
	}

	writeFile(t, path, `{"apiVersion":"v1","kind":"List","items":[`+
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"ns"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":80}]}},`+
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}]}`)
	// The first poll sees the change, the next one (a settle interval later) reads it.
	clk.Step(time.Second)
	watchtest.Recv(t, "poll", polled)
	if len(src.Changed()) != 0 {
		t.Fatal("Changed() fired before the file settled")
	}
	clk.Step(time.Second)
	watchtest.Recv(t, "poll", polled)
	watchtest.Recv(t, "Changed()", src.Changed())
	ch, err := src.Pending()
	if err != nil {
		t.Fatal(err)
	}
	watchtest.AssertLines(t, "Pending", watchtest.Describe(ch.Services), []string{"ns/a -> 10.96.0.1[]"})
	if !ch.NodeChanged || ch.Node == nil || ch.Node.Name != "n1" {
		t.Errorf("node: changed=%v node=%v", ch.NodeChanged, ch.Node)
	}
}

// TestFileSourceRacyReRead covers a rewrite that leaves the metadata unchanged (two writes
// within one filesystem timestamp tick): the file is re-read while it is recent, and only
// then.
func TestFileSourceRacyReRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "src.yaml")
	writeFile(t, path, fileSvcA)
	// The poll loop must not run while the test moves the clock: a 1000h interval.
	src, clk, err := startFileSourceEvery(t, path, "", nil, 1000*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		now         time.Time
		content     string
		wantApplied bool
	}{
		{"old file, same metadata: not read", fi.ModTime().Add(time.Minute), strings.Replace(fileSvcA, "10.96.0.1", "10.96.0.7", 1), false},
		{"recent file, same metadata: re-read", fi.ModTime().Add(time.Second), strings.Replace(fileSvcA, "10.96.0.1", "10.96.0.8", 1), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Decide racy-ness from the clock at read time, as a real read would.
			clk.SetTime(tc.now.Add(-testSettle))
			_, _ = src.reload(true)
			clk.SetTime(tc.now)
			if _, err := src.reload(true); err != nil {
				t.Fatal(err)
			}
			gen := src.LastResult().Generation
			writeFile(t, path, tc.content)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			// Pretend the rewrite left every piece of metadata as it was.
			src.mu.Lock()
			src.sig, src.candidate = sigOf(fi), sigOf(fi)
			src.mu.Unlock()

			applied, err := src.reload(false)
			if err != nil {
				t.Fatal(err)
			}
			if applied != tc.wantApplied || (src.LastResult().Generation != gen) != tc.wantApplied {
				t.Errorf("applied = %v (generation %d -> %d), want %v", applied, gen, src.LastResult().Generation, tc.wantApplied)
			}
		})
	}
}
