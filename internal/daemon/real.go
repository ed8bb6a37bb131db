package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netns"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/rtsched"
	"github.com/kipvs/kipvs/internal/svcstats"
	"github.com/kipvs/kipvs/internal/sysctl"
	"github.com/kipvs/kipvs/internal/watch"
	"github.com/kipvs/kipvs/internal/watch/filesource"
)

// NodeName is --hostname-override, or the host name, lower-cased as kube-proxy does.
func NodeName(cfg *config.Config) (string, error) {
	if cfg.HostnameOverride != "" {
		return cfg.HostnameOverride, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("no --hostname-override and no host name: %w", err)
	}
	return strings.ToLower(strings.TrimSpace(h)), nil
}

// Closer releases what RealDeps opened.
type Closer func()

// RealDeps opens the kernel adapters of the current network namespace and the Service
// source the configuration names (a file, or the API).
func RealDeps(ctx context.Context, cfg *config.Config, nodeName string, log *zap.Logger) (Deps, Closer, error) {
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	fail := func(err error) (Deps, Closer, error) { closeAll(); return Deps{}, nil, err }
	ns := netns.None()

	v, err := ipvs.New(ns)
	if err != nil {
		return fail(fmt.Errorf("open IPVS netlink (is the ip_vs kernel module loaded? modprobe ip_vs): %w", err))
	}
	closers = append(closers, v.Close)
	// The traffic metrics read the counters on a socket of their own, each round trip
	// bounded by the scrape timeout.
	stats, err := ipvs.New(ns, ipvs.WithTimeout(svcstats.DefaultTimeout))
	if err != nil {
		return fail(fmt.Errorf("open IPVS netlink for the traffic metrics: %w", err))
	}
	closers = append(closers, stats.Close)
	// The periodic full sync reads the IPVS table and the sets on sockets of their own, so
	// its long dumps never hold the socket an incremental sync is waiting for.
	readIPVS, err := ipvs.New(ns)
	if err != nil {
		return fail(fmt.Errorf("open IPVS netlink for full syncs: %w", err))
	}
	closers = append(closers, readIPVS.Close)
	sets, err := ipset.New(ns)
	if err != nil {
		return fail(fmt.Errorf("open ipset netlink (modprobe ip_set): %w", err))
	}
	closers = append(closers, sets.Close)
	readSets, err := ipset.New(ns)
	if err != nil {
		return fail(fmt.Errorf("open ipset netlink for full syncs: %w", err))
	}
	closers = append(closers, readSets.Close)
	dummy, err := dummyif.New(ipvsmode.DummyName, ns)
	if err != nil {
		return fail(fmt.Errorf("open rtnetlink for %s: %w", ipvsmode.DummyName, err))
	}
	closers = append(closers, dummy.Close)
	ct, err := conntrack.New(ns)
	if err != nil {
		log.Warn("conntrack netlink unavailable; stale UDP flows will not be cleaned up (modprobe nf_conntrack_netlink)", zap.Error(err))
		ct = nil
	} else {
		closers = append(closers, ct.Close)
	}
	fb, err := newFilterBackend(ctx, cfg.Kipvs.FilterBackend, ns, sets, readSets, log, &closers)
	if err != nil {
		return fail(err)
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return fail(fmt.Errorf("uname: %w", err))
	}

	src, eventsClient, err := newSource(cfg, nodeName, log)
	if err != nil {
		return fail(err)
	}
	var sink EventSink
	if eventsClient != nil {
		sink = NewAPIEvents(ctx, eventsClient, nodeName)
	}
	deps := Deps{
		Source:         src,
		APIServerAddrs: apiServerAddrs(ctx, cfg, log, net.DefaultResolver.LookupNetIP),
		Events:         sink,
		IPVS:           v,
		StatsIPVS:      stats,
		Kernel: func(f inet.Family) (reconcile.Kernel, error) {
			write, read, err := fb.filters(f)
			if err != nil {
				return reconcile.Kernel{}, err
			}
			k := reconcile.Kernel{IPVS: v, Filter: write, Dummy: dummy,
				ReadIPVS: readIPVS, ReadFilter: read, FavorBinder: rtsched.Favor}
			if ct != nil {
				k.Conntrack = ct
			}
			return k, nil
		},
		Sysctl:          sysctl.New("/proc/sys", ns),
		SysfsRoot:       "/sys",
		HostAddrs:       func() ([]netip.Addr, error) { return dummyif.HostAddrs(ipvsmode.DummyName) },
		NodeLinks:       func() ([]netip.Prefix, error) { return dummyif.NodeLinkPrefixes(ipvsmode.DummyName) },
		IPv6:            fb.ipv6,
		RandomFully:     fb.randomFully,
		RemoveLeftovers: fb.leftovers,
		KernelRelease:   unix.ByteSliceToString(uts.Release[:]),
		Collect:         runtime.GC,
		Clock:           clock.RealClock{},
	}
	return deps, closeAll, nil
}

// EventsQPS and EventsBurst are the rate limit of the client that writes Events. It is a
// client of its own, apart from the watches' (clientConnection.qps and burst), so Events,
// however many, never take the watches' share of requests: the daemon sends at most one
// Event per object and reason per EventInterval, client-go queues at most 1000 and drops
// the rest, and this limit paces what reaches the apiserver.
const (
	EventsQPS   = 1
	EventsBurst = 10
)

// Resolver looks a host name up (net.Resolver.LookupNetIP: network "ip").
type Resolver func(ctx context.Context, network, host string) ([]netip.Addr, error)

// resolveTimeout bounds the start-up lookup of the apiserver's host name.
const resolveTimeout = 10 * time.Second

// apiServerAddrs returns the apiserver's addresses as this node reaches it: the host of the
// kubeconfig's (or --master's, or the in-cluster) server URL when it is an IP address, else
// what resolve answers for the host name, once at start (kipvs reads the kubeconfig once).
// No external or load balancer IP may take one (proxy.Options.APIServerAddresses); the
// endpoints of default/kubernetes, watched, are added to them whatever the answer.
func apiServerAddrs(ctx context.Context, cfg *config.Config, log *zap.Logger, resolve Resolver) []netip.Addr {
	if cfg.Kipvs.SourceFile != "" {
		return nil
	}
	cc := cfg.ClientConnection
	rc, err := clientcmd.BuildConfigFromFlags(cc.Master, cc.Kubeconfig)
	if err != nil {
		return nil // newSource reports it
	}
	if a, ok := hostAddr(rc.Host); ok {
		return []netip.Addr{a}
	}
	name := hostName(rc.Host)
	if name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	found, err := resolve(ctx, "ip", name)
	if err != nil || len(found) == 0 {
		log.Warn("cannot resolve the apiserver's host name: external and load balancer IPs are checked against default/kubernetes's endpoints only",
			zap.String("server", rc.Host), zap.Error(err))
		return nil
	}
	var out []netip.Addr
	for _, a := range found {
		if a = a.WithZone("").Unmap(); a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	log.Info("the apiserver's host name resolved; no external or load balancer IP may take these addresses",
		zap.String("server", rc.Host), zap.Stringers("addresses", out))
	return out
}

// hostName returns the host of a server URL ("https://api.example.com:6443" ->
// "api.example.com"), or "".
func hostName(server string) string {
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// hostAddr returns the IP address of a server URL's host ("https://192.168.1.100:6443",
// "[fd00::1]:6443", "10.96.0.1").
func hostAddr(server string) (netip.Addr, bool) {
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// newSource returns the file source, or the API source with the client Events are written
// with (nil with the file source).
func newSource(cfg *config.Config, nodeName string, log *zap.Logger) (watch.Source, kubernetes.Interface, error) {
	if cfg.Kipvs.SourceFile != "" {
		src, err := filesource.New(filesource.Options{Path: cfg.Kipvs.SourceFile, NodeName: nodeName, Logger: log.Named("source")})
		return src, nil, err
	}
	cc := cfg.ClientConnection
	if cc.Kubeconfig == "" && cc.Master == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, nil, errors.New("no Service source: give --kubeconfig, --master, run in a cluster, or use --kipvs-source-file")
	}
	rc, err := clientcmd.BuildConfigFromFlags(cc.Master, cc.Kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %q: %w", cc.Kubeconfig, err)
	}
	rc.QPS = cc.QPS
	rc.Burst = int(cc.Burst)
	rc.ContentType = cc.ContentType
	rc.AcceptContentTypes = cc.AcceptContentTypes
	rc.UserAgent = "kipvs"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("API client: %w", err)
	}
	erc := rest.CopyConfig(rc)
	erc.QPS, erc.Burst = EventsQPS, EventsBurst
	erc.UserAgent = "kipvs/events"
	eventsClient, err := kubernetes.NewForConfig(erc)
	if err != nil {
		return nil, nil, fmt.Errorf("API client for Events: %w", err)
	}
	src, err := watch.NewAPISource(watch.APISourceOptions{Client: client, NodeName: nodeName, ResyncPeriod: cfg.ConfigSyncPeriod,
		ServiceAnnotations: proxy.ServiceAnnotations(), Logger: log.Named("source")})
	return src, eventsClient, err
}
