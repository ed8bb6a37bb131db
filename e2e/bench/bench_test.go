package bench

import (
	"encoding/binary"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipvs/kipvs/internal/testutil/golden"
)

func TestPercentile(t *testing.T) {
	ten := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	for _, c := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{ten, 50, 5}, {ten, 90, 9}, {ten, 91, 10}, {ten, 99, 10}, {ten, 100, 10}, {ten, 10, 1}, {ten, 1, 1},
		{[]float64{0.4}, 50, 0.4}, {[]float64{0.4}, 99, 0.4},
		// 50 samples: p99 is the 50th (the largest), p50 the 25th.
		{seq(50), 99, 50}, {seq(50), 50, 25}, {seq(200), 99, 198},
	} {
		if got := Percentile(c.xs, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.xs, c.p, got, c.want)
		}
	}
	if got := Percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("Percentile(nil) = %v, want NaN", got)
	}
	if got := Percentile(ten, 0); !math.IsNaN(got) {
		t.Errorf("Percentile(p=0) = %v, want NaN", got)
	}
	if ten[0] != 10 {
		t.Error("Percentile sorted its input")
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(n - i) // descending: the input order must not matter
	}
	return out
}

func TestSummarize(t *testing.T) {
	got := Summarize([]float64{0.3, 0.2, 300, 0.5}, 1)
	want := Latency{Count: 4, TimedOut: 1, P50: 0.3, P99: 300, Max: 300, Samples: []float64{0.3, 0.2, 300, 0.5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if got := Summarize(nil, 0); !reflect.DeepEqual(got, Latency{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", got)
	}
}

func TestHistogram(t *testing.T) {
	// Two families, as both proxies export them; other metrics and malformed le ignored.
	m := map[string]float64{
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="0.25"}`: 10,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="0.5"}`:  30,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="1"}`:    38,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="2"}`:    40,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="+Inf"}`: 40,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="0.25"}`: 0,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="0.5"}`:  10,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="1"}`:    10,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="2"}`:    10,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="+Inf"}`: 10,
		`kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"}`:              12,
		`kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"}`:            40,
		`kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.5"}`:     99,
		`kubeproxy_network_programming_duration_seconds_bucket{le="x"}`:                     99,
	}
	h := HistogramFrom(m, NetworkProgrammingMetric)
	want := Histogram{{0.25, 10}, {0.5, 40}, {1, 48}, {2, 50}, {math.Inf(1), 50}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("HistogramFrom = %v, want %v", h, want)
	}
	// rank 25 in (0.25, 0.5] holding 10..40: 0.25 + 0.25*15/30; rank 49.5 in (1, 2]: 1 + 1.5/2.
	if got := h.Summary(); got != (HistogramSummary{Count: 50, P50: 0.375, P99: 1.75}) {
		t.Errorf("Summary = %+v, want count 50, p50 0.375, p99 1.75", got)
	}
	if got := h.Quantile(0.1); got != 0.125 { // rank 5 in [0, 0.25] holding 0..10
		t.Errorf("Quantile(0.1) = %v, want 0.125", got)
	}
	before := Histogram{{0.25, 10}, {0.5, 10}, {1, 10}, {2, 10}, {math.Inf(1), 10}}
	d := h.Sub(before)
	if want := (Histogram{{0.25, 0}, {0.5, 30}, {1, 38}, {2, 40}, {math.Inf(1), 40}}); !reflect.DeepEqual(d, want) {
		t.Errorf("Sub = %v, want %v", d, want)
	}
	// rank 20 in (0.25, 0.5] holding 0..30.
	if got, want := d.Quantile(0.5), 0.25+0.25*20/30; math.Abs(got-want) > 1e-12 {
		t.Errorf("Sub().Quantile(0.5) = %v, want %v", got, want)
	}
	// Beyond the last finite bucket: its upper bound, as histogram_quantile.
	tail := Histogram{{1, 5}, {math.Inf(1), 10}}
	if got := tail.Quantile(0.99); got != 1 {
		t.Errorf("Quantile in +Inf = %v, want 1", got)
	}
	if got := (Histogram{}).Summary(); got != (HistogramSummary{}) {
		t.Errorf("empty Summary = %+v", got)
	}
	// One family only.
	if got, want := HistogramFrom(m, NetworkProgrammingMetric, "ip_family=IPv6"), (Histogram{{0.25, 0}, {0.5, 10}, {1, 10}, {2, 10}, {math.Inf(1), 10}}); !reflect.DeepEqual(got, want) {
		t.Errorf("HistogramFrom(IPv6) = %v, want %v", got, want)
	}
	if got := HistogramFrom(m, NetworkProgrammingMetric, "ip_family=IPv5"); len(got) != 0 {
		t.Errorf("HistogramFrom(IPv5) = %v, want none", got)
	}
	if got := HistogramFrom(m, "nothing"); len(got) != 0 {
		t.Errorf("HistogramFrom(unknown) = %v", got)
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 1200, stime 300, cutime 45, cstime 5.
	stat := "4242 (kube proxy) x) S 1 4242 4242 0 -1 4194560 20000 0 0 0 1200 300 45 5 20 0 12 0 500 800000000 20000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := ParseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := (CPUTimes{User: 1200, System: 300, ChildUser: 45, ChildSystem: 5}); got != want {
		t.Errorf("ParseStat = %+v, want %+v", got, want)
	}
	if got.Total() != 1550 {
		t.Errorf("Total = %d, want 1550", got.Total())
	}
	for _, bad := range []string{"4242 kube-proxy S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 20000 0 0 0 12a 300 45 5 20"} {
		if _, err := ParseStat(bad); err == nil {
			t.Errorf("ParseStat(%q) accepted", bad)
		}
	}
	if got, want := TicksToSeconds(1550, 100), 15.5; got != want {
		t.Errorf("TicksToSeconds = %v, want %v", got, want)
	}
	if got := Cores(15, time.Minute); got != 0.25 {
		t.Errorf("Cores = %v, want 0.25", got)
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tkipvs\nVmPeak:\t 1300000 kB\nVmHWM:\t   80640 kB\nVmRSS:\t   70000 kB\n"
	got, err := ParseVmHWM(status)
	if err != nil {
		t.Fatal(err)
	}
	if got != 80640*1024 {
		t.Errorf("ParseVmHWM = %d, want %d", got, 80640*1024)
	}
	for _, bad := range []string{"Name:\tx\n", "VmHWM:\t 12 MB\n", "VmHWM:\t x kB\n"} {
		if _, err := ParseVmHWM(bad); err == nil {
			t.Errorf("ParseVmHWM(%q) accepted", bad)
		}
	}
}

func TestParseLoadAvg(t *testing.T) {
	if v, err := ParseLoadAvg("2.31 1.70 0.94 3/412 26115\n"); err != nil || v != 2.31 {
		t.Errorf("ParseLoadAvg = %v, %v; want 2.31", v, err)
	}
	for _, bad := range []string{"", "x 1 2 3/4 5", "1.0"} {
		if _, err := ParseLoadAvg(bad); err == nil {
			t.Errorf("ParseLoadAvg(%q) accepted", bad)
		}
	}
}

func TestParseClockTicks(t *testing.T) {
	auxv := func(pairs ...uint64) []byte {
		var b []byte
		for _, v := range pairs {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		return b
	}
	got, err := ParseClockTicks(auxv(6, 4096, 17, 250, 0, 0))
	if err != nil || got != 250 {
		t.Errorf("ParseClockTicks = %d, %v; want 250", got, err)
	}
	if _, err := ParseClockTicks(auxv(6, 4096, 0, 0, 17, 100)); err == nil {
		t.Error("ParseClockTicks read past AT_NULL")
	}
	if _, err := ParseClockTicks(auxv(17, 0)); err == nil {
		t.Error("ParseClockTicks accepted AT_CLKTCK 0")
	}
	// This machine: Linux on x86-64 has USER_HZ 100.
	if hz, err := ClockTicks(); err != nil || hz != 100 {
		t.Errorf("ClockTicks = %d, %v; want 100", hz, err)
	}
}

func sampleRun() Run {
	vm := VM{Kernel: "6.1.0-44-amd64", CPUs: 2, MemoryMB: 3072, Accel: "tcg"}
	rec := func(proxy string, n int, first, p50, p99, maxv float64, rss int64) Record {
		return Record{Proxy: proxy, Version: proxy + " v", N: n, E: 10, VM: vm,
			FirstSyncSeconds: first, FirstSyncResolutionSeconds: 1.1, FirstSyncReportedSeconds: first * 3, FirstSyncCPUSeconds: first * 0.9,
			ChangeLatency:      Latency{Count: 50, P50: p50, P99: p99, Max: maxv, Samples: []float64{p50, p99, maxv}},
			NetworkProgramming: HistogramSummary{Count: 50, P50: p50 * 0.9, P99: p99 * 0.9},
			IdleCPUCores:       0.0123, IdleSeconds: 60, PeakRSSBytes: rss, SyncCount: 7, SyncAvgSeconds: first / 2,
			HostLoadMean: 1.9, HostLoadMax: 2.4}
	}
	failed := rec("kube-proxy", 2000, 0, 0, 0, 0, 0)
	failed.ChangeLatency, failed.NetworkProgramming, failed.IdleSeconds = Latency{}, HistogramSummary{}, 0
	failed.Error = "first sync not complete after 30m0s"
	profiled := rec("kipvs", 2000, 13.4, 0.37, 0.9, 1.2, 82.6e6)
	profiled.FullSyncCount, profiled.FullSyncAvgSeconds = 5, 8.25
	profiled.Profiles = []string{"bench-compare-kipvs-2000/heap-first-sync.pprof", "bench-compare-kipvs-2000/cpu-idle.pprof"}
	return Run{
		Date:   "2026-03-01T10:00:00Z",
		Params: Params{N: []int{500, 1000, 2000}, E: 10, Changes: 50, IntervalSeconds: 3, IdleSeconds: 60, Proxies: []string{"kube-proxy", "kipvs"}, Seed: 1},
		Host:   Host{CPU: "AMD EPYC", Cores: 2},
		Records: []Record{
			rec("kube-proxy", 500, 80, 5.2, 9.8, 11, 41e6), rec("kipvs", 500, 3.1, 0.21, 0.45, 0.5, 30e6),
			rec("kube-proxy", 1000, 210, 11, 19.5, 20, 55e6), rec("kipvs", 1000, 6.2, 0.25, 0.61, 0.7, 45e6),
			failed, profiled,
		},
	}
}

func TestResultFile(t *testing.T) {
	r := sampleRun()
	p := filepath.Join(t.TempDir(), "out", "bench-compare.json")
	if err := WriteRun(p, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRun(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("ReadRun(WriteRun(r)) differs (-want +got):\n%s", diff)
	}

	// The VM's output: result lines among test output, one with a console's \r.
	var out strings.Builder
	out.WriteString("=== RUN   TestBenchCompare\n")
	for i, rec := range r.Records {
		line, err := ResultLine(rec)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(line)
		if i == 1 {
			out.WriteString("\r")
		}
		out.WriteString("\n    bench_e2e_test.go:1: something\n")
	}
	recs, err := ParseResults(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Records, recs); diff != "" {
		t.Errorf("ParseResults differs (-want +got):\n%s", diff)
	}
	if _, err := ParseResults(ResultPrefix + `{"proxy":"kipvs","bogus":1}` + "\n"); err == nil {
		t.Error("ParseResults accepted an unknown field")
	}
}

func TestRenderSVG(t *testing.T) {
	svg := RenderSVG(sampleRun())
	golden.Check(t, "bench-compare.golden.svg", string(svg))
	// Well-formed XML.
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("RenderSVG is not well-formed XML: %v", err)
		}
	}
	// No records: both panels say so.
	golden.Check(t, "empty.golden.svg", string(RenderSVG(Run{Date: "2026-03-01T10:00:00Z", Params: Params{E: 10}})))
}

func TestMarkdownTable(t *testing.T) {
	golden.Check(t, "table.golden.md", MarkdownTable(sampleRun()))
}

func TestConfigEnv(t *testing.T) {
	c := DefaultConfig(2000)
	c.Proxies = []string{"kipvs"}
	c.Seed = 7
	got, err := ConfigFromEnv(func(k string) string { return c.Env()[k] })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Errorf("ConfigFromEnv(Env()) differs (-want +got):\n%s", diff)
	}
	// With profiles (and an environment without the profile variables: none).
	p := c
	p.Profiles, p.ProfileRoot, p.Name = []string{"kube-proxy", "kipvs"}, "/run/vm/artifacts/profiles", "kipvs-10k"
	got, err = ConfigFromEnv(func(k string) string { return p.Env()[k] })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got); diff != "" {
		t.Errorf("ConfigFromEnv(Env()) with profiles differs (-want +got):\n%s", diff)
	}
	if !got.Profiled("kube-proxy") || !got.Profiled("kipvs") || c.Profiled("kipvs") {
		t.Errorf("Profiled: %v for %v, kipvs %v for none", []bool{got.Profiled("kube-proxy"), got.Profiled("kipvs")}, got.Profiles, c.Profiled("kipvs"))
	}
	for name, bad := range map[string]Config{
		"no profile root":   func() Config { b := p; b.ProfileRoot = ""; return b }(),
		"no name":           func() Config { b := p; b.Name = ""; return b }(),
		"a name with a '/'": func() Config { b := p; b.Name = "a/b"; return b }(),
		"an unknown proxy":  func() Config { b := p; b.Profiles = []string{"iptables"}; return b }(),
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate accepted profiles with %s", name)
		}
	}
	env := c.Env()
	env["BENCH_PROXIES"] = "kipvs,iptables"
	delete(env, "BENCH_IDLE")
	_, err = ConfigFromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "BENCH_IDLE is not set") {
		t.Errorf("ConfigFromEnv without BENCH_IDLE: %v", err)
	}
	env["BENCH_IDLE"] = "60s"
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), `unknown proxy "iptables"`) {
		t.Errorf("ConfigFromEnv with an unknown proxy: %v", err)
	}
	for _, bad := range []Config{DefaultConfig(0), DefaultConfig(MaxServices + 1), func() Config { c := DefaultConfig(10); c.Changes = 11; return c }()} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate accepted N=%d changes=%d", bad.N, bad.Changes)
		}
	}
}

func TestParseNs(t *testing.T) {
	got, err := ParseNs(" 2000, 500 1000 500 10_000")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{500, 1000, 2000, 10000}; !reflect.DeepEqual(got, want) {
		t.Errorf("ParseNs = %v, want %v", got, want)
	}
	for _, bad := range []string{"", " , ", "10k"} {
		if _, err := ParseNs(bad); err == nil {
			t.Errorf("ParseNs(%q) accepted", bad)
		}
	}
}

func TestObjects(t *testing.T) {
	for _, c := range []struct {
		got, want netip.Addr
	}{
		{ClusterIP(0), netip.MustParseAddr("10.96.16.0")},
		{ClusterIP(300), netip.MustParseAddr("10.96.17.44")},
		{ClusterIP(MaxServices - 1), netip.MustParseAddr("10.96.250.95")},
		{EndpointIP(0, 0, 10), netip.MustParseAddr("10.128.0.1")},
		{EndpointIP(1, 3, 10), netip.MustParseAddr("10.128.0.14")},
		{EndpointIP(0, MaxEndpoints-1, 1), netip.MustParseAddr("10.255.255.254")},
		{ReplacementIP(0), netip.MustParseAddr("10.64.0.1")},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
	s, sl := Service(3), Slice(3, []netip.Addr{EndpointIP(3, 0, 2), EndpointIP(3, 1, 2)})
	if s.Name != "bench-00003" || s.Spec.ClusterIP != "10.96.16.3" || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != ServicePort || s.Spec.Selector != nil {
		t.Errorf("Service(3) = %+v", s)
	}
	if sl.Name != "bench-00003-0" || sl.Labels["kubernetes.io/service-name"] != "bench-00003" || len(sl.Endpoints) != 2 ||
		sl.Endpoints[1].Addresses[0] != "10.128.0.8" || !*sl.Endpoints[1].Conditions.Ready || *sl.Ports[0].Port != TargetPort {
		t.Errorf("Slice(3) = %+v", sl)
	}
	if err := CheckSize(MaxServices, MaxEndpoints/MaxServices); err != nil {
		t.Errorf("CheckSize at the limits: %v", err)
	}
	if err := CheckSize(1000, MaxEndpoints/1000+1); err == nil {
		t.Error("CheckSize accepted more endpoints than the plan holds")
	}
}

func TestProfilePaths(t *testing.T) {
	if got, want := ProfileDir("/run/vm/artifacts/profiles", "kipvs-10k", "kipvs", 10000), "/run/vm/artifacts/profiles/kipvs-10k-kipvs-10000"; got != want {
		t.Errorf("ProfileDir = %q, want %q", got, want)
	}
	c := DefaultConfig(2000) // 50 changes 3 s apart
	if got, want := c.ChangeWindow(), 147*time.Second+ChangeProfileSlack; got != want {
		t.Errorf("ChangeWindow = %s, want %s", got, want)
	}
	c.Changes = 0
	if got := c.ChangeWindow(); got != 0 {
		t.Errorf("ChangeWindow without changes = %s, want 0", got)
	}
	for d, want := range map[time.Duration]int{0: 1, 60 * time.Second: 60, 60*time.Second + time.Millisecond: 61, 500 * time.Millisecond: 1} {
		if got := ProfileSeconds(d); got != want {
			t.Errorf("ProfileSeconds(%s) = %d, want %d", d, got, want)
		}
	}
	if got, want := CPUProfileURL("127.0.0.1:10249", 157*time.Second), "http://127.0.0.1:10249/debug/pprof/profile?seconds=157"; got != want {
		t.Errorf("CPUProfileURL = %q, want %q", got, want)
	}
	if got, want := HeapProfileURL("127.0.0.1:10249"), "http://127.0.0.1:10249/debug/pprof/heap"; got != want {
		t.Errorf("HeapProfileURL = %q, want %q", got, want)
	}
}

func TestFetchProfile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/heap" {
			http.Error(w, "profiling is not enabled", http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("a profile"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	p := filepath.Join(t.TempDir(), "run-kipvs-10", ProfileHeapEnd)
	if err := FetchProfile(t.Context(), HeapProfileURL(addr), p); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "a profile" {
		t.Errorf("FetchProfile wrote %q, %v; want %q", b, err, "a profile")
	}
	bad := filepath.Join(filepath.Dir(p), ProfileCPUIdle)
	err := FetchProfile(t.Context(), CPUProfileURL(addr, time.Second), bad)
	if err == nil || !strings.Contains(err.Error(), "404 Not Found: profiling is not enabled") {
		t.Errorf("FetchProfile of a missing profile: %v", err)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("FetchProfile of a missing profile wrote %s: %v", bad, err)
	}
}
