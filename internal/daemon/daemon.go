// Package daemon is `kipvs run`: it wires a Service source (the API or a file) through the
// pure desired-state builder (proxy) into one reconciler per IP family, scheduled by the
// runner, and serves health and metrics. Everything kernel-facing comes in through Deps, so
// the whole daemon runs over fakes in unit tests.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/healthcheck"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/metrics"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/runner"
	"github.com/kipvs/kipvs/internal/server"
	"github.com/kipvs/kipvs/internal/svcstats"
	"github.com/kipvs/kipvs/internal/sysctl"
	"github.com/kipvs/kipvs/internal/watch"
)

// Deps is everything the daemon touches outside itself.
type Deps struct {
	Source watch.Source
	// APIServerAddrs are the apiserver's addresses as this node reaches it; no external or
	// load balancer IP may take one (nil: none known).
	APIServerAddrs []netip.Addr
	// IPVS is shared by both families (probe, timeouts); Kernel returns one family's full
	// adapter set.
	IPVS   ipvs.Interface
	Kernel func(inet.Family) (reconcile.Kernel, error)
	// StatsIPVS is what the Service traffic metrics read at scrape time: best a client
	// of its own, so scrapes and syncs never wait for each other (nil: IPVS).
	StatsIPVS ipvs.Interface
	Sysctl    sysctl.Interface
	// SysfsRoot is normally /sys (conntrack hashsize); "" skips it.
	SysfsRoot string
	HostAddrs func() ([]netip.Addr, error)
	// IPv6 reports whether the IPv6 family can run on this node (nil), or why not. kipvs
	// runs it whenever it can, as upstream does: ip6tables works and /proc/net/if_inet6
	// exists, whatever addresses the host has. nil: IPv4 only.
	IPv6 func() error
	// RandomFully reports whether a family's iptables supports MASQUERADE --random-fully
	// (iptables 1.6.2 and later); upstream then adds it. nil: never.
	RandomFully   func(inet.Family) bool
	KernelRelease string
	NumCPU        int
	Clock         clock.WithTicker
	Registry      *prometheus.Registry
	// DrainInterval is how often draining real servers are checked (default 5 s).
	DrainInterval time.Duration
	// Events receives Warning Events for Services and the Node (nil: problems are only
	// logged). The daemon sends them through an aggregator: at most one Event per object
	// and reason per EventInterval, with a count (eventagg.go).
	Events EventSink
	// HealthCheckListen opens the health check node ports (nil: net.Listen).
	HealthCheckListen healthcheck.Listener
	// Collect, if set, is started in the background once the source has synced (before the
	// first sync) and after every full sync, unless the last one is still running: the real
	// daemon collects garbage there (runtime.GC), so what a full sync held while it
	// compared the kernel with its desired state (or the informers' initial lists) does not
	// set the Go heap's next goal, which is twice what a collection finds live (peak RSS;
	// see docs/performance.md, Memory). It never holds the daemon lock nor delays a sync
	// (a collection at 10,000 Services takes about a second under TCG). nil: nothing.
	Collect func()
	// firstSynced, if set (by this package's tests), is closed after the first successful
	// sync.
	firstSynced chan struct{}
}

// Daemon is a running kipvs.
type Daemon struct {
	cfg      config.Config
	deps     Deps
	log      *zap.Logger
	metrics  *metrics.Metrics
	health   *server.Health
	nodeName string
	run      *runner.Runner

	mu       sync.Mutex // one sync or drain at a time
	families []*family
	// problems are the problems last reported per Service (and family), so each is
	// reported once while it lasts.
	problems map[problemKey][]proxy.Problem
	ready    bool
	// schedulers records the probe result of every scheduler a Service asked for.
	schedulers map[string]bool
	// probeLeftover: a scheduler probe could not delete its virtual server; full syncs
	// retry until it is gone.
	probeLeftover bool
	// collecting: a Deps.Collect is running (collectWG: Run waits for it before it returns).
	collecting atomic.Bool
	collectWG  sync.WaitGroup
	hc         *healthcheck.Manager
	// events is Deps.Events's aggregator (nil without Deps.Events); Deps.Events is it.
	events *eventAggregator
	// badClusterCIDRs are the clusterCIDRs found overlapping the Service CIDR (seed-001),
	// left out of local-traffic detection; clusterCIDRChecked: the check ran once.
	badClusterCIDRs    []netip.Prefix
	clusterCIDRChecked bool
	hcWant             map[types.NamespacedName]healthcheck.Service
}

type problemKey struct {
	family inet.Family
	svc    types.NamespacedName
}

type family struct {
	ipFamily inet.Family
	kernel   reconcile.Kernel
	// randomFully: this family's iptables takes MASQUERADE --random-fully.
	randomFully bool
	opts        proxy.Options
	desired     *proxy.Desired
	rec         *reconcile.Reconciler
	// noLocal holds the Services with a Local policy and no local endpoint.
	noLocalInternal, noLocalExternal map[types.NamespacedName]bool
}

// New checks the node and prepares a daemon; Run starts it.
func New(cfg config.Config, nodeName string, log *zap.Logger, deps Deps) (*Daemon, error) {
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	if deps.Registry == nil {
		deps.Registry = prometheus.NewRegistry()
	}
	if deps.NumCPU == 0 {
		deps.NumCPU = runtime.NumCPU()
	}
	if deps.DrainInterval == 0 {
		deps.DrainInterval = 5 * time.Second
	}
	var events *eventAggregator
	if deps.Events != nil {
		events = newEventAggregator(deps.Events, deps.Clock, EventInterval)
		deps.Events = events
	}
	d := &Daemon{cfg: cfg, deps: deps, events: events, log: log, nodeName: nodeName, problems: map[problemKey][]proxy.Problem{},
		schedulers: map[string]bool{cfg.IPVS.SchedulerName(): true}, hcWant: map[types.NamespacedName]healthcheck.Service{}}
	d.metrics = metrics.New(deps.Registry)
	stats := deps.StatsIPVS
	if stats == nil {
		stats = deps.IPVS
	}
	deps.Registry.MustRegister(svcstats.New(svcstats.Options{IPVS: stats, VirtualServers: d.VirtualServers,
		Endpoints: cfg.Kipvs.EndpointMetrics, Logger: log.Named("svcstats")}))
	if fs, ok := deps.Source.(*watch.FileSource); ok {
		fs.SetMetrics(watch.FileSourceMetrics{ReloadErrors: d.metrics.SourceFileReloadErrors,
			LastGood: d.metrics.SourceFileLastGood, SkippedObjects: d.metrics.SourceErrors.WithLabelValues("file")})
	}
	d.health = server.NewHealth(deps.Clock, 2*cfg.IPVS.SyncPeriod, d.nodeForHealth, d.metrics)

	fams := []inet.Family{inet.IPv4}
	if err := ipv6Support(deps.IPv6); err != nil {
		log.Info("the IPv6 family is not run", zap.Error(err))
	} else {
		fams = append(fams, inet.IPv6)
	}
	for _, f := range fams {
		k, err := deps.Kernel(f)
		if err != nil {
			return nil, fmt.Errorf("%s kernel adapters: %w", f, err)
		}
		randomFully := deps.RandomFully != nil && deps.RandomFully(f)
		if randomFully {
			log.Info("iptables supports --random-fully", zap.String("ipFamily", f.String()))
		} else {
			log.Info("iptables does not support --random-fully", zap.String("ipFamily", f.String()))
		}
		d.families = append(d.families, &family{
			ipFamily:        f,
			randomFully:     randomFully,
			kernel:          k,
			desired:         proxy.NewDesired(f),
			noLocalInternal: map[types.NamespacedName]bool{},
			noLocalExternal: map[types.NamespacedName]bool{},
			rec: reconcile.New(k, reconcile.Options{
				Family: f, ExcludeCIDRs: cfg.IPVS.ExcludeCIDRs, GracefulPeriod: cfg.Kipvs.GracefulPeriod,
				Clock: deps.Clock, Logger: log.With(zap.String("family", f.String())), Metrics: d.metrics,
				RetryBackoff: reconcile.Backoff{Initial: time.Second, Max: cfg.IPVS.SyncPeriod},
			}),
		})
	}
	var report healthcheck.Reporter
	if deps.Events != nil {
		report = deps.Events.Warn
	}
	d.hc = healthcheck.New(nil, func() bool { return d.health.Report().Healthy }, deps.HealthCheckListen, report, log.Named("healthcheck"))
	return d, nil
}

// ipv6Support calls check, treating a missing check as "IPv4 only".
func ipv6Support(check func() error) error {
	if check == nil {
		return errors.New("no IPv6 check configured")
	}
	return check()
}

// Health returns the health tracker (served by the health server).
func (d *Daemon) Health() *server.Health { return d.health }

func (d *Daemon) nodeForHealth() (*v1.Node, bool) {
	if d.deps.Source == nil {
		return nil, false
	}
	n := d.deps.Source.Node()
	if n == nil && d.cfg.Kipvs.SourceFile != "" {
		return nil, false // standalone: no Node to judge by
	}
	return n, true
}

// Prepare runs the start-up checks and sets the sysctls; it is what --init-only does too.
func (d *Daemon) Prepare(ctx context.Context) error {
	info, err := d.deps.IPVS.Info()
	if err != nil {
		return fmt.Errorf("IPVS is not available (load the ip_vs kernel module, or use a kernel with CONFIG_IP_VS): %w", err)
	}
	d.log.Info("IPVS present", zap.String("version", info.VersionString()), zap.Uint32("connTableSize", info.ConnTableSize))
	if err := probeScheduler(d.deps.IPVS, d.cfg.IPVS.SchedulerName()); errors.Is(err, errProbeLeftover) {
		d.probeLeftover = true
	} else if err != nil {
		return err
	}
	if err := d.checkSetMatch(ctx); err != nil {
		return err
	}
	kv, err := ipvsmode.ParseKernelVersion(d.deps.KernelRelease)
	if err != nil {
		return err
	}
	settings, warnings := ipvsmode.DesiredSysctls(kv, d.cfg.SysctlOptions(d.deps.NumCPU))
	for _, w := range warnings {
		d.log.Warn(w)
	}
	if err := applySysctls(d.deps.Sysctl, settings, d.log); err != nil {
		return err
	}
	if d.deps.SysfsRoot != "" {
		if err := setConntrackHashsize(d.deps.SysfsRoot, d.cfg.Conntrack.Max(d.deps.NumCPU), d.log); err != nil {
			d.log.Warn("could not size the conntrack hash table", zap.Error(err))
		}
	}
	if t := ipvsTimeouts(&d.cfg); t != (ipvs.Timeouts{}) {
		if err := d.deps.IPVS.SetTimeouts(t); err != nil {
			return fmt.Errorf("set IPVS timeouts tcp=%d tcpfin=%d udp=%d: %w", t.TCP, t.TCPFin, t.UDP, err)
		}
	}
	if !d.cfg.HasLocalDetector(false) {
		d.log.Warn("no local traffic detector (no clusterCIDR for detect-local-mode " + string(d.cfg.DetectLocalMode) +
			"): traffic to cluster IPs is masqueraded only when it comes from the node itself; pod traffic keeps its source address. " +
			"Set --cluster-cidr to the pod CIDR so off-node clients are masqueraded too.")
	}
	return nil
}

// checkSetMatch makes sure each family's packet-filter dataplane can run (for iptables: the
// ipset modules, the xt_set kernel module and the iptables set extension).
func (d *Daemon) checkSetMatch(ctx context.Context) error {
	for _, f := range d.families {
		if err := f.kernel.Filter.Check(ctx); err != nil {
			return err
		}
	}
	return nil
}

// probeVIP is a documentation address (TEST-NET-2) used for the throwaway virtual server.
var probeVIP = netip.MustParseAddr("198.51.100.200")

// errProbeLeftover is returned (wrapped) by probeScheduler when the scheduler loaded but the
// throwaway virtual server could not be deleted: the scheduler is available, and the
// leftover is removed by a later full sync (removeProbeLeftover).
var errProbeLeftover = errors.New("the probe virtual server could not be removed")

// probeKey is the throwaway virtual server of probeScheduler.
var probeKey = ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: probeVIP, Port: 9}

// probeScheduler creates and deletes a throwaway virtual server, so a scheduler whose
// kernel module is missing fails at start with the module's name. An error matching
// kerr.ErrNotFound means the scheduler is unavailable; one matching errProbeLeftover means
// it is available; any other error says nothing about it (a transient kernel failure).
func probeScheduler(v ipvs.Interface, sched string) error {
	if sched == "" {
		sched = ipvsmode.DefaultScheduler
	}
	_ = v.DeleteService(probeKey) // a leftover of a crashed or failed probe
	if err := v.AddService(ipvs.Service{ServiceKey: probeKey, Scheduler: sched}); err != nil {
		if kerr.IsNotFound(err) {
			return fmt.Errorf("IPVS scheduler %q is not available: load the kernel module ip_vs_%s (modprobe ip_vs_%s): %w", sched, sched, sched, err)
		}
		return fmt.Errorf("probe IPVS scheduler %q with a virtual server on %s: %w", sched, probeVIP, err)
	}
	if err := v.DeleteService(probeKey); err != nil {
		return fmt.Errorf("remove the probe virtual server %s: %w: %w", probeVIP, errProbeLeftover, err)
	}
	return nil
}

// removeProbeLeftover deletes the throwaway virtual server a failed probe left behind.
func (d *Daemon) removeProbeLeftover() {
	if !d.probeLeftover {
		return
	}
	if err := d.deps.IPVS.DeleteService(probeKey); err != nil && !kerr.IsNotFound(err) {
		d.log.Warn("cannot remove the scheduler probe's virtual server; retrying at the next full sync", zap.Error(err))
		return
	}
	d.probeLeftover = false
}

// Run syncs until ctx ends. The source must be started; Run waits for it to sync before it
// touches the kernel, so a half-filled cache never deletes live rules.
func (d *Daemon) Run(ctx context.Context) error {
	src := d.deps.Source
	d.log.Info("waiting for the Service source to sync")
	if err := src.WaitForSync(ctx); err != nil {
		return fmt.Errorf("wait for Services and EndpointSlices: %w", err)
	}
	d.collect()
	d.run = runner.New(d.syncThenCollect, runner.Options{
		Periodic:    d.periodicRead,
		MinInterval: d.cfg.IPVS.MinSyncPeriod,
		MaxInterval: d.cfg.IPVS.SyncPeriod,
		Clock:       d.deps.Clock,
		RetryAt:     d.nextRetry,
		OnQueued: func(t time.Time) {
			for _, f := range d.families {
				d.metrics.SyncProxyRulesLastQueued.WithLabelValues(f.ipFamily.String()).Set(float64(t.UnixNano()) / 1e9)
				d.health.QueuedUpdate(f.ipFamily.String())
			}
		},
	})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if d.events != nil {
		wg.Go(func() { d.sendEvents(ctx) })
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-src.Changed():
				svc, eps := src.PendingCounts()
				d.metrics.ServiceChangesPending.Set(float64(svc))
				d.metrics.EndpointChangesPending.Set(float64(eps))
				d.run.Request()
			}
		}
	}()
	go func() {
		defer wg.Done()
		t := d.deps.Clock.NewTicker(d.deps.DrainInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				d.drain(ctx)
			}
		}
	}()
	err := d.run.Run(ctx)
	cancel()
	wg.Wait()
	d.collectWG.Wait()
	d.hc.Close()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// sendEvents sends, every eventTick and once more at the end, the Events that waited for
// their interval (the daemon flushes after each sync too).
func (d *Daemon) sendEvents(ctx context.Context) {
	t := d.deps.Clock.NewTicker(eventTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			d.events.flush()
			return
		case <-t.C():
			d.events.flush()
		}
	}
}

// clusterCIDROverlaps finds the seed-001 mistake: clusterCIDRs that are, contain or lie
// inside a Service CIDR. It returns them and an error explaining each (nil: none). The
// Service CIDRs come from the cluster's ServiceCIDR objects, else --kipvs-service-cidr;
// with neither, a clusterCIDR holding default/kubernetes's cluster IP is the evidence.
func (d *Daemon) clusterCIDROverlaps(sc watch.ServiceCIDRs) ([]netip.Prefix, error) {
	cidrs := sc.CIDRs
	source := "the cluster's ServiceCIDR objects"
	if len(cidrs) == 0 {
		cidrs = d.cfg.Kipvs.ServiceCIDRs
		source = "--kipvs-service-cidr"
	}
	var bad []netip.Prefix
	var errs []error
	for _, p := range d.cfg.ClusterCIDRs {
		if len(cidrs) > 0 {
			if err := config.CheckClusterCIDR([]netip.Prefix{p}, cidrs); err != nil {
				bad = append(bad, p)
				errs = append(errs, fmt.Errorf("service CIDR from %s: %w", source, err))
			}
			continue
		}
		for _, ip := range sc.KubernetesServiceIPs {
			if p.Contains(ip) {
				bad = append(bad, p)
				errs = append(errs, fmt.Errorf("clusterCIDR %s contains %s, the cluster IP of default/kubernetes: %w", p, ip,
					config.CheckClusterCIDR([]netip.Prefix{p}, []netip.Prefix{netip.PrefixFrom(ip, ip.BitLen())})))
				break
			}
		}
	}
	return bad, errors.Join(errs...)
}

// checkClusterCIDR runs at every sync (the Service CIDRs can change), before the options
// are built. A clusterCIDR that overlaps the Service CIDR is not used to detect local
// traffic: kube-proxy would use it, so the node's own connections to cluster IPs (whose
// source is the cluster IP itself) would look like pod traffic and not be masqueraded,
// and the node could not reach Services. kipvs keeps running instead of crash-looping,
// masquerades as it does with no detector (the node's own connections to cluster IPs), and
// reports the mistake loudly: an ERROR log, a Warning Event on the Node and
// kipvs_cluster_cidr_overlaps_service_cidr 1, each time the finding changes.
func (d *Daemon) checkClusterCIDR() {
	var sc watch.ServiceCIDRs
	if d.deps.Source != nil {
		sc = d.deps.Source.ServiceCIDRs()
	}
	bad, err := d.clusterCIDROverlaps(sc)
	if slices.Equal(bad, d.badClusterCIDRs) && d.clusterCIDRChecked {
		return
	}
	prev := d.badClusterCIDRs
	d.clusterCIDRChecked = true
	d.badClusterCIDRs = bad
	if len(bad) == 0 {
		d.metrics.ClusterCIDROverlapsServiceCIDR.Set(0)
		if len(prev) > 0 {
			d.log.Info("clusterCIDR no longer overlaps the Service CIDR; it detects local traffic again", zap.Stringers("clusterCIDRs", d.cfg.ClusterCIDRs))
		}
		return
	}
	d.metrics.ClusterCIDROverlapsServiceCIDR.Set(1)
	msg := fmt.Sprintf("clusterCIDR %s is not used to detect local traffic: %v. kipvs keeps running and masquerades "+
		"traffic to cluster IPs as it does with no local-traffic detector (the node's own connections, whose source is "+
		"the cluster IP itself); fix clusterCIDR", prefixList(bad), err)
	d.log.Error("clusterCIDR overlaps the Service CIDR", zap.Stringers("clusterCIDRs", bad), zap.Error(err))
	if d.deps.Events != nil {
		d.deps.Events.WarnNode(d.nodeName, "ClusterCIDROverlapsServiceCIDR", msg)
	}
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (d *Daemon) drain(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.families {
		if res, err := f.rec.Drain(ctx); reconcile.IsApplyError(err) {
			// Their virtual servers are retried on their own (runner Options.RetryAt).
			d.log.Warn("deleting drained real servers failed; retrying them with backoff", zap.String("family", f.ipFamily.String()), zap.Error(err))
		} else if err != nil {
			d.log.Warn("draining real servers failed; a full sync follows", zap.String("family", f.ipFamily.String()), zap.Error(err))
			d.run.RequestFull()
		} else if res.Plan != nil && !res.Plan.Empty() {
			d.log.Info("removed drained real servers", zap.String("family", f.ipFamily.String()), zap.Int("count", res.Plan.Len()))
		}
	}
}

// VirtualServers lists the virtual servers the daemon wants, every family, with the
// Service port each is programmed for (the metrics server's read-only debug endpoint).
func (d *Daemon) VirtualServers() []server.VirtualServer {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []server.VirtualServer
	for _, f := range d.families {
		for _, v := range f.desired.VirtualServers() {
			out = append(out, server.VirtualServer{
				Protocol: v.Protocol.Name(), Address: v.Address.String(), Port: v.Port,
				Kind: v.Kind.String(), Namespace: v.Owner.Namespace, Name: v.Owner.Name, PortName: v.Owner.Port,
				Destinations: len(v.Destinations),
			})
		}
	}
	return out
}
