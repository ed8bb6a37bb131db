package svcstats

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
)

// bed is an IPVS fake and the virtual server list the daemon would report for it.
type bed struct {
	t    testing.TB
	fake *ipvstest.Fake
	vss  []debugapi.VirtualServer
}

func newBed(t testing.TB) *bed { return &bed{t: t, fake: ipvstest.NewFake()} }

// vs programs a virtual server in the fake with real servers dests (weight 1) and lists
// it as the daemon does for Service ns/name port portName.
func (b *bed) vs(ns, name, portName, kind, proto, vip string, dests ...string) ipvs.ServiceKey {
	b.t.Helper()
	k := b.kernelVS(proto, vip, dests...)
	b.vss = append(b.vss, debugapi.VirtualServer{Protocol: proto, Address: k.Addr.String(), Port: k.Port, Kind: kind,
		Namespace: ns, Name: name, PortName: portName, Destinations: len(dests)})
	return k
}

// kernelVS programs a virtual server only in the fake.
func (b *bed) kernelVS(proto, vip string, dests ...string) ipvs.ServiceKey {
	b.t.Helper()
	ap := netip.MustParseAddrPort(vip)
	k := ipvs.ServiceKey{Protocol: protocols[proto], Addr: ap.Addr(), Port: ap.Port()}
	ops := []ipvs.Op{ipvs.AddServiceOp(ipvs.Service{ServiceKey: k, Scheduler: "rr"})}
	for _, d := range dests {
		dap := netip.MustParseAddrPort(d)
		ops = append(ops, ipvs.AddDestinationOp(k, ipvs.Destination{Addr: dap.Addr(), Port: dap.Port(), Weight: 1}))
	}
	if err := b.fake.Apply(ops); err != nil {
		b.t.Fatal(err)
	}
	k, _ = k.Normalize()
	return k
}

// stats sets the counters of service k (seed, seed+1, ...).
func (b *bed) stats(k ipvs.ServiceKey, seed uint64) {
	b.t.Helper()
	if err := b.fake.SetServiceStats(k, statsFrom(seed)); err != nil {
		b.t.Fatal(err)
	}
}

// dest sets the counters and connection counts of real server d of k.
func (b *bed) dest(k ipvs.ServiceKey, d string, seed uint64, active, inactive uint32) {
	b.t.Helper()
	ap := netip.MustParseAddrPort(d)
	if err := b.fake.SetDestinationStats(k, ap, statsFrom(seed)); err != nil {
		b.t.Fatal(err)
	}
	if err := b.fake.SetDestinationConns(k, ap, active, inactive, 7); err != nil {
		b.t.Fatal(err)
	}
}

// statsFrom is Stats with Conns=seed, InPkts=10*seed, OutPkts=20*seed, InBytes=1000*seed,
// OutBytes=5000*seed and rates that must not show up anywhere.
func statsFrom(seed uint64) ipvs.Stats {
	return ipvs.Stats{Conns: seed, InPkts: 10 * seed, OutPkts: 20 * seed, InBytes: 1000 * seed, OutBytes: 5000 * seed,
		CPS: 999, InPPS: 999, OutPPS: 999, InBPS: 999, OutBPS: 999}
}

func (b *bed) collector(o Options) *Collector {
	o.IPVS = b.fake
	if o.VirtualServers == nil {
		o.VirtualServers = func() []debugapi.VirtualServer { return slices.Clone(b.vss) }
	}
	return New(o)
}

// scrape gathers c through a pedantic registry and renders every series as
// `name{label="value",...} value`, sorted.
func scrape(t testing.TB, c *Collector) string {
	t.Helper()
	mfs, err := gatherer(c).Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			lines = append(lines, fmt.Sprintf("%s{%s} %v", mf.GetName(), strings.Join(ls, ","), value(mf.GetType(), m)))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	if t == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

func check(t *testing.T, got, want string) {
	t.Helper()
	want = strings.TrimLeft(want, "\n")
	if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
}

// The counters are the fake's: per Service port, family and VIP kind, summed over the
// virtual servers (a NodePort on two node addresses), active and inactive connections
// summed over the real servers; two Services sharing a VIP on different ports each get
// their own port's counts; virtual servers kipvs does not program, and desired ones not
// (yet) in the kernel, give no series.
func TestServiceCounters(t *testing.T) {
	b := newBed(t)
	webCIP := b.vs("default", "web", "http", "ClusterIP", "TCP", "10.96.0.10:80", "10.244.1.5:8080", "10.244.2.7:8080")
	apiCIP := b.vs("default", "api", "https", "ClusterIP", "TCP", "10.96.0.10:443", "10.244.1.9:8443")
	webNP1 := b.vs("default", "web", "http", "NodePort", "TCP", "192.168.1.10:30080", "10.244.1.5:8080", "10.244.2.7:8080")
	webNP2 := b.vs("default", "web", "http", "NodePort", "TCP", "10.0.0.5:30080", "10.244.1.5:8080", "10.244.2.7:8080")
	web6 := b.vs("default", "web", "http", "ClusterIP", "TCP", "[fd00::10]:80", "[fd00:244::5]:8080")
	dns := b.vs("kube-system", "kube-dns", "dns", "ClusterIP", "UDP", "10.96.0.53:53", "10.244.1.3:53")
	b.vss = append(b.vss, debugapi.VirtualServer{Protocol: "TCP", Address: "10.96.0.99", Port: 80, Kind: "LoadBalancer",
		Namespace: "default", Name: "ghost"}) // desired, not in the kernel
	other := b.kernelVS("TCP", "198.51.100.1:80", "10.9.9.9:80")

	b.stats(webCIP, 100)
	b.dest(webCIP, "10.244.1.5:8080", 60, 3, 10)
	b.dest(webCIP, "10.244.2.7:8080", 40, 2, 20)
	b.stats(apiCIP, 7)
	b.dest(apiCIP, "10.244.1.9:8443", 7, 1, 1)
	b.stats(webNP1, 30)
	b.dest(webNP1, "10.244.1.5:8080", 10, 4, 0)
	b.stats(webNP2, 5)
	b.dest(webNP2, "10.244.2.7:8080", 5, 0, 6)
	b.stats(web6, 2)
	b.dest(web6, "[fd00:244::5]:8080", 2, 1, 0)
	b.stats(dns, 1<<40) // 64-bit counters
	b.stats(other, 1000)
	b.dest(other, "10.9.9.9:80", 1000, 50, 50)

	// Before the first full read, a scrape has the counters only.
	if got := scrape(t, b.collector(Options{Connections: &Connections{}})); strings.Contains(got, "_connections{") {
		t.Errorf("connection gauges before the first read of the table:\n%s", got)
	}
	check(t, scrape(t, b.collector(Options{Connections: observed(t, b.fake)})), `
kipvs_endpoint_stats_dropped_total{} 0
kipvs_service_active_connections{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 5
kipvs_service_active_connections{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 4
kipvs_service_active_connections{ip_family="IPv4",namespace="default",port="https",protocol="TCP",service="api",vip_kind="cluster_ip"} 1
kipvs_service_active_connections{ip_family="IPv4",namespace="kube-system",port="dns",protocol="UDP",service="kube-dns",vip_kind="cluster_ip"} 0
kipvs_service_active_connections{ip_family="IPv6",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 1
kipvs_service_bytes_total{direction="in",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 100000
kipvs_service_bytes_total{direction="in",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 35000
kipvs_service_bytes_total{direction="in",ip_family="IPv4",namespace="default",port="https",protocol="TCP",service="api",vip_kind="cluster_ip"} 7000
kipvs_service_bytes_total{direction="in",ip_family="IPv4",namespace="kube-system",port="dns",protocol="UDP",service="kube-dns",vip_kind="cluster_ip"} 1.099511627776e+15
kipvs_service_bytes_total{direction="in",ip_family="IPv6",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 2000
kipvs_service_bytes_total{direction="out",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 500000
kipvs_service_bytes_total{direction="out",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 175000
kipvs_service_bytes_total{direction="out",ip_family="IPv4",namespace="default",port="https",protocol="TCP",service="api",vip_kind="cluster_ip"} 35000
kipvs_service_bytes_total{direction="out",ip_family="IPv4",namespace="kube-system",port="dns",protocol="UDP",service="kube-dns",vip_kind="cluster_ip"} 5.49755813888e+15
kipvs_service_bytes_total{direction="out",ip_family="IPv6",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 10000
kipvs_service_connections_total{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 100
kipvs_service_connections_total{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 35
kipvs_service_connections_total{ip_family="IPv4",namespace="default",port="https",protocol="TCP",service="api",vip_kind="cluster_ip"} 7
kipvs_service_connections_total{ip_family="IPv4",namespace="kube-system",port="dns",protocol="UDP",service="kube-dns",vip_kind="cluster_ip"} 1.099511627776e+12
kipvs_service_connections_total{ip_family="IPv6",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 2
kipvs_service_inactive_connections{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 30
kipvs_service_inactive_connections{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 6
kipvs_service_inactive_connections{ip_family="IPv4",namespace="default",port="https",protocol="TCP",service="api",vip_kind="cluster_ip"} 1
kipvs_service_inactive_connections{ip_family="IPv4",namespace="kube-system",port="dns",protocol="UDP",service="kube-dns",vip_kind="cluster_ip"} 0
kipvs_service_inactive_connections{ip_family="IPv6",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 0
kipvs_service_packets_total{direction="in",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 1000
kipvs_service_packets_total{direction="in",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 350
kipvs_service_packets_total{direction="in",ip_family="IPv4",namespace="default",port="https",protocol="TCP",service="api",vip_kind="cluster_ip"} 70
kipvs_service_packets_total{direction="in",ip_family="IPv4",namespace="kube-system",port="dns",protocol="UDP",service="kube-dns",vip_kind="cluster_ip"} 1.099511627776e+13
kipvs_service_packets_total{direction="in",ip_family="IPv6",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 20
kipvs_service_packets_total{direction="out",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 2000
kipvs_service_packets_total{direction="out",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 700
kipvs_service_packets_total{direction="out",ip_family="IPv4",namespace="default",port="https",protocol="TCP",service="api",vip_kind="cluster_ip"} 140
kipvs_service_packets_total{direction="out",ip_family="IPv4",namespace="kube-system",port="dns",protocol="UDP",service="kube-dns",vip_kind="cluster_ip"} 2.199023255552e+13
kipvs_service_packets_total{direction="out",ip_family="IPv6",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 40
kipvs_service_stats_dropped_total{} 0
kipvs_service_stats_scrape_errors_total{} 0
`)
}

// With endpoint metrics on, each real server of a Service port gets the same families,
// summed over the port's virtual servers of one family and kind; beyond MaxEndpoints the
// rest are dropped and counted, the first ones (by virtual server, then real server) kept.
func TestEndpointCounters(t *testing.T) {
	b := newBed(t)
	webNP1 := b.vs("default", "web", "http", "NodePort", "TCP", "192.168.1.10:30080", "10.244.1.5:8080", "10.244.2.7:8080")
	webNP2 := b.vs("default", "web", "http", "NodePort", "TCP", "10.0.0.5:30080", "10.244.1.5:8080", "10.244.2.7:8080")
	apiCIP := b.vs("default", "api", "https", "ClusterIP", "TCP", "10.96.0.10:443", "10.244.1.9:8443")
	b.stats(webNP1, 30)
	b.dest(webNP1, "10.244.1.5:8080", 10, 4, 0)
	b.dest(webNP1, "10.244.2.7:8080", 20, 1, 1)
	b.stats(webNP2, 5)
	b.dest(webNP2, "10.244.1.5:8080", 5, 0, 6)
	b.stats(apiCIP, 7)
	b.dest(apiCIP, "10.244.1.9:8443", 7, 1, 1)

	c := b.collector(Options{Endpoints: true, MaxEndpoints: 2})
	got := scrape(t, c)
	var ep []string
	for _, l := range strings.SplitAfter(got, "\n") {
		if strings.HasPrefix(l, "kipvs_endpoint_") {
			ep = append(ep, l)
		}
	}
	// 10.0.0.5:30080 sorts first: its real server 10.244.1.5 (then 192.168.1.10's adds to
	// it), and 10.244.2.7 from 192.168.1.10. api's endpoint is the third: dropped.
	check(t, strings.Join(ep, ""), `
kipvs_endpoint_active_connections{endpoint="10.244.1.5:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 4
kipvs_endpoint_active_connections{endpoint="10.244.2.7:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 1
kipvs_endpoint_bytes_total{direction="in",endpoint="10.244.1.5:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 15000
kipvs_endpoint_bytes_total{direction="in",endpoint="10.244.2.7:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 20000
kipvs_endpoint_bytes_total{direction="out",endpoint="10.244.1.5:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 75000
kipvs_endpoint_bytes_total{direction="out",endpoint="10.244.2.7:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 100000
kipvs_endpoint_connections_total{endpoint="10.244.1.5:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 15
kipvs_endpoint_connections_total{endpoint="10.244.2.7:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 20
kipvs_endpoint_inactive_connections{endpoint="10.244.1.5:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 6
kipvs_endpoint_inactive_connections{endpoint="10.244.2.7:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 1
kipvs_endpoint_packets_total{direction="in",endpoint="10.244.1.5:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 150
kipvs_endpoint_packets_total{direction="in",endpoint="10.244.2.7:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 200
kipvs_endpoint_packets_total{direction="out",endpoint="10.244.1.5:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 300
kipvs_endpoint_packets_total{direction="out",endpoint="10.244.2.7:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="node_port"} 400
kipvs_endpoint_stats_dropped_total{} 1
`)
	if !strings.Contains(got, `kipvs_service_connections_total{ip_family="IPv4",namespace="default",port="https",protocol="TCP",service="api",vip_kind="cluster_ip"} 7`) {
		t.Errorf("dropping api's endpoint dropped its Service series too:\n%s", got)
	}
	// The count adds up over scrapes.
	if got := scrape(t, c); !strings.Contains(got, "kipvs_endpoint_stats_dropped_total{} 2\n") {
		t.Errorf("second scrape:\n%s", got)
	}
}

// A failed read exposes no per-Service series and counts the failure; the next good
// scrape has them all again.
func TestScrapeError(t *testing.T) {
	b := newBed(t)
	k := b.vs("default", "web", "http", "ClusterIP", "TCP", "10.96.0.10:80", "10.244.1.5:8080")
	b.stats(k, 3)
	c := b.collector(Options{Endpoints: true})
	good := scrape(t, c)
	if !strings.Contains(good, "kipvs_service_connections_total{") || !strings.Contains(good, "kipvs_endpoint_connections_total{") {
		t.Fatalf("first scrape:\n%s", good)
	}
	b.fake.SetReadFault(func() error { return errors.New("netlink: no buffer space") })
	check(t, scrape(t, c), `
kipvs_endpoint_stats_dropped_total{} 0
kipvs_service_stats_dropped_total{} 0
kipvs_service_stats_scrape_errors_total{} 1
`)
	b.fake.SetReadFault(nil)
	want := strings.Replace(good, "kipvs_service_stats_scrape_errors_total{} 0", "kipvs_service_stats_scrape_errors_total{} 1", 1)
	check(t, scrape(t, c), want)
}

// A read that takes longer than the timeout (here: the daemon's lock held by a long sync)
// fails the scrape; scrapes meanwhile share the one read in progress rather than pile up
// more; once it finishes, scrapes succeed again.
func TestScrapeTimeout(t *testing.T) {
	b := newBed(t)
	k := b.vs("default", "web", "http", "ClusterIP", "TCP", "10.96.0.10:80", "10.244.1.5:8080")
	b.stats(k, 3)
	release := make(chan struct{})
	var calls atomic.Int32
	c := b.collector(Options{Timeout: 20 * time.Millisecond, VirtualServers: func() []debugapi.VirtualServer {
		if calls.Add(1) == 1 {
			<-release
		}
		return slices.Clone(b.vss)
	}})
	for i := 1; i <= 2; i++ {
		check(t, scrape(t, c), fmt.Sprintf(`
kipvs_endpoint_stats_dropped_total{} 0
kipvs_service_stats_dropped_total{} 0
kipvs_service_stats_scrape_errors_total{} %d
`, i))
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d reads started while the first was stuck, want 1", n)
	}
	close(release)
	// The stuck read's result, or a fresh one: either way the series come back (a scrape
	// that joins the stuck read just before it ends may still time out: retry).
	want := `kipvs_service_connections_total{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 3`
	var got string
	for range 100 {
		if got = scrape(t, c); strings.Contains(got, want) {
			return
		}
	}
	t.Errorf("after the read finished:\n%s", got)
}

// The metric names, types and help follow Prometheus's conventions (promlint).
func TestLint(t *testing.T) {
	b := newBed(t)
	k := b.vs("default", "web", "http", "ClusterIP", "TCP", "10.96.0.10:80", "10.244.1.5:8080")
	b.stats(k, 3)
	mfs, err := gatherer(b.collector(Options{Endpoints: true})).Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// A label value that is not UTF-8 leaves that label set out, never the scrape's other
// series (the scrape does not fail) and never a panic.
func TestInvalidLabelValue(t *testing.T) {
	b := newBed(t)
	good := b.vs("default", "web", "http", "ClusterIP", "TCP", "10.96.0.10:80", "10.244.1.5:8080")
	bad := b.vs("default", "bad\xff", "http", "ClusterIP", "TCP", "10.96.0.11:80", "10.244.1.6:8080")
	b.stats(good, 3)
	b.stats(bad, 4)
	mfs, err := gatherer(b.collector(Options{Connections: observed(t, b.fake)})).Gather()
	if err != nil {
		t.Errorf("Gather: %v; want the invalid label set left out and the rest served", err)
	}
	n := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "kipvs_service_") && !strings.HasPrefix(mf.GetName(), "kipvs_service_stats_") {
			n += len(mf.Metric)
		}
	}
	if n != 7 {
		t.Errorf("%d service series gathered, want web's 7", n)
	}
}

// observed is a Connections that has seen the whole table of fake, as after a full sync's
// read.
func observed(t testing.TB, fake *ipvstest.Fake) *Connections {
	t.Helper()
	table, err := fake.Table()
	if err != nil {
		t.Fatal(err)
	}
	c := &Connections{}
	c.Observe(time.Now(), table)
	return c
}

// countingIPVS counts the reads a scrape makes.
type countingIPVS struct {
	ipvs.Interface
	services, destinations int
}

func (c *countingIPVS) Services() ([]ipvs.Service, error) {
	c.services++
	return c.Interface.Services()
}

func (c *countingIPVS) Destinations(k ipvs.ServiceKey) ([]ipvs.Destination, error) {
	c.destinations++
	return c.Interface.Destinations(k)
}

// TestScrapeCostIndependentOfRealServers: without endpoint metrics a scrape reads the one
// service dump and no real server, and allocates the same whether each Service has 2 or
// 200 real servers; with them, it reads every kipvs virtual server's real servers.
func TestScrapeCostIndependentOfRealServers(t *testing.T) {
	allocs := map[int]float64{}
	for _, perService := range []int{2, 200} {
		bd := benchBed(t, 200, perService)
		in := &countingIPVS{Interface: bd.fake}
		reg := gatherer(New(Options{IPVS: in, VirtualServers: func() []debugapi.VirtualServer { return bd.vss },
			Connections: observed(t, bd.fake)}))
		allocs[perService] = testing.AllocsPerRun(5, func() {
			if _, err := reg.Gather(); err != nil {
				t.Fatal(err)
			}
		})
		if in.services != 6 || in.destinations != 0 { // AllocsPerRun runs once more to warm up
			t.Errorf("%d real servers per Service: 6 scrapes made %d service dumps and %d real server dumps, want 6 and 0",
				perService, in.services, in.destinations)
		}
	}
	if allocs[200] > allocs[2]*1.05 {
		t.Errorf("a scrape allocates %.0f times with 2 real servers per Service and %.0f with 200", allocs[2], allocs[200])
	}
	bd := benchBed(t, 200, 2)
	in := &countingIPVS{Interface: bd.fake}
	reg := gatherer(New(Options{IPVS: in, Endpoints: true, VirtualServers: func() []debugapi.VirtualServer { return bd.vss }}))
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if in.services != 1 || in.destinations != 200 {
		t.Errorf("with endpoint metrics a scrape made %d service dumps and %d real server dumps, want 1 and 200", in.services, in.destinations)
	}
}

// gatherer is what the daemon serves for c: c registered on a pedantic registry (which
// checks what c collects against what it describes) and its traffic families.
func gatherer(c *Collector) prometheus.Gatherer {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return Gatherer(reg, c)
}
