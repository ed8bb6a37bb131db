package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ResultPrefix starts the line TestBenchCompare prints for each proxy's Record.
const ResultPrefix = "BENCH-RESULT "

// Run is the result file: the parameters, the machine, and one Record per proxy per N.
type Run struct {
	Date    string   `json:"date"` // RFC 3339, UTC, when the run started
	Params  Params   `json:"params"`
	Host    Host     `json:"host"`
	Records []Record `json:"records"`
}

// Params are the knobs of a run (the make variables BENCH_*).
type Params struct {
	N               []int   `json:"n"`
	E               int     `json:"e"`
	Changes         int     `json:"changes"`
	IntervalSeconds float64 `json:"change_interval_seconds"`
	IdleSeconds     float64 `json:"idle_window_seconds"`
	// ScrapeEverySeconds is the scrape interval of the scraped idle window (0: none).
	ScrapeEverySeconds float64  `json:"scrape_every_seconds,omitempty"`
	Proxies            []string `json:"proxies"`
	Seed               uint64   `json:"seed"`
}

// Host describes the machine the VM ran on.
type Host struct {
	CPU   string `json:"cpu"`
	Cores int    `json:"cores"`
}

// VM describes the VM a Record was measured in.
type VM struct {
	Kernel   string `json:"kernel"`
	CPUs     int    `json:"cpus"`
	MemoryMB int    `json:"memory_mb"`
	Accel    string `json:"accel"` // "tcg": qemu's emulation, no KVM
}

// Record is one proxy's figures at one N.
type Record struct {
	Proxy   string `json:"proxy"`   // "kube-proxy" or "kipvs"
	Version string `json:"version"` // what --version printed
	N       int    `json:"n"`
	E       int    `json:"e"`
	VM      VM     `json:"vm"`

	// FirstSyncSeconds is from the process start until IPVS was seen to hold every virtual
	// server with its real servers (an upper bound); FirstSyncResolutionSeconds is how much
	// earlier it may have happened (since one was last seen missing or incomplete).
	FirstSyncSeconds           float64 `json:"first_sync_seconds"`
	FirstSyncResolutionSeconds float64 `json:"first_sync_resolution_seconds"`
	// FirstSyncReportedSeconds is from the process start until the end of the proxy's first
	// IPv4 sync as it reports it (kubeproxy_sync_proxy_rules_last_timestamp_seconds, first
	// seen non-zero, polled every second): kube-proxy programs IPVS first, then the ipsets
	// and iptables rules.
	FirstSyncReportedSeconds float64 `json:"first_sync_reported_seconds"`
	// FirstSyncCPUSeconds is the CPU time (user+system, children included) spent by then;
	// FirstSyncCPUSecondsSelf without the children.
	FirstSyncCPUSeconds     float64 `json:"first_sync_cpu_seconds"`
	FirstSyncCPUSecondsSelf float64 `json:"first_sync_cpu_seconds_self"`

	// ChangeLatency is from the API write's return to the new real server in IPVS.
	ChangeLatency Latency `json:"change_latency"`
	// NetworkProgramming is the proxy's own kubeproxy_network_programming_duration_seconds
	// (ip_family IPv4, the benchmark's Services' family) over the changes
	// (bucket-interpolated, as Prometheus' histogram_quantile).
	NetworkProgramming HistogramSummary `json:"network_programming"`

	// IdleCPUCores is CPU time over IdleSeconds with no change, divided by IdleSeconds (0
	// when the window was not measured).
	IdleCPUCores float64 `json:"idle_cpu_cores"`
	// IdleCPUCoresSelf is IdleCPUCores without the children's CPU time.
	IdleCPUCoresSelf float64 `json:"idle_cpu_cores_self"`
	IdleSeconds      float64 `json:"idle_seconds"`
	// ScrapedIdleCPUCores is the same figure over a second idle window of
	// ScrapedIdleSeconds in which /metrics was scraped Scrapes times (ScrapeAvgSeconds and
	// ScrapeBytes: one scrape's wall time, from the request to the last byte, and size, on
	// average); 0 when not measured.
	ScrapedIdleCPUCores float64 `json:"scraped_idle_cpu_cores,omitempty"`
	ScrapedIdleSeconds  float64 `json:"scraped_idle_seconds,omitempty"`
	Scrapes             int     `json:"scrapes,omitempty"`
	ScrapeAvgSeconds    float64 `json:"scrape_avg_seconds,omitempty"`
	ScrapeBytes         int64   `json:"scrape_bytes,omitempty"`
	// ScrapesIncomplete counts the scrapes that carried no traffic series because reading
	// IPVS timed out (kipvs_service_stats_scrape_errors_total over the window; kipvs only).
	ScrapesIncomplete int `json:"scrapes_incomplete,omitempty"`
	// PeakRSSBytes is VmHWM at the end of the run.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// PeakRSSFirstSyncBytes and PeakRSSChangesBytes are VmHWM once the first sync was
	// reported and after the changes: where the peak was reached.
	PeakRSSFirstSyncBytes int64 `json:"peak_rss_first_sync_bytes,omitempty"`
	PeakRSSChangesBytes   int64 `json:"peak_rss_changes_bytes,omitempty"`
	// FirstSyncLog is kipvs's log of its start and first sync (FirstSyncLogLines): when its
	// watch caches synced, and how long the sync took to build its desired state, to apply
	// it and to bind its VIPs.
	FirstSyncLog []string `json:"first_sync_log,omitempty"`
	// FirstSyncThreads are the threads of the VM (the proxy's, the bench's, the kernel's)
	// that ran longest from the proxy's start to its first complete sync, with how long
	// each waited for a CPU: where the VM's two CPUs went while the proxy filled the table.
	FirstSyncThreads []ThreadCPU `json:"first_sync_threads,omitempty"`
	// FirstSyncCPUs is where each CPU's time went over the same window.
	FirstSyncCPUs []CPUSplit `json:"first_sync_cpus,omitempty"`
	// SyncCount and SyncAvgSeconds are from kubeproxy_sync_proxy_rules_duration_seconds
	// (IPv4) at the end of the run.
	SyncCount      float64 `json:"sync_count"`
	SyncAvgSeconds float64 `json:"sync_avg_seconds"`
	// FullSyncCount and FullSyncAvgSeconds are from
	// kubeproxy_sync_full_proxy_rules_duration_seconds at the end of the run (the first sync
	// included): the IPv4 count, and the average of one full pass over both families (the
	// families' sums added, over the IPv4 count), as long as a change can wait behind one.
	// 0 for a proxy that does not export it (kube-proxy in IPVS mode).
	FullSyncCount      float64 `json:"full_sync_count,omitempty"`
	FullSyncAvgSeconds float64 `json:"full_sync_avg_seconds,omitempty"`

	// HostLoadMean and HostLoadMax are the host's 1-minute load average over the VM boot
	// (sampled every 10 s; qemu's two vCPU threads account for up to 2): above about 2.5 on
	// a 2-core host, something else competed for the CPU and the figures are slower.
	HostLoadMean float64 `json:"host_load1_mean"`
	HostLoadMax  float64 `json:"host_load1_max"`

	// Profiles are the Go profiles taken of the proxy (Config.Profiles), relative to the
	// profile directory (make bench-compare: .cache/bench/profiles), e.g.
	// "bench-compare-kipvs-2000/cpu-idle.pprof".
	Profiles []string `json:"profiles,omitempty"`

	// DataPath is traffic through the proxy's rules to real backends, and straight to one
	// (nil: not measured; records from before it was measured have none).
	DataPath *DataPath `json:"data_path,omitempty"`
	// Behaviour is how the proxy treats connections where the proxies differ by design
	// (nil: not measured).
	Behaviour *Behaviour `json:"behaviour,omitempty"`

	// Error is set when the run of this proxy failed; the figures up to the failure stay.
	Error string `json:"error,omitempty"`
}

// The data path's targets (LoadResult.Path).
const (
	PathFloor     = "floor"      // straight to one backend's pod IP: no Service in the way
	PathClusterIP = "cluster-ip" // the Service's cluster IP
	PathNodePort  = "node-port"  // the node's IP and the Service's node port
)

// DataPaths are the data path's targets in the order they are measured and shown.
func DataPaths() []string { return []string{PathFloor, PathClusterIP, PathNodePort} }

// DataPath is the load generator's measurements (cmd/loadgen, in a client network
// namespace of the VM) against a Service created after the proxy's first sync of the N
// benchmark Services, whose Endpoints backends are echo servers in their own network
// namespaces: every mode through each path.
type DataPath struct {
	Endpoints int          `json:"endpoints"`
	Results   []LoadResult `json:"results"`
	// PinnedCPU is the CPU the generator was pinned to (taskset), -1 when it was not.
	PinnedCPU int `json:"pinned_cpu"`
}

// Find returns the result of mode through path.
func (d *DataPath) Find(path, mode string) (LoadResult, bool) {
	if d == nil {
		return LoadResult{}, false
	}
	for _, r := range d.Results {
		if r.Path == path && r.Mode == mode {
			return r, true
		}
	}
	return LoadResult{}, false
}

// The outcomes of Behaviour.HeldAfterRemoval.
const (
	HeldAnswered = "answered"  // the backend still answered over the held connection
	HeldReset    = "reset"     // the connection was reset (or closed)
	HeldTimeout  = "timed out" // no answer and no reset: black-holed
)

// Behaviour is what a scripted check measured of connections through the proxy.
type Behaviour struct {
	// HeldAfterRemoval is what became of an established TCP connection through the cluster
	// IP once its endpoint was removed from the EndpointSlice (the backend still running)
	// and the proxy had programmed the removal: HeldAnswered, HeldReset, HeldTimeout, or
	// "error: ..." for another failure.
	HeldAfterRemoval string `json:"held_after_removal"`
	// AffinityBackends is how many distinct backends answered AffinityConnections new
	// connections from one client to a Service with sessionAffinity: ClientIP.
	AffinityBackends    int `json:"affinity_backends"`
	AffinityConnections int `json:"affinity_connections"`
}

// Latency summarises measured latencies, in seconds. A change not seen within the limit
// counts as the limit, and in TimedOut.
type Latency struct {
	Count    int       `json:"count"`
	TimedOut int       `json:"timed_out"`
	P50      float64   `json:"p50"`
	P99      float64   `json:"p99"`
	Max      float64   `json:"max"`
	Samples  []float64 `json:"samples"` // in the order of the changes
}

// Percentile returns the p-th percentile (0 < p <= 100) of xs by the nearest-rank method:
// the smallest value with at least p% of the values at or below it. NaN for no values.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 || p <= 0 || p > 100 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// Summarize builds a Latency from samples (seconds) of which timedOut were cut at the limit.
func Summarize(samples []float64, timedOut int) Latency {
	l := Latency{Count: len(samples), TimedOut: timedOut, Samples: samples}
	if len(samples) > 0 {
		l.P50 = Percentile(samples, 50)
		l.P99 = Percentile(samples, 99)
		l.Max = slices.Max(samples)
	}
	return l
}

// WriteRun writes r as indented JSON to path (through a temporary file and a rename).
func WriteRun(path string, r Run) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: write results: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("bench: write results: %w", err)
	}
	return nil
}

// ReadRun reads a file WriteRun wrote; unknown fields are an error.
func ReadRun(path string) (Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return Run{}, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var r Run
	if err := dec.Decode(&r); err != nil {
		return Run{}, fmt.Errorf("bench: read %s: %w", path, err)
	}
	return r, nil
}

// ResultLine renders rec as the line TestBenchCompare prints.
func ResultLine(rec Record) (string, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return "", fmt.Errorf("bench: encode record: %w", err)
	}
	return ResultPrefix + string(b), nil
}

// ParseResults returns the Records of the ResultPrefix lines in a VM's output (other lines
// are ignored; a console may put a carriage return at the end of a line).
func ParseResults(output string) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		i := strings.Index(line, ResultPrefix)
		if i < 0 {
			continue
		}
		var rec Record
		dec := json.NewDecoder(strings.NewReader(line[i+len(ResultPrefix):]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return out, fmt.Errorf("bench: result line %q: %w", line, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// firstSyncMarks are what the lines of FirstSyncLog say.
var firstSyncMarks = []string{"starting kipvs", "waiting for the Service source", "watch caches synced", "full sync applied changes"}

// FirstSyncLogLines picks from kipvs's log the lines of its start and those of its first
// full sync of each family (at most two lines of full syncs that say how long they took
// to build their desired state: the first and requested ones; the periodic ones do not).
func FirstSyncLogLines(log string) []string {
	var out []string
	full := 0
	for line := range strings.Lines(log) {
		i := slices.IndexFunc(firstSyncMarks, func(m string) bool { return strings.Contains(line, m) })
		switch {
		case i < 0:
			continue
		case i == len(firstSyncMarks)-1:
			if full == 2 || !strings.Contains(line, "build") {
				continue
			}
			full++
		}
		out = append(out, strings.TrimRight(line, "\n"))
	}
	return out
}
