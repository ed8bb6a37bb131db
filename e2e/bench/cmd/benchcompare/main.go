package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kipvs/kipvs/e2e/bench"
	"github.com/kipvs/kipvs/e2e/cluster"
	"github.com/kipvs/kipvs/e2e/vm"
)

// profilesDir is where the profiles go, under --out and under vm.GuestArtifacts.
const profilesDir = "profiles"

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

type options struct {
	binDir, state, vmCache, out, docs string
	name                              string // base name of the result file and the plot
	ns                                []int
	cfg                               bench.Config // N is set per boot
	timeout                           time.Duration
	workers                           int
	quiet                             bool
	keepState                         bool
	test                              string
	envs                              []string
}

func main() {
	def := bench.DefaultConfig(0)
	var (
		o       options
		ns      = flag.String("n", "500 1000 2000", "numbers of Services, space or comma separated; one VM boot each, smallest first")
		proxies = flag.String("proxies", strings.Join(def.Proxies, ","), "proxies to run, in order, each on a clean node: kube-proxy (IPVS mode), kube-proxy-nftables, kube-proxy-iptables, kipvs")
		profs   = flag.String("profiles", "", "proxies whose Go profiles (CPU over the changes and the idle window, heap after the first sync and at the end) go to OUT/profiles/NAME-PROXY-N (default none: a profiled proxy's CPU and peak RSS include the profiler's)")
		envs    multi
	)
	flag.StringVar(&o.binDir, "k8s-bin", ".cache/k8s", "directory with etcd and kube-apiserver")
	flag.StringVar(&o.state, "state", ".cache/bench/state", "state directory (etcd data, certs, logs, kubeconfigs); must be a path the VM sees (not /tmp)")
	flag.StringVar(&o.vmCache, "vm-cache", ".cache/vm", "kernel cache prepared by e2e/vm/prepare.sh")
	flag.StringVar(&o.out, "out", ".cache/bench", "where the result file and the plot go")
	flag.StringVar(&o.docs, "docs", "", "also copy the result file and the plot into this directory (e.g. docs/bench)")
	flag.StringVar(&o.name, "name", "bench-compare", "base name of the result file (NAME.json) and the plot (NAME.svg)")
	flag.IntVar(&def.E, "e", def.E, "endpoints per Service")
	flag.IntVar(&def.Changes, "changes", def.Changes, "endpoint changes per proxy")
	flag.DurationVar(&def.Interval, "interval", def.Interval, "time between two changes' writes")
	flag.DurationVar(&def.Idle, "idle", def.Idle, "idle window for the CPU figure (0: none)")
	flag.DurationVar(&def.ScrapeEvery, "scrape-every", def.ScrapeEvery, "when > 0, a second idle window as long as --idle with /metrics scraped this often (e.g. 15s)")
	flag.DurationVar(&def.FirstSyncLimit, "first-sync-limit", def.FirstSyncLimit, "limit for a proxy's first complete sync")
	flag.DurationVar(&def.ChangeLimit, "change-limit", def.ChangeLimit, "limit for one change to be programmed (and for the data path Service to answer)")
	flag.DurationVar(&def.PollInterval, "poll-interval", def.PollInterval, "time between two first-sync polls of what the proxy programmed (IPVS, or its nftables or iptables table)")
	flag.DurationVar(&def.ChangePoll, "change-poll", def.ChangePoll, "time between two reads of a changed Service's virtual server or chain")
	flag.IntVar(&def.LoadWorkers, "loadgen-workers", def.LoadWorkers, "data path: the load generator's concurrent workers (one request in flight each)")
	flag.DurationVar(&def.LoadDuration, "loadgen-duration", def.LoadDuration, "data path: how long each load measurement lasts (3 modes x 3 paths per proxy)")
	flag.Uint64Var(&def.Seed, "seed", def.Seed, "seed of the changes' choice of Service and endpoint")
	flag.IntVar(&def.VMMemoryMB, "vm-memory", def.VMMemoryMB, "VM memory in MiB")
	flag.DurationVar(&o.timeout, "timeout", 90*time.Minute, "limit for one VM boot")
	flag.IntVar(&o.workers, "load-workers", 32, "API requests in flight while loading the objects")
	flag.BoolVar(&o.quiet, "quiet", false, "do not stream the VM console")
	flag.BoolVar(&o.keepState, "keep-state", false, "start etcd on the state directory an earlier run left (its objects are not loaded again: 50,000 Services take about 45 minutes) instead of an empty one")
	flag.StringVar(&o.test, "test", "", "the bench test binary (go test -c -tags e2e ./e2e/bench)")
	flag.Var(&envs, "env", "NAME=VALUE passed into the VM (KIPVS_BIN, KIPVS_KUBE_PROXY_BIN, and for the data path KIPVS_ECHO_BIN and KIPVS_BENCH_LOADGEN; repeatable)")
	flag.Parse()
	o.envs = envs
	def.Proxies = bench.ParseProxies(*proxies)
	if def.Profiles = bench.ParseProxies(*profs); len(def.Profiles) > 0 {
		def.ProfileRoot, def.Name = path.Join(vm.GuestArtifacts, profilesDir), o.name
	}
	o.cfg = def
	var err error
	if o.ns, err = bench.ParseNs(*ns); err == nil {
		err = o.check()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchcompare: %v\n", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "benchcompare: %v\n", err)
		os.Exit(1)
	}
}

func (o options) check() error {
	if o.test == "" {
		return errors.New("no --test binary")
	}
	for _, n := range o.ns {
		c := o.cfg
		c.N = n
		if err := c.Validate(); err != nil {
			return err
		}
	}
	return nil
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	state, err := filepath.Abs(o.state)
	if err != nil {
		return err
	}
	loaded := 0
	if o.keepState {
		if loaded, err = keptLoad(state, o.cfg.E, o.ns[0]); err != nil {
			return err
		}
		fmt.Printf("benchcompare: keeping %s (%d Services x %d endpoints loaded)\n", state, loaded, o.cfg.E)
	} else {
		_ = os.RemoveAll(state)
	}
	if err := vm.Prepare(ctx, o.vmCache); err != nil {
		return err
	}
	// The VM binds the kernel modules from the cache before it enters the host root, where
	// a symbolic link on the way (a worktree's .cache/vm pointing to a main tree's) would
	// not resolve.
	if o.vmCache, err = filepath.EvalSymlinks(o.vmCache); err != nil {
		return err
	}
	res := bench.Run{
		Date: time.Now().UTC().Format(time.RFC3339),
		Params: bench.Params{N: o.ns, E: o.cfg.E, Changes: o.cfg.Changes, IntervalSeconds: o.cfg.Interval.Seconds(),
			IdleSeconds: o.cfg.Idle.Seconds(), ScrapeEverySeconds: o.cfg.ScrapeEvery.Seconds(), Proxies: o.cfg.Proxies, Seed: o.cfg.Seed},
		Host: bench.Host{CPU: hostCPU(), Cores: runtime.NumCPU()},
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")

	fmt.Println("benchcompare: starting etcd and kube-apiserver on 127.0.0.1")
	c, err := cluster.Start(ctx, cluster.Options{BinDir: o.binDir, Dir: filepath.Join(state, "cluster")})
	if err != nil {
		return err
	}
	defer c.Stop()
	guestKC := filepath.Join(state, "kubeconfig-guest")
	if err := os.WriteFile(guestKC, c.Kubeconfig(cluster.GuestServer), 0o644); err != nil {
		return err
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig(c.HostServer()))
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}

	var failures []string
	for _, n := range o.ns {
		start := time.Now()
		if err := bench.Load(ctx, cs, loaded, n, o.cfg.E, o.workers); err != nil {
			return fmt.Errorf("load %d Services: %w", n, err)
		}
		if loaded < n {
			fmt.Printf("benchcompare: loaded Services %d..%d (x %d endpoints) in %.1fs\n", loaded, n-1, o.cfg.E, time.Since(start).Seconds())
		}
		loaded = n
		if err := os.WriteFile(filepath.Join(state, loadedFile), fmt.Appendf(nil, "%d %d\n", n, o.cfg.E), 0o644); err != nil {
			return err
		}
		cfg := o.cfg
		cfg.N = n
		recs, err := boot(ctx, o, cfg, c.APIPort, guestKC)
		res.Records = append(res.Records, recs...)
		if err != nil {
			failures = append(failures, fmt.Sprintf("N=%d: %v", n, err))
		}
		for _, r := range recs {
			if r.Error != "" {
				failures = append(failures, fmt.Sprintf("N=%d %s: %s", n, r.Proxy, r.Error))
			}
		}
		if err := save(o, res, stamp); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	fmt.Printf("\n%s\n", bench.MarkdownTable(res))
	for _, tab := range []string{bench.DataPathTable(res), bench.BehaviourTable(res)} {
		if tab != "" {
			fmt.Printf("%s\n", tab)
		}
	}
	fmt.Printf("benchcompare: results in %s, plot in %s\n", filepath.Join(o.out, o.name+".json"), filepath.Join(o.out, o.name+".svg"))
	if len(o.cfg.Profiles) > 0 {
		fmt.Printf("benchcompare: profiles of %s in %s\n", strings.Join(o.cfg.Profiles, ", "), filepath.Join(o.out, profilesDir, o.name+"-*"))
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d failure(s) (cluster logs in %s):\n%s", len(failures), filepath.Join(state, "cluster"), strings.Join(failures, "\n"))
	}
	return nil
}

// loadedFile, in the state directory, says how many Services of how many endpoints etcd
// holds ("N E"), once they are all loaded.
const loadedFile = "loaded"

// keptLoad reads what the kept state directory holds: the number of Services loaded, at
// most first (the first boot's N) and of e endpoints each, or an error saying why the
// state cannot be kept.
func keptLoad(state string, e, first int) (int, error) {
	b, err := os.ReadFile(filepath.Join(state, loadedFile))
	if err != nil {
		return 0, fmt.Errorf("--keep-state: no completed load in %s (run once without it): %w", state, err)
	}
	var n, ke int
	if _, err := fmt.Sscanf(string(b), "%d %d", &n, &ke); err != nil {
		return 0, fmt.Errorf("--keep-state: %s: %w", filepath.Join(state, loadedFile), err)
	}
	switch {
	case ke != e:
		return 0, fmt.Errorf("--keep-state: the state holds Services of %d endpoints, not --e %d", ke, e)
	case n > first:
		return 0, fmt.Errorf("--keep-state: the state holds %d Services, more than the first --n %d", n, first)
	}
	return n, nil
}

// boot runs the bench test binary in one VM boot for cfg and returns its records; a proxy
// of cfg that printed none gets a record with the error.
func boot(ctx context.Context, o options, cfg bench.Config, apiPort int, guestKC string) ([]bench.Record, error) {
	env := cfg.Env()
	env["KIPVS_E2E_KUBECONFIG"] = guestKC
	for _, e := range o.envs {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("--env %q is not NAME=VALUE", e)
		}
		env[k] = v
	}
	script, err := vm.TestRun{
		Binaries: []string{o.test},
		Args:     []string{"-test.run=^TestBenchCompare$", "-test.timeout=" + (o.timeout - time.Minute).String()},
		Env:      env,
	}.Script()
	if err != nil {
		return nil, err
	}
	vc := vm.Config{CacheDir: o.vmCache, Script: script, Timeout: o.timeout, Net: &vm.Net{HostPort: apiPort}, MemoryMB: cfg.VMMemoryMB,
		Modules: append(vm.DefaultModules(), bench.ExtraModules()...)}
	if len(cfg.Profiles) > 0 {
		vc.Artifacts = o.out
		for _, p := range cfg.Profiles {
			// An earlier run's profiles of the same name would pass for this run's.
			if err := os.RemoveAll(bench.ProfileDir(filepath.Join(o.out, profilesDir), cfg.Name, p, cfg.N)); err != nil {
				return nil, err
			}
		}
	}
	if !o.quiet {
		vc.Console = os.Stdout
	}
	fmt.Printf("benchcompare: N=%d: booting the VM (%s)\n", cfg.N, strings.Join(cfg.Proxies, ", "))
	loads := make(chan []float64)
	lctx, stopLoad := context.WithCancel(ctx)
	go sampleLoad(lctx, loads)
	res, runErr := vm.Run(ctx, vc)
	stopLoad()
	load := <-loads
	if o.quiet && runErr != nil {
		// The console was not streamed: show how the run ended.
		lines := strings.Split(strings.TrimRight(res.Output, "\n"), "\n")
		fmt.Printf("benchcompare: N=%d: the VM's last %d lines:\n%s\n", cfg.N, min(len(lines), 80), strings.Join(lines[max(0, len(lines)-80):], "\n"))
	}
	recs, perr := bench.ParseResults(res.Output)
	if len(load) > 0 {
		sum := 0.0
		for _, l := range load {
			sum += l
		}
		for i := range recs {
			recs[i].HostLoadMean, recs[i].HostLoadMax = sum/float64(len(load)), slices.Max(load)
		}
	}
	for _, p := range cfg.Proxies {
		found := false
		for _, r := range recs {
			found = found || r.Proxy == p
		}
		if !found {
			recs = append(recs, bench.Record{Proxy: p, N: cfg.N, E: cfg.E, Error: "no result from the VM"})
		}
	}
	switch {
	case runErr != nil:
		return recs, runErr
	case perr != nil:
		return recs, perr
	case res.ExitCode != 0:
		return recs, fmt.Errorf("the bench test failed in the VM (exit code %d)", res.ExitCode)
	}
	return recs, nil
}

// save writes the result file and the plot under out (and a dated copy of the results
// under out/runs/), and copies both into docs when asked.
func save(o options, res bench.Run, stamp string) error {
	svg := bench.RenderSVG(res)
	dirs := []string{o.out}
	if o.docs != "" {
		dirs = append(dirs, o.docs)
	}
	for _, d := range dirs {
		if err := bench.WriteRun(filepath.Join(d, o.name+".json"), res); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, o.name+".svg"), svg, 0o644); err != nil {
			return fmt.Errorf("write the plot: %w", err)
		}
	}
	return bench.WriteRun(filepath.Join(o.out, "runs", o.name+"-"+stamp+".json"), res)
}

// sampleLoad reads the host's 1-minute load average every 10 s until ctx ends, then sends
// the samples.
func sampleLoad(ctx context.Context, out chan<- []float64) {
	var samples []float64
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			out <- samples
			return
		case <-tick.C:
			b, err := os.ReadFile("/proc/loadavg")
			if err != nil {
				continue
			}
			if v, err := bench.ParseLoadAvg(string(b)); err == nil {
				samples = append(samples, v)
			}
		}
	}
}

// hostCPU is the first "model name" of /proc/cpuinfo.
func hostCPU() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
