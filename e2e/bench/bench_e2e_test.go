//go:build e2e

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// benchService is one loaded Service as the VM sees it: its virtual server and its slice
// (kept current: the changes write it back).
type benchService struct {
	key   ipvs.ServiceKey
	slice *discoveryv1.EndpointSlice
}

// want is the real servers the slice asks for.
func (s *benchService) want() map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	for _, ep := range s.slice.Endpoints {
		for _, a := range ep.Addresses {
			out[netip.AddrPortFrom(netip.MustParseAddr(a), TargetPort)] = true
		}
	}
	return out
}

// TestBenchCompare runs in the VM (make bench-compare): each proxy of BENCH_PROXIES in turn
// on the loaded objects, on a clean node, and prints one ResultPrefix line per proxy.
func TestBenchCompare(t *testing.T) {
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	// The data path needs the echo backend and the load generator; without them (a bench
	// binary run by hand) the control-plane figures are measured alone.
	dataPath := os.Getenv("KIPVS_ECHO_BIN") != "" && os.Getenv(LoadgenEnv) != ""
	var env harness.Env
	if dataPath {
		env = harness.LoadEnv(t)
	} else {
		env = harness.LoadProxyEnv(t)
		t.Logf("KIPVS_ECHO_BIN or %s not set: no data path figures", LoadgenEnv)
	}
	if slices.ContainsFunc(cfg.Proxies, IsKubeProxy) {
		env.RequireKubeProxy(t) // stage it now, outside any timing
	}
	api := harness.NewCluster(t, env)
	api.EnsureNode(t)
	hz, err := ClockTicks()
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	vm := VM{Kernel: strings.TrimSpace(string(kernel)), CPUs: runtime.NumCPU(), MemoryMB: cfg.VMMemoryMB, Accel: cfg.Accel}
	began := time.Now()
	svcs := listLoaded(t, api.CS, cfg)
	t.Logf("listed %d Services with %d endpoints each in %.1fs", len(svcs), cfg.E, time.Since(began).Seconds())
	used := map[netip.Addr]bool{}
	for _, s := range svcs {
		for a := range s.want() {
			used[a.Addr()] = true
		}
	}
	cleanNode(t, env, false)
	var dp *dataPathSetup
	if dataPath {
		dp = newDataPathSetup(t, env, api, cfg)
	}
	sysctls := harness.Sysctls(t)
	timeouts := harness.MustRun(t, "ipvsadm", "-L", "--timeout")
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.N)))
	next := 0 // replacement addresses handed out
	newAddr := func() netip.Addr {
		for {
			a := ReplacementIP(next)
			next++
			if !used[a] {
				used[a] = true
				return a
			}
		}
	}
	for _, p := range cfg.Proxies {
		t.Run(p, func(t *testing.T) {
			rec := Record{Proxy: p, N: cfg.N, E: cfg.E, VM: vm}
			defer func() {
				if t.Failed() && rec.Error == "" {
					rec.Error = "the run failed: see the VM log"
				}
				line, err := ResultLine(rec)
				if err != nil {
					t.Error(err)
					return
				}
				fmt.Println(line)
			}()
			t.Cleanup(func() {
				start := time.Now()
				cleanNode(t, env, IsKubeProxy(p))
				harness.RestoreSysctls(t, sysctls)
				if f := strings.Fields(timeouts); len(f) >= 3 { // "Timeout (tcp tcpfin udp): 900 120 300"
					harness.MustRun(t, "ipvsadm", "--set", f[len(f)-3], f[len(f)-2], f[len(f)-1])
				}
				t.Logf("node cleaned after %s in %.1fs", p, time.Since(start).Seconds())
			})
			r := &runner{t: t, cfg: cfg, env: env, cs: api.CS, api: api, svcs: svcs, hz: hz, rng: rng, newAddr: newAddr, rec: &rec, dp: dp}
			r.run(p)
		})
	}
}

// listLoaded lists the benchmark's Services and EndpointSlices (as loaded, or as an earlier
// run left them) and checks there are cfg.N of each.
func listLoaded(t *testing.T, cs kubernetes.Interface, cfg Config) []*benchService {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: Label + "=" + LabelValue}
	svcList, err := cs.CoreV1().Services(Namespace).List(ctx, sel)
	if err != nil {
		t.Fatalf("list Services: %v", err)
	}
	sliceList, err := cs.DiscoveryV1().EndpointSlices(Namespace).List(ctx, sel)
	if err != nil {
		t.Fatalf("list EndpointSlices: %v", err)
	}
	bySvc := map[string]*discoveryv1.EndpointSlice{}
	for i := range sliceList.Items {
		s := &sliceList.Items[i]
		bySvc[s.Labels[discoveryv1.LabelServiceName]] = s
	}
	var out []*benchService
	for _, s := range svcList.Items {
		sl := bySvc[s.Name]
		if sl == nil {
			t.Fatalf("Service %s has no EndpointSlice", s.Name)
		}
		if len(sl.Endpoints) != cfg.E {
			t.Fatalf("EndpointSlice %s has %d endpoints, want %d (BENCH_E changed between loads?)", sl.Name, len(sl.Endpoints), cfg.E)
		}
		out = append(out, &benchService{key: ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP,
			Addr: netip.MustParseAddr(s.Spec.ClusterIP), Port: ServicePort}, slice: sl})
	}
	if len(out) != cfg.N {
		t.Fatalf("%d benchmark Services loaded, want %d", len(out), cfg.N)
	}
	slices.SortFunc(out, func(a, b *benchService) int { return strings.Compare(a.slice.Name, b.slice.Name) })
	return out
}

// cleanNode removes what a proxy left (kube-proxy --cleanup after kube-proxy in any mode:
// it removes what each of its modes programs; then kipvs cleanup) and fails the test when
// something of a proxy's is still there (leftovers).
func cleanNode(t *testing.T, env harness.Env, kubeProxy bool) {
	t.Helper()
	if kubeProxy {
		if out, err := harness.Run(env.RequireKubeProxy(t), "--cleanup", "--proxy-mode=ipvs"); err != nil {
			t.Logf("kube-proxy --cleanup: %v\n%s", err, out)
		}
		removeKubeletFirewall(t)
	}
	if out, err := harness.RunCleanup(env); err != nil {
		t.Fatalf("kipvs cleanup: %v\n%s", err, out)
	}
	if _, err := harness.Run("conntrack", "-F"); err != nil {
		t.Logf("conntrack -F: %v", err)
	}
	if left := leftovers(t); len(left) > 0 {
		t.Fatalf("kernel state left after the clean-up:\n%s", strings.Join(left, "\n"))
	}
}

// removeKubeletFirewall removes the filter table's KUBE-FIREWALL chain and its jumps from
// INPUT and OUTPUT (IPv4 and IPv6, nft and legacy iptables where present): the kubelet's
// chain, which kube-proxy's iptables mode creates as a duplicate at its start and, by
// design, never deletes (its CleanupLeftovers skips the kubelet's chains), so --cleanup
// leaves it. Nothing else is removed here: the leftovers check still sees the rest.
func removeKubeletFirewall(t *testing.T) {
	t.Helper()
	const chain = "KUBE-FIREWALL"
	for _, bin := range []string{"iptables-nft", "ip6tables-nft", "iptables-legacy", "ip6tables-legacy"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		if _, err := harness.Run(bin, "-t", "filter", "-S", chain); err != nil {
			continue // not there
		}
		for _, from := range []string{"INPUT", "OUTPUT"} {
			for {
				if _, err := harness.Run(bin, "-t", "filter", "-D", from, "-j", chain); err != nil {
					break // no (more) jump
				}
			}
		}
		for _, args := range [][]string{{"-F", chain}, {"-X", chain}} {
			if out, err := harness.Run(bin, append([]string{"-t", "filter"}, args...)...); err != nil {
				t.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
			}
		}
		t.Logf("removed the kubelet's %s chain kube-proxy left in %s's filter table (--cleanup keeps it by design)", chain, bin)
	}
}

// runner measures one proxy.
type runner struct {
	t       *testing.T
	cfg     Config
	env     harness.Env
	cs      kubernetes.Interface
	api     *harness.Cluster
	svcs    []*benchService
	hz      uint64
	rng     *rand.Rand
	newAddr func() netip.Addr
	rec     *Record
	proc    *harness.Kipvs
	exited  <-chan struct{} // closed when proc has exited
	ipvs    *ipvs.Client
	probe   probe          // reads what the proxy programmed (newProbe)
	dp      *dataPathSetup // nil: no data path figures
	profDir string         // where this proxy's profiles go; "" when it is not profiled
}

func (r *runner) run(proxy string) {
	t := r.t
	if r.cfg.Profiled(proxy) {
		r.profDir = ProfileDir(r.cfg.ProfileRoot, r.cfg.Name, proxy, r.cfg.N)
	}
	file := r.writeConfig(proxy)
	bin := r.env.KipvsBin
	if IsKubeProxy(proxy) {
		bin = r.env.RequireKubeProxy(t)
	}
	r.rec.Version = strings.TrimSpace(harness.MustRun(t, bin, "--version"))
	cl, err := ipvs.New(netns.None())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r.ipvs = cl
	r.probe, err = newProbe(proxy, cl)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.probe.close(); err != nil {
			t.Error(err)
		}
	}()

	threads, err := NewThreads("/proc")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if IsKubeProxy(proxy) {
		r.proc = harness.StartKubeProxy(t, r.env, "--config", file)
	} else {
		r.proc = harness.StartKipvs(t, r.env, append([]string{"run", "--config", file}, KipvsArgs(proxy)...)...)
	}
	r.exited = r.watchExit()
	hi, lo, cpu := r.waitFirstSync(start, threads)
	r.rec.FirstSyncThreads = threads.Top(firstSyncThreads)
	r.rec.FirstSyncCPUs = threads.CPUs(r.hz)
	r.rec.FirstSyncSeconds = hi.Sub(start).Seconds()
	r.rec.FirstSyncResolutionSeconds = hi.Sub(lo).Seconds()
	r.rec.FirstSyncCPUSeconds = TicksToSeconds(cpu.Total(), r.hz)
	r.rec.FirstSyncCPUSecondsSelf = TicksToSeconds(cpu.User+cpu.System, r.hz)
	if _, err := poll.Wait(r.cfg.FirstSyncLimit, proxy+"'s first sync reported", func() (bool, string) {
		r.alive()
		return r.noteReported(start), "no sync reported yet"
	}); err != nil {
		t.Log(err)
	}
	r.rec.PeakRSSFirstSyncBytes = r.peakRSS()
	r.heapProfile(ProfileHeapFirstSync)
	if !IsKubeProxy(proxy) {
		r.rec.FirstSyncLog = FirstSyncLogLines(r.proc.Log())
		t.Logf("%s's first sync:\n%s", proxy, strings.Join(r.rec.FirstSyncLog, "\n"))
	}
	var top []string
	for _, c := range r.rec.FirstSyncThreads {
		top = append(top, c.String())
	}
	for _, c := range r.rec.FirstSyncCPUs {
		top = append(top, c.String())
	}
	t.Logf("the VM's busiest threads and its CPUs from %s's start to its first complete sync:\n%s", proxy, strings.Join(top, "\n"))
	t.Logf("%s: first complete sync %.2fs after start (at most; at least %.2fs less), %.2f CPU seconds; first sync reported %.2fs after start", proxy,
		r.rec.FirstSyncSeconds, r.rec.FirstSyncResolutionSeconds, r.rec.FirstSyncCPUSeconds, r.rec.FirstSyncReportedSeconds)
	r.checkTable()
	r.waitSynced("after the first sync")

	before := r.histogram()
	waitProfile := func() {}
	if r.cfg.Changes > 0 {
		waitProfile = r.cpuProfile(ProfileCPUChanges, r.cfg.ChangeWindow())
	}
	r.rec.ChangeLatency = r.changes()
	r.waitSynced("after the changes")
	r.rec.NetworkProgramming = r.waitProgrammed(before).Summary()
	l := r.rec.ChangeLatency
	t.Logf("%s: %d changes: p50 %.3fs p99 %.3fs max %.3fs (%d timed out); own network programming histogram: %v changes, p50 %.3fs p99 %.3fs",
		proxy, l.Count, l.P50, l.P99, l.Max, l.TimedOut, r.rec.NetworkProgramming.Count, r.rec.NetworkProgramming.P50, r.rec.NetworkProgramming.P99)

	waitProfile() // the idle window's profile would be refused while this one runs
	r.rec.PeakRSSChangesBytes = r.peakRSS()

	if r.cfg.Idle > 0 {
		waitProfile := r.cpuProfile(ProfileCPUIdle, r.cfg.Idle)
		c0 := r.cpu()
		w0 := time.Now()
		select {
		case <-time.After(r.cfg.Idle): // the measurement window itself
		case <-r.exited:
			t.Fatalf("%s exited during the idle window:\n%s", proxy, r.proc.Log())
		}
		c1 := r.cpu()
		window := time.Since(w0)
		r.rec.IdleCPUCores = Cores(TicksToSeconds(c1.Total()-c0.Total(), r.hz), window)
		r.rec.IdleCPUCoresSelf = Cores(TicksToSeconds(c1.User+c1.System-c0.User-c0.System, r.hz), window)
		r.rec.IdleSeconds = window.Seconds()
		t.Logf("%s: idle CPU %.3f cores over %.0fs (%.3f without its children)", proxy, r.rec.IdleCPUCores, window.Seconds(), r.rec.IdleCPUCoresSelf)
		waitProfile()
		if r.cfg.ScrapeEvery > 0 {
			r.scrapedIdle(proxy)
		}
	}
	r.heapProfile(ProfileHeapEnd)
	r.rec.PeakRSSBytes = r.peakRSS()
	m := r.proc.Metrics(t)
	fam := `ip_family="IPv4"`
	r.rec.SyncCount = m.Get("kubeproxy_sync_proxy_rules_duration_seconds_count", fam)
	if r.rec.SyncCount > 0 {
		r.rec.SyncAvgSeconds = m.Get("kubeproxy_sync_proxy_rules_duration_seconds_sum", fam) / r.rec.SyncCount
	}
	const full = "kubeproxy_sync_full_proxy_rules_duration_seconds"
	if r.rec.FullSyncCount = m.Get(full+"_count", fam); r.rec.FullSyncCount > 0 {
		r.rec.FullSyncAvgSeconds = m.Get(full+"_sum") / r.rec.FullSyncCount // every family's
	}
	t.Logf("%s: peak RSS %.1f MB (%.1f MB after the first sync, %.1f MB after the changes); %v IPv4 syncs, %.3fs each on average; %v full syncs, %.3fs each on average (both families)",
		proxy, float64(r.rec.PeakRSSBytes)/1e6, float64(r.rec.PeakRSSFirstSyncBytes)/1e6, float64(r.rec.PeakRSSChangesBytes)/1e6, r.rec.SyncCount, r.rec.SyncAvgSeconds, r.rec.FullSyncCount, r.rec.FullSyncAvgSeconds)
	if r.dp != nil {
		r.measureDataPath(proxy)
	}
	r.proc.Stop(t)
}

// scrapedIdle measures a second idle window, as long as the first, with /metrics scraped
// every ScrapeEvery from its start.
func (r *runner) scrapedIdle(proxy string) {
	t := r.t
	const scrapeErrors = "kipvs_service_stats_scrape_errors_total"
	errs0 := r.proc.Metrics(t).Get(scrapeErrors)
	c0 := r.cpu()
	w0 := time.Now()
	tick := time.NewTicker(r.cfg.ScrapeEvery)
	defer tick.Stop()
	end := time.After(r.cfg.Idle)
	var took time.Duration
	var bytes int64
window:
	for {
		s := time.Now()
		n, err := harness.ScrapeRaw()
		if err != nil {
			t.Fatalf("%s: %v", proxy, err)
		}
		took += time.Since(s)
		bytes += n
		r.rec.Scrapes++
		select {
		case <-tick.C:
		case <-end:
			break window
		case <-r.exited:
			t.Fatalf("%s exited during the scraped idle window:\n%s", proxy, r.proc.Log())
		}
	}
	c1 := r.cpu()
	window := time.Since(w0)
	r.rec.ScrapedIdleCPUCores = Cores(TicksToSeconds(c1.Total()-c0.Total(), r.hz), window)
	r.rec.ScrapedIdleSeconds = window.Seconds()
	r.rec.ScrapeAvgSeconds = took.Seconds() / float64(r.rec.Scrapes)
	r.rec.ScrapeBytes = bytes / int64(r.rec.Scrapes)
	// kipvs's scrapes that timed out reading IPVS carry no traffic series, and cost less.
	r.rec.ScrapesIncomplete = int(r.proc.Metrics(t).Get(scrapeErrors) - errs0)
	t.Logf("%s: idle CPU scraped every %s: %.3f cores over %.0fs (%.2fx unscraped); %d scrapes (%d without traffic series), %.3fs and %.1f MB each", proxy, r.cfg.ScrapeEvery,
		r.rec.ScrapedIdleCPUCores, window.Seconds(), r.rec.ScrapedIdleCPUCores/r.rec.IdleCPUCores, r.rec.Scrapes, r.rec.ScrapesIncomplete, r.rec.ScrapeAvgSeconds, float64(r.rec.ScrapeBytes)/1e6)
}

// watchExit returns a channel closed once the proxy has exited (checked every 100 ms,
// until then).
func (r *runner) watchExit() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if r.proc.Exited() {
				close(ch)
				return
			}
		}
	}()
	return ch
}

// peakRSS is the proxy's VmHWM now.
func (r *runner) peakRSS() int64 {
	rss, err := ReadPeakRSS(r.proc.PID())
	if err != nil {
		r.t.Fatal(err)
	}
	return rss
}

func (r *runner) cpu() CPUTimes {
	c, err := ReadCPU(r.proc.PID())
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

func (r *runner) alive() {
	if r.proc.Exited() {
		r.t.Fatalf("%s exited; log:\n%s", r.proc.Name, r.proc.Log())
	}
}

// writeConfig writes the KubeProxyConfiguration every proxy gets: its mode (ProxyMode:
// IPVS but for kube-proxy-nftables and kube-proxy-iptables), the defaults for everything
// that is not about reaching the apiserver and the node (syncPeriod 30s).
func (r *runner) writeConfig(proxy string) string {
	cfg := map[string]any{
		"apiVersion":          "kubeproxy.config.k8s.io/v1alpha1",
		"kind":                "KubeProxyConfiguration",
		"mode":                ProxyMode(proxy),
		"clientConnection":    map[string]any{"kubeconfig": r.env.Kubeconfig},
		"hostnameOverride":    harness.NodeName,
		"clusterCIDR":         harness.ClusterCIDR.String(),
		"metricsBindAddress":  harness.MetricsAddr,
		"healthzBindAddress":  harness.HealthAddr,
		"bindAddressHardFail": true,
	}
	if r.profDir != "" {
		cfg["enableProfiling"] = true // /debug/pprof on the metrics server
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	p := filepath.Join(r.t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// heapProfile writes the proxy's heap profile as name into its profile directory, when it
// is profiled. A failure is logged: the figures stand without it.
func (r *runner) heapProfile(name string) {
	if r.profDir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r.saveProfile(ctx, HeapProfileURL(harness.MetricsAddr), name)
}

// cpuProfile starts a CPU profile of the proxy over d (written as name into its profile
// directory), when it is profiled, and returns a function that waits for it to be written.
// A failure is logged: the figures stand without it. The proxy serves one CPU profile at
// a time.
func (r *runner) cpuProfile(name string, d time.Duration) (wait func()) {
	if r.profDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	go func() {
		defer close(done)
		r.saveProfile(ctx, CPUProfileURL(harness.MetricsAddr, d), name)
	}()
	// A test that ends early (a fatal failure) ends the profile before it logs.
	r.t.Cleanup(func() { cancel(); <-done })
	return func() { <-done }
}

func (r *runner) saveProfile(ctx context.Context, url, name string) {
	start := time.Now()
	if err := FetchProfile(ctx, url, filepath.Join(r.profDir, name)); err != nil {
		r.t.Logf("%s: no profile %s: %v", r.proc.Name, name, err)
		return
	}
	r.t.Logf("%s: profile %s written (%.1fs)", r.proc.Name, name, time.Since(start).Seconds())
	r.rec.Profiles = append(r.rec.Profiles, filepath.Join(filepath.Base(r.profDir), name))
}

// activeSet is the real servers of dests with a weight above 0.
func activeSet(dests []ipvs.Destination) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	for _, d := range dests {
		if d.Weight > 0 {
			out[netip.AddrPortFrom(d.Addr, d.Port)] = true
		}
	}
	return out
}

func sameSet(a, b map[netip.AddrPort]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// waitFirstSync polls IPVS until every Service's virtual server has exactly its real servers
// and returns when the last one was seen complete (an upper bound of the moment the table
// became complete), the last time one was seen missing or incomplete (a lower bound), and
// the proxy's CPU times at the upper bound. A poll reads the real servers of the virtual
// servers not yet seen complete (the table only grows during a first sync), one request
// each, in a fixed order, and ends once missLimit of them were missing or incomplete: the
// rest of a poll's requests are for virtual servers that came in since an earlier poll, and
// each is read complete once. No poll dumps the table: the kernel walks the table from its
// start for each part of a service dump (quadratic in the number of virtual servers), under
// the IPVS mutex the proxy's own requests wait for, and at 50,000 Services those dumps took
// much of the VM's CPUs while the proxy filled the table. The next poll starts after
// PollInterval or after as long as this one took, whichever is longer: the polls take at
// most half of one CPU. The proxy's metrics are scraped once per reportScrapeInterval, and
// the VM's threads sampled once per threadSampleInterval (sampleThreads) and at the end. checkTable then reads the
// whole table once.
func (r *runner) waitFirstSync(start time.Time, threads *Threads) (hi, lo time.Time, cpu CPUTimes) {
	t := r.t
	wants := make([]map[netip.AddrPort]bool, len(r.svcs))
	pending := make([]int, len(r.svcs)) // the virtual servers not seen complete, in order
	for i, s := range r.svcs {
		wants[i] = s.want()
		pending[i] = i
	}
	lo = start
	var scraped time.Time
	stopSampling := sampleThreads(threads)
	defer func() {
		if err := stopSampling(); err != nil {
			t.Error(err)
		}
	}()
	for {
		r.alive()
		t0 := time.Now()
		misses := 0
		vips := make([]VIP, len(pending))
		for j, i := range pending {
			vips[j] = vipOf(r.svcs[i].key)
		}
		taken, err := r.probe.begin(vips)
		if err != nil {
			t.Logf("%s: reading what it programmed: %v", r.proc.Name, err)
		}
		pending = slices.DeleteFunc(pending, func(i int) bool {
			if misses >= missLimit {
				return false
			}
			before := time.Now()
			if !taken.IsZero() {
				before = taken // the state read is no older than the round's start
			}
			eps, ok := r.probe.read(vipOf(r.svcs[i].key))
			if ok && sameSet(eps, wants[i]) {
				hi = time.Now()
				return true
			}
			lo = later(lo, before) // missing or incomplete when read
			misses++
			return false
		})
		if time.Since(scraped) >= reportScrapeInterval {
			r.noteReported(start)
			scraped = time.Now()
		}
		if len(pending) == 0 {
			return hi, lo, r.cpu()
		}
		if time.Since(start) > r.cfg.FirstSyncLimit {
			t.Fatalf("%s: first sync not complete after %s: %d of %d virtual servers still missing or incomplete", r.proc.Name, r.cfg.FirstSyncLimit, len(pending), len(r.svcs))
		}
		select {
		case <-time.After(max(r.cfg.PollInterval, time.Since(t0))): // polling an external process
		case <-r.exited:
		}
	}
}

// missLimit is how many virtual servers missing or incomplete end a first-sync poll.
const missLimit = 64

// reportScrapeInterval is how often waitFirstSync scrapes the proxy's metrics for its
// reported first sync, as Prometheus would: a kipvs scrape reads the IPVS service table,
// and at 50,000 Services a scrape after every poll (until 16496a8) kept a CPU of the VM
// and the IPVS mutex busy against the proxy's own first sync. The timestamp scraped is
// when the sync ended, so reading it up to this late changes nothing unless another sync
// ended meanwhile (the next full sync is syncPeriod, 30 s, after the first).
const reportScrapeInterval = 15 * time.Second

// threadSampleInterval is how often waitFirstSync samples the VM's threads: a thread that
// ends inside the first sync (kipvs's binding thread does) loses at most this much.
const threadSampleInterval = 2 * time.Second

// sampleThreads samples threads every threadSampleInterval in a goroutine, until the
// function it returns is called: that takes a last sample and returns the first error.
func sampleThreads(threads *Threads) (stop func() error) {
	quit, done := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(threadSampleInterval)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				done <- threads.Sample()
				return
			case <-tick.C:
				if err := threads.Sample(); err != nil {
					<-quit
					done <- err
					return
				}
			}
		}
	}()
	return func() error {
		close(quit)
		return <-done
	}
}

// firstSyncThreads is how many threads Record.FirstSyncThreads keeps.
const firstSyncThreads = 12

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// noteReported records FirstSyncReportedSeconds once the proxy reports a completed IPv4
// sync, and says whether it has.
func (r *runner) noteReported(start time.Time) bool {
	if r.rec.FirstSyncReportedSeconds > 0 {
		return true
	}
	m, err := harness.FetchMetrics()
	if err != nil {
		return false // not serving yet
	}
	ts := m.Get("kubeproxy_sync_proxy_rules_last_timestamp_seconds", `ip_family="IPv4"`)
	if ts <= 0 {
		return false
	}
	r.rec.FirstSyncReportedSeconds = ts - float64(start.UnixNano())/1e9
	return true
}

// checkTable reads the whole IPVS table (harness.ReadIPVS) and checks every benchmark
// virtual server has exactly its real servers at weight 1; for kube-proxy's nftables and
// iptables modes, it reads the whole table and checks every Service has exactly its
// endpoints.
func (r *runner) checkTable() {
	t := r.t
	if rp, ok := r.probe.(*ruleProbe); ok {
		prog, err := rp.table()
		if err != nil {
			t.Fatal(err)
		}
		var bad []string
		for _, s := range r.svcs {
			if got := prog.Endpoints[vipOf(s.key)]; !sameSet(got, s.want()) {
				bad = append(bad, fmt.Sprintf("%s: %d endpoints programmed, want %d", vipOf(s.key), len(got), len(s.want())))
			}
		}
		if len(bad) > 0 {
			t.Fatalf("%d Services differ from what %s programmed after the first sync, e.g.:\n%s", len(bad), r.proc.Name, strings.Join(bad[:min(len(bad), 5)], "\n"))
		}
		return
	}
	tab, err := harness.ReadIPVS()
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, s := range r.svcs {
		want := map[string]int{}
		for a := range s.want() {
			want[a.String()] = 1
		}
		if ok, why := tab.Matches("tcp "+netip.AddrPortFrom(s.key.Addr, s.key.Port).String(), want); !ok {
			bad = append(bad, why)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d virtual servers differ from their Services after the first sync, e.g.:\n%s", len(bad), strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
}

// waitSynced waits (up to ChangeLimit) until the proxy's metrics say no change is pending;
// a proxy that does not get there is logged, not failed.
func (r *runner) waitSynced(when string) {
	if _, err := poll.Wait(r.cfg.ChangeLimit, r.proc.Name+" synced "+when, func() (bool, string) {
		r.alive()
		m, err := harness.FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		return m.Synced()
	}); err != nil {
		r.t.Log(err)
	}
}

// histogram scrapes the proxy's network programming histogram of the IPv4 family (the
// benchmark's Services are IPv4; a proxy may also observe a change in its IPv6 sync).
func (r *runner) histogram() Histogram {
	m, err := harness.FetchMetrics()
	if err != nil {
		r.t.Fatal(err)
	}
	return HistogramFrom(m, NetworkProgrammingMetric, "ip_family=IPv4")
}

// waitProgrammed waits (up to ChangeLimit) until the proxy's histogram holds an observation
// for every change since before (a proxy observes at the end of the sync that programmed
// a change, which may be after the change was seen in IPVS) and returns the observations.
func (r *runner) waitProgrammed(before Histogram) Histogram {
	var h Histogram
	if _, err := poll.Wait(r.cfg.ChangeLimit, r.proc.Name+"'s network programming observations", func() (bool, string) {
		r.alive()
		h = r.histogram().Sub(before)
		return h.Count() >= float64(r.rec.ChangeLatency.Count), fmt.Sprintf("%v of %d changes observed", h.Count(), r.rec.ChangeLatency.Count)
	}); err != nil {
		r.t.Log(err)
	}
	return h
}

// change is one endpoint replacement.
type change struct {
	svc   *benchService
	addr  netip.AddrPort // the new real server
	wrote time.Time      // when the API write returned
	err   error
}

// changes makes cfg.Changes endpoint changes cfg.Interval apart (a fixed schedule) and
// measures each from its write's return to its new real server in IPVS, reading that
// virtual server every ChangePoll.
func (r *runner) changes() Latency {
	t := r.t
	if r.cfg.Changes == 0 {
		return Latency{}
	}
	var mu sync.Mutex
	pending := map[*benchService]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan change)
	go func() {
		defer close(ch)
		tick := time.NewTicker(r.cfg.Interval)
		defer tick.Stop()
		for k := range r.cfg.Changes {
			if k > 0 {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
			}
			c := r.change(&mu, pending)
			select {
			case ch <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	var active []*change
	var samples []float64
	var polls pollCost
	timedOut := 0
	poll := time.NewTicker(r.cfg.ChangePoll)
	defer poll.Stop()
	for ch != nil || len(active) > 0 {
		select {
		case c, ok := <-ch:
			if !ok {
				ch = nil
				continue
			}
			if c.err != nil {
				t.Errorf("change %d: %v", len(samples)+len(active)+1, c.err)
				continue
			}
			active = append(active, &c)
			continue
		case <-poll.C:
		}
		r.alive()
		var still []*change
		vips := make([]VIP, len(active))
		for i, c := range active {
			vips[i] = vipOf(c.svc.key)
		}
		t0 := time.Now()
		if _, err := r.probe.begin(vips); err != nil {
			t.Logf("%s: reading what it programmed: %v", r.proc.Name, err)
		}
		for _, c := range active {
			eps, ok := r.probe.read(vipOf(c.svc.key))
			now := time.Now()
			seen := ok && eps[c.addr]
			if !seen && now.Sub(c.wrote) < r.cfg.ChangeLimit {
				still = append(still, c)
				continue
			}
			lat := now.Sub(c.wrote)
			if !seen {
				lat = r.cfg.ChangeLimit
				timedOut++
				t.Logf("change of %s (new endpoint %s) not programmed after %s", c.svc.slice.Name, c.addr, r.cfg.ChangeLimit)
			}
			samples = append(samples, lat.Seconds())
			mu.Lock()
			delete(pending, c.svc)
			mu.Unlock()
		}
		polls.add(time.Since(t0), len(vips))
		active = still
	}
	if timedOut > 0 {
		t.Errorf("%d of %d changes were not programmed within %s", timedOut, len(samples), r.cfg.ChangeLimit)
	}
	t.Logf("%s: the probe during the changes: %s", r.rec.Proxy, polls)
	return Summarize(samples, timedOut)
}

// change replaces one endpoint of a random Service without a pending change, with the
// last-change-trigger-time annotation set to the time of the write.
func (r *runner) change(mu *sync.Mutex, pending map[*benchService]bool) change {
	mu.Lock()
	var s *benchService
	for s == nil || pending[s] {
		s = r.svcs[r.rng.IntN(len(r.svcs))]
	}
	pending[s] = true
	mu.Unlock()
	sl := s.slice.DeepCopy()
	a := r.newAddr()
	sl.Endpoints[r.rng.IntN(len(sl.Endpoints))] = Endpoint(a)
	if sl.Annotations == nil {
		sl.Annotations = map[string]string{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sl.Annotations[v1.EndpointsLastChangeTriggerTime] = time.Now().Format(time.RFC3339Nano)
	out, err := r.cs.DiscoveryV1().EndpointSlices(Namespace).Update(ctx, sl, metav1.UpdateOptions{})
	wrote := time.Now()
	if err != nil {
		mu.Lock()
		delete(pending, s)
		mu.Unlock()
		return change{err: fmt.Errorf("update EndpointSlice %s: %w", sl.Name, err)}
	}
	s.slice = out
	return change{svc: s, addr: netip.AddrPortFrom(a, TargetPort), wrote: wrote}
}
