package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kipvs/kipvs/e2e/bench"
	"github.com/kipvs/kipvs/e2e/cluster"
	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/daemon"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/sysctl/sysctltest"
	"github.com/kipvs/kipvs/internal/watch"
)

const nodeName = "memprobe-node"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := child(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "memprobe child:", err)
			os.Exit(1)
		}
		return
	}
	if err := parent(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "memprobe:", err)
		os.Exit(1)
	}
}

// Result is what the child reports on its last stdout line.
type Result struct {
	N, E            int
	FirstSyncSecs   float64
	VmHWMBytes      int64
	VmRSSBytes      int64
	MaxHeapObjects  uint64 // largest /memory/classes/heap/objects:bytes sampled (every 5 ms)
	MaxHeapGoal     uint64 // largest /gc/heap/goal:bytes sampled
	MaxTotalMapped  uint64 // largest /memory/classes/total:bytes sampled
	LiveAfterFirst  uint64 // heap objects after the first sync and a forced GC
	LiveAtEnd       uint64 // heap objects at the end, after a forced GC
	TotalAllocBytes uint64
	GCCycles        uint64
	Phases          []PhasePeak
}

func parent(args []string) error {
	fs := flag.NewFlagSet("memprobe", flag.ContinueOnError)
	k8sBin := fs.String("k8s-bin", "", "directory holding etcd and kube-apiserver (make e2e-bins)")
	state := fs.String("state", "", "cluster state directory (default: a temporary one)")
	n := fs.Int("n", 2000, "Services")
	e := fs.Int("e", 10, "endpoints per Service")
	changes := fs.Int("changes", 50, "endpoint changes after the first sync")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between changes")
	syncPeriod := fs.Duration("sync-period", 30*time.Second, "the daemon's syncPeriod")
	idle := fs.Duration("idle", 60*time.Second, "idle time after the changes")
	out := fs.String("out", "", "directory for the profiles and the child's log (default: a temporary one)")
	gogc := fs.String("gogc", "", "GOGC for the child (default: unset)")
	scrapeEvery := fs.Duration("scrape", time.Second, "how often the child renders its metrics, as the benchmark's polls do (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		d, err := os.MkdirTemp("", "memprobe-out-")
		if err != nil {
			return err
		}
		*out = d
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if *state == "" {
		d, err := os.MkdirTemp("", "memprobe-state-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*state = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c, err := cluster.Start(ctx, cluster.Options{BinDir: *k8sBin, Dir: *state})
	if err != nil {
		return err
	}
	defer c.Stop()
	kc := filepath.Join(*state, "kubeconfig")
	if err := os.WriteFile(kc, c.Kubeconfig(c.HostServer()), 0o600); err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := bench.Load(ctx, cs, 0, *n, *e, 32); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "loaded %d Services x %d endpoints in %s\n", *n, *e, time.Since(t0).Round(time.Millisecond))

	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "child", "--kubeconfig", kc, "--out", *out,
		"--sync-period", syncPeriod.String(), "--idle", idle.String(), "--scrape", scrapeEvery.String(), "--n", strconv.Itoa(*n), "--e", strconv.Itoa(*e))
	cmd.Env = os.Environ()
	if *gogc != "" {
		cmd.Env = append(cmd.Env, "GOGC="+*gogc)
	}
	logf, err := os.Create(filepath.Join(*out, "child.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	if !lines.Scan() || lines.Text() != "synced" {
		_ = cmd.Wait()
		return fmt.Errorf("child did not report its first sync (log: %s)", logf.Name())
	}
	if err := change(ctx, cs, *n, *e, *changes, *interval); err != nil {
		return err
	}
	if _, err := io.WriteString(stdin, "changed\n"); err != nil {
		return err
	}
	var res string
	for lines.Scan() {
		res = lines.Text()
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("child: %w (log: %s)", err, logf.Name())
	}
	var r Result
	if err := json.Unmarshal([]byte(res), &r); err != nil {
		return fmt.Errorf("child result %q: %w", res, err)
	}
	mb := func(b uint64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
	fmt.Printf("N=%d E=%d first sync %.2fs\n", r.N, r.E, r.FirstSyncSecs)
	fmt.Printf("  VmHWM %s  VmRSS(end) %s\n", mb(uint64(r.VmHWMBytes)), mb(uint64(r.VmRSSBytes)))
	fmt.Printf("  max heap objects %s  max heap goal %s  max total mapped %s\n", mb(r.MaxHeapObjects), mb(r.MaxHeapGoal), mb(r.MaxTotalMapped))
	fmt.Printf("  live after first sync %s  live at end %s  total alloc %s  GC cycles %d\n", mb(r.LiveAfterFirst), mb(r.LiveAtEnd), mb(r.TotalAllocBytes), r.GCCycles)
	for _, p := range r.Phases {
		fmt.Printf("  peak heap objects during %s: %s at %.2fs\n", p.Phase, mb(p.HeapObjects), p.AtSecs)
	}
	fmt.Printf("  profiles in %s\n", *out)
	return nil
}

// change replaces one endpoint of a Service, count times, as the VM benchmark does.
func change(ctx context.Context, cs kubernetes.Interface, n, e, count int, interval time.Duration) error {
	for i := range count {
		svc := (i * 7919) % n
		addrs := make([]netip.Addr, e)
		for j := range addrs {
			addrs[j] = bench.EndpointIP(svc, j, e)
		}
		addrs[0] = bench.ReplacementIP(i)
		sl := bench.Slice(svc, addrs)
		cur, err := cs.DiscoveryV1().EndpointSlices(bench.Namespace).Get(ctx, sl.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sl.ResourceVersion = cur.ResourceVersion
		sl.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": time.Now().UTC().Format(time.RFC3339Nano)}
		if _, err := cs.DiscoveryV1().EndpointSlices(bench.Namespace).Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return nil
}

func child(args []string) error {
	fs := flag.NewFlagSet("memprobe child", flag.ContinueOnError)
	kc := fs.String("kubeconfig", "", "")
	out := fs.String("out", "", "")
	syncPeriod := fs.Duration("sync-period", 30*time.Second, "")
	idle := fs.Duration("idle", 60*time.Second, "")
	scrapeEvery := fs.Duration("scrape", time.Second, "")
	n := fs.Int("n", 0, "")
	e := fs.Int("e", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Profiles accurate to a few KB (the default samples one allocation per 512 KB).
	runtime.MemProfileRate = 8 << 10
	res := Result{N: *n, E: *e}
	sampler := newSampler()
	defer sampler.stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zapcore.InfoLevel)
	zc.OutputPaths, zc.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	log, err := zc.Build()
	if err != nil {
		return err
	}
	cfg := config.Defaults()
	cfg.ClientConnection.Kubeconfig = *kc
	cfg.HostnameOverride = nodeName
	cfg.IPVS.SyncPeriod = *syncPeriod
	cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}

	rc, err := clientcmd.BuildConfigFromFlags("", *kc)
	if err != nil {
		return err
	}
	src, err := apiSource(&cfg, rc, log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	deps := fakeDeps(src)
	deps.Registry = reg
	deps.Collect = runtime.GC // as the real daemon's (daemon.NewReal)
	d, err := daemon.New(cfg, nodeName, log, deps)
	if err != nil {
		return err
	}
	if err := d.Prepare(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := src.Start(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- d.Run(ctx) })
	if *scrapeEvery > 0 {
		wg.Go(func() { scrape(ctx, d.Gatherer(), *scrapeEvery) })
	}
	if err := waitFirstSync(ctx, d, runErr); err != nil {
		return err
	}
	res.FirstSyncSecs = time.Since(start).Seconds()
	res.LiveAfterFirst = liveHeap()
	if err := writeHeap(filepath.Join(*out, "heap-first.pb.gz")); err != nil {
		return err
	}
	sampler.setPhase("changes")
	fmt.Println("synced")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the changes: %w", err)
	}
	sampler.setPhase("idle")
	select {
	case err := <-runErr:
		return fmt.Errorf("daemon stopped: %w", err)
	case <-time.After(*idle):
	}
	res.LiveAtEnd = liveHeap()
	if err := writeHeap(filepath.Join(*out, "heap-end.pb.gz")); err != nil {
		return err
	}
	cancel()
	wg.Wait()
	<-src.Done()
	sampler.stop()
	res.MaxHeapObjects, res.MaxHeapGoal, res.MaxTotalMapped, res.Phases = sampler.max()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.TotalAllocBytes, res.GCCycles = ms.TotalAlloc, uint64(ms.NumGC)
	res.VmHWMBytes, res.VmRSSBytes, err = procMem()
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

func apiSource(cfg *config.Config, rc *rest.Config, log *zap.Logger) (*watch.APISource, error) {
	cc := cfg.ClientConnection
	rc.QPS = cc.QPS
	rc.Burst = int(cc.Burst)
	rc.ContentType = cc.ContentType
	rc.AcceptContentTypes = cc.AcceptContentTypes
	rc.UserAgent = "kipvs"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return watch.NewAPISource(watch.APISourceOptions{Client: client, NodeName: nodeName, ResyncPeriod: cfg.ConfigSyncPeriod,
		ServiceAnnotations: proxy.ServiceAnnotations(), Logger: log.Named("source")})
}

func fakeDeps(src *watch.APISource) daemon.Deps {
	v := ipvstest.NewFake()
	sets := ipsettest.NewFake()
	nf := map[inet.Family]*netfiltertest.Fake{inet.IPv4: netfiltertest.NewFake(inet.IPv4), inet.IPv6: netfiltertest.NewFake(inet.IPv6)}
	dummy := dummyiftest.NewFake(ipvsmode.DummyName)
	return daemon.Deps{
		Source: src, IPVS: v,
		Kernel: func(f inet.Family) (reconcile.Kernel, error) {
			return reconcile.Kernel{IPVS: v, Filter: iptables.New(f, sets, nf[f]), Dummy: dummy, Conntrack: conntracktest.NewFake()}, nil
		},
		// Both families run, as on a node with IPv6 (the benchmark VM).
		IPv6: func() error { return nil },
		Sysctl: sysctltest.NewFake(map[string]string{
			"net/ipv4/vs/conntrack": "0", "net/ipv4/vs/expire_nodest_conn": "0", "net/ipv4/vs/expire_quiescent_template": "0",
			"net/ipv4/ip_forward": "0", "net/netfilter/nf_conntrack_max": "65536",
			"net/netfilter/nf_conntrack_tcp_timeout_established": "432000", "net/netfilter/nf_conntrack_tcp_timeout_close_wait": "60",
		}),
		HostAddrs:     func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("192.168.1.10")}, nil },
		KernelRelease: "6.1.0-56-amd64",
		NumCPU:        2,
	}
}

// waitFirstSync polls the health tracker until a family reports a sync (the daemon runs in
// this process; its first sync has no other signal outside the package).
func waitFirstSync(ctx context.Context, d *daemon.Daemon, runErr <-chan error) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for d.Health().Report().LastUpdated.IsZero() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-runErr:
			return fmt.Errorf("daemon stopped before its first sync: %w", err)
		case <-tick.C:
		}
	}
	return nil
}

// scrape renders what /metrics serves (the daemon's Gatherer), every period until ctx ends: the VM
// benchmark polls the proxy's metrics about once a second while it waits for a sync, and
// each scrape reads the IPVS counters (svcstats).
func scrape(ctx context.Context, reg prometheus.Gatherer, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		mfs, err := reg.Gather()
		if err == nil {
			enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, mf := range mfs {
				_ = enc.Encode(mf)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func procMem() (hwm, rss int64, err error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			hwm = v * 1024
		case "VmRSS:":
			rss = v * 1024
		}
	}
	if hwm == 0 {
		return 0, 0, errors.New("no VmHWM in /proc/self/status")
	}
	return hwm, rss, nil
}

// sampler records the largest heap figures, read every 5 ms, overall and per phase.
type sampler struct {
	mu                   sync.Mutex
	start                time.Time
	phase                string
	objects, goal, total uint64
	phases               map[string]*PhasePeak
	order                []string
	done                 chan struct{}
	once                 sync.Once
	wg                   sync.WaitGroup
}

// PhasePeak is the largest heap of one phase and when it was seen.
type PhasePeak struct {
	Phase       string
	HeapObjects uint64
	AtSecs      float64
}

func newSampler() *sampler {
	s := &sampler{done: make(chan struct{}), start: time.Now(), phases: map[string]*PhasePeak{}}
	s.setPhase("first sync")
	s.wg.Go(func() {
		samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/memory/classes/total:bytes"}}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(samples)
			s.mu.Lock()
			obj := samples[0].Value.Uint64()
			s.objects = max(s.objects, obj)
			s.goal = max(s.goal, samples[1].Value.Uint64())
			s.total = max(s.total, samples[2].Value.Uint64())
			if p := s.phases[s.phase]; obj > p.HeapObjects {
				p.HeapObjects, p.AtSecs = obj, time.Since(s.start).Seconds()
			}
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	})
	return s
}

func (s *sampler) setPhase(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase = name
	s.phases[name] = &PhasePeak{Phase: name}
	s.order = append(s.order, name)
}

func (s *sampler) stop() {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
}

func (s *sampler) max() (objects, goal, total uint64, phases []PhasePeak) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.order {
		phases = append(phases, *s.phases[n])
	}
	return s.objects, s.goal, s.total, phases
}
