package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/healthcheck"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/metrics"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/runner"
	"github.com/kipvs/kipvs/internal/server"
	"github.com/kipvs/kipvs/internal/svcstats"
	"github.com/kipvs/kipvs/internal/sysctl"
	"github.com/kipvs/kipvs/internal/watch"
	"github.com/kipvs/kipvs/internal/watch/filesource"
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
	// NodeLinks returns the prefixes on the node's links other than kube-ipvs0 and its
	// gateways (dummyif.NodeLinkPrefixes); no external or load balancer IP may come from
	// them unless an allow list admits it. Read with HostAddrs. nil: none known.
	NodeLinks func() ([]netip.Prefix, error)
	// IPv6 reports whether the IPv6 family can run on this node (nil), or why not. kipvs
	// runs it whenever it can, as upstream does: ip6tables works and /proc/net/if_inet6
	// exists, whatever addresses the host has. nil: IPv4 only.
	IPv6 func() error
	// RandomFully reports whether a family's iptables supports MASQUERADE --random-fully
	// (iptables 1.6.2 and later); upstream then adds it. nil: never.
	RandomFully func(inet.Family) bool
	// RemoveLeftovers, if set, removes what kipvs (or kube-proxy) left on the node with the
	// other filter backend; the daemon runs it once, in the background, after its first
	// successful sync, so the node is never without rules in between.
	RemoveLeftovers func(context.Context) error
	KernelRelease   string
	NumCPU          int
	Clock           clock.WithTicker
	Registry        *prometheus.Registry
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
}

// drainLimit is the reconciler's GracefulPeriod for --kipvs-graceful-period: 0 means no time
// limit (a removed TCP real server drains until its connections end, as kube-proxy does).
func drainLimit(graceful time.Duration) time.Duration {
	if graceful == 0 {
		return reconcile.NoDrainLimit
	}
	return graceful
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
	// conns are the connection counts of the last full read, for the traffic metrics
	// (stats), which Gatherer adds to the registry's.
	conns *svcstats.Connections
	stats *svcstats.Collector

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
	// collecting: a Deps.Collect is running. collectWG: Run waits for the background work
	// (collections, Deps.RemoveLeftovers) before it returns.
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
	// endpointNodes elects the node that sends a Service's Service-wide Warning Events
	// (reporter.go).
	endpointNodes *endpointNodes
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
	return build(cfg, nodeName, log, deps, drainLimit(cfg.Kipvs.GracefulPeriod))
}

// build is New with the reconcilers' GracefulPeriod given (New's: drainLimit). This
// package's tests give 0, which deletes removed real servers at once instead of draining
// them, so that a removal converges within its sync.
func build(cfg config.Config, nodeName string, log *zap.Logger, deps Deps, gracefulPeriod time.Duration) (*Daemon, error) {
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
		schedulers: map[string]bool{cfg.IPVS.SchedulerName(): true}, hcWant: map[types.NamespacedName]healthcheck.Service{},
		endpointNodes: newEndpointNodes()}
	d.metrics = metrics.New(deps.Registry)
	stats := deps.StatsIPVS
	if stats == nil {
		stats = deps.IPVS
	}
	d.conns = &svcstats.Connections{}
	d.stats = svcstats.New(svcstats.Options{IPVS: stats, VirtualServers: d.VirtualServers,
		Endpoints: cfg.Kipvs.EndpointMetrics, MaxServices: svcstats.SetsForSeries(cfg.Kipvs.MaxServiceSeries), Connections: d.conns,
		Logger: log.Named("svcstats")})
	deps.Registry.MustRegister(d.stats)
	if fs, ok := deps.Source.(*filesource.Source); ok {
		fs.SetMetrics(filesource.Metrics{ReloadErrors: d.metrics.SourceFileReloadErrors,
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
				Family: f, ExcludeCIDRs: cfg.IPVS.ExcludeCIDRs, GracefulPeriod: gracefulPeriod,
				Clock: deps.Clock, Logger: log.With(zap.String("family", f.String())), Metrics: d.metrics,
				NFTables:     cfg.Kipvs.FilterBackend == config.FilterNFTables,
				RetryBackoff: reconcile.Backoff{Initial: time.Second, Max: cfg.IPVS.SyncPeriod},
			}),
		})
		// The error counters exist at 0 from the start: rate() and increase() miss the
		// first error of a counter that appears at 1, and alerts use them.
		// Both backends' rule failure counters, whichever runs: one alert covers both, and
		// a node that switches backends keeps its series.
		d.metrics.SyncErrors.WithLabelValues(f.String())
		d.metrics.IPTablesRestoreFailuresTotal.WithLabelValues(f.String())
		d.metrics.NFTablesSyncFailuresTotal.WithLabelValues(f.String())
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
			if reason, msg, ok := readOnlySysEvent(err); ok {
				d.StartEvent(v1.EventTypeWarning, reason, msg)
			}
		}
	}
	if t := ipvsTimeouts(&d.cfg); t != (ipvs.Timeouts{}) {
		// As kube-proxy: a kernel that refuses the timeouts is logged, and the proxy goes on
		// with the kernel's own.
		if err := d.deps.IPVS.SetTimeouts(t); err != nil {
			d.log.Error("failed to set the IPVS timeouts; the kernel's are kept", zap.Uint32("tcpTimeout", t.TCP),
				zap.Uint32("tcpFinTimeout", t.TCPFin), zap.Uint32("udpTimeout", t.UDP), zap.Error(err))
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

// StartEvent records a start-up Event on this node's Node with kube-proxy's action
// (StartKubeProxy): the Normal Starting one, or a failure to start a server; nothing without
// an API.
func (d *Daemon) StartEvent(eventType, reason, message string) {
	if d.events != nil {
		d.events.StartNode(d.nodeName, eventType, reason, message)
	}
}

// Run syncs until ctx ends. The source must be started; Run waits for it to sync before it
// touches the kernel, so a half-filled cache never deletes live rules.
func (d *Daemon) Run(ctx context.Context) error { return d.runWith(ctx, runHooks{}) }

// runHooks are where this package's tests watch and pace a running daemon (runWith); Run
// gives none.
type runHooks struct {
	// firstSynced, if set, is closed after the first sync that succeeds: always one of the
	// runner's SyncFunc (the first sync and the retries of a failed one go through it, and
	// no periodic full sync starts before one succeeded).
	firstSynced chan struct{}
	// pace is how the periodic full syncs step through their passes.
	pace passPace
}

// runWith is Run with the tests' hooks h.
func (d *Daemon) runWith(ctx context.Context, h runHooks) error {
	src := d.deps.Source
	d.StartEvent(v1.EventTypeNormal, "Starting", "")
	d.log.Info("waiting for the Service source to sync")
	if err := src.WaitForSync(ctx); err != nil {
		return fmt.Errorf("wait for Services and EndpointSlices: %w", err)
	}
	d.collect()
	d.listenHealthChecks()
	syncFn := d.syncThenCollect
	if h.firstSynced != nil {
		first := sync.OnceFunc(func() { close(h.firstSynced) })
		syncFn = func(ctx context.Context, full bool) error {
			err := d.syncThenCollect(ctx, full)
			if err == nil {
				first()
			}
			return err
		}
	}
	d.run = runner.New(syncFn, runner.Options{
		Periodic: func(ctx context.Context) (func(context.Context) error, error) {
			return d.periodicRead(ctx, h.pace)
		},
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
func (d *Daemon) VirtualServers() []debugapi.VirtualServer {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []debugapi.VirtualServer
	for _, f := range d.families {
		for _, v := range f.desired.VirtualServers() {
			out = append(out, debugapi.VirtualServer{
				Protocol: v.Protocol.Name(), Address: v.Address.String(), Port: v.Port,
				Kind: v.Kind.String(), Namespace: v.Owner.Namespace, Name: v.Owner.Name, PortName: v.Owner.Port,
				Destinations: len(v.Destinations),
			})
		}
	}
	return out
}

// Gatherer is what /metrics serves: the registry's metrics and the Service traffic
// metrics, which the collector writes itself (svcstats.Gatherer).
func (d *Daemon) Gatherer() prometheus.Gatherer { return svcstats.Gatherer(d.deps.Registry, d.stats) }
