package svcstats

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
)

// DefaultTimeout bounds one scrape's kernel reads: well within Prometheus's default scrape
// timeout (10 s), and long enough for the service dump of 10,000 Services while a periodic
// full sync dumps every real server (2 s timed out under qemu TCG).
const DefaultTimeout = 5 * time.Second

// defaultMaxEndpoints is the default bound on endpoint label sets per scrape.
const defaultMaxEndpoints = 10000

// DefaultMaxServices is the default bound on Service label sets (Service port, family, VIP
// kind; 7 series each) per scrape (--kipvs-max-service-series counts their series): twice
// the 10,000 Services whose scrape docs/performance.md measures, each with a cluster IP,
// while one Service of 32,767 ports (which the apiserver accepts) stays within about 36 MB
// of text at the longest names instead of 60 MB.
const DefaultMaxServices = 20000

// SetsForSeries is the MaxServices that keeps a scrape within series kipvs_service_*
// series (--kipvs-max-service-series; 7 per label set, at least one set); 0: no limit.
func SetsForSeries(series int) int {
	if series <= 0 {
		return math.MaxInt
	}
	return max(1, series/numSeries)
}

// Options configure New.
type Options struct {
	// IPVS is read at scrape time. Best a client of its own (its own socket and lock), so
	// a scrape never waits for a sync's batch nor delays it.
	IPVS ipvs.Interface
	// VirtualServers returns the virtual servers kipvs programs with the Service port each
	// belongs to (the daemon's VirtualServers, also served on /debug/kipvs/virtualservers).
	VirtualServers func() []debugapi.VirtualServer
	// Timeout bounds a scrape's reads (default DefaultTimeout).
	Timeout time.Duration
	// Endpoints enables the kipvs_endpoint_* series (--kipvs-endpoint-metrics). A scrape
	// then dumps the real servers of every kipvs virtual server (one request each), and the
	// Service-level connection gauges come from those dumps too.
	Endpoints bool
	// Connections, without Endpoints, is where the Service-level connection gauges come
	// from (the last full read of the table); nil, or before its first read: the scrape
	// has no connection gauges.
	Connections *Connections
	// MaxEndpoints bounds the endpoint label sets per scrape (default defaultMaxEndpoints).
	MaxEndpoints int
	// MaxServices bounds the Service label sets per scrape (default DefaultMaxServices):
	// the first in label order are exported, the rest counted in
	// kipvs_service_stats_dropped_total.
	MaxServices int
	// Logger, if set, logs failed scrapes (the first of a run of failures at Info).
	Logger *zap.Logger
}

// Label names.
var (
	serviceLabels  = []string{"namespace", "service", "port", "protocol", "ip_family", "vip_kind"}
	endpointLabels = append(append([]string(nil), serviceLabels...), "endpoint")
)

// descs are the descriptors of one family set (service or endpoint).
type descs struct {
	conns, packets, bytes, active, inactive *prometheus.Desc
	// fams are the five families as Gather writes them, in name order.
	fams [5]familySpec
}

// familySpec is one family of a family set and the series of a label set that go in it
// (see numSeries for their order).
type familySpec struct {
	name, help string
	typ        dto.MetricType
	series     []int
}

func newDescs(scope, what string, labels []string) descs {
	withDir := append(append([]string(nil), labels...), "direction")
	name := func(n string) string { return "kipvs_" + scope + "_" + n }
	spec := func(n, help string, typ dto.MetricType, series ...int) familySpec {
		return familySpec{name: name(n), help: help, typ: typ, series: series}
	}
	c, g := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	fams := [5]familySpec{
		spec("active_connections", "Established connections IPVS tracks for "+what+".", g, 5),
		spec("bytes_total", "Bytes IPVS forwarded for "+what+"; direction in is client to endpoint, out is endpoint to client.", c, 3, 4),
		spec("connections_total", "Connections IPVS scheduled to "+what+" (IPVS counters at scrape time).", c, 0),
		spec("inactive_connections", "Connections in any other state IPVS tracks for "+what+".", g, 6),
		spec("packets_total", "Packets IPVS forwarded for "+what+"; direction in is client to endpoint, out is endpoint to client.", c, 1, 2),
	}
	desc := func(i int, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(fams[i].name, fams[i].help, labels, nil)
	}
	return descs{conns: desc(2, labels), packets: desc(4, withDir), bytes: desc(1, withDir), active: desc(0, labels),
		inactive: desc(3, labels), fams: fams}
}

// Collector reads the traffic counters at scrape time. Register it on the daemon's
// registry (its Describe reserves every family's name; it collects its own two counters)
// and serve Gatherer(registry, collector): Gather writes the traffic families itself,
// sorted, bypassing the registry's checks of each series (70,000 of them at 10,000
// Services), which were most of a scrape's cost.
type Collector struct {
	opts    Options
	svc, ep descs
	// svcLayout and epLayout order the label pairs of the service and endpoint series.
	svcLayout, epLayout layouts
	errors              prometheus.Counter
	dropped             prometheus.Counter
	svcDropped          prometheus.Counter
	mu                  sync.Mutex
	inflight            *call       // the read in progress; concurrent scrapes share it
	failing             bool        // the last scrape failed (for logging only)
	plan                *scrapePlan // the last scrape's (see planFor)
	plansBuilt          int         // how many plans were built (tests)
}

// call is one read of the kernel, shared by the scrapes that wait for it.
type call struct {
	done chan struct{}
	snap *snapshot
	err  error
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a collector; it reads nothing until it is collected.
func New(o Options) *Collector {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxEndpoints <= 0 {
		o.MaxEndpoints = defaultMaxEndpoints
	}
	if o.MaxServices <= 0 {
		o.MaxServices = DefaultMaxServices
	}
	return &Collector{
		opts:      o,
		svc:       newDescs("service", "the Service port's virtual servers", serviceLabels),
		ep:        newDescs("endpoint", "the endpoint as a real server of the Service port's virtual servers", endpointLabels),
		svcLayout: newLayouts(serviceLabels),
		epLayout:  newLayouts(endpointLabels),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kipvs_service_stats_scrape_errors_total",
			Help: "Scrapes that exposed no kipvs_service_* series because reading the IPVS counters failed or took longer than the timeout."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "kipvs_endpoint_stats_dropped_total",
			Help: fmt.Sprintf("Endpoint label sets left out of scrapes because of the limit of %d per scrape (summed over scrapes).", o.MaxEndpoints)}),
		svcDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "kipvs_service_stats_dropped_total",
			Help: fmt.Sprintf("Service label sets (7 series each) left out of scrapes because of the limit of %d per scrape (summed over scrapes).", o.MaxServices)}),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []descs{c.svc, c.ep} {
		ch <- d.conns
		ch <- d.packets
		ch <- d.bytes
		ch <- d.active
		ch <- d.inactive
	}
	c.errors.Describe(ch)
	c.dropped.Describe(ch)
	c.svcDropped.Describe(ch)
}

// Collect implements prometheus.Collector: the counts of failed scrapes and dropped
// endpoints. The traffic series come from Gather.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.errors.Collect(ch)
	c.dropped.Collect(ch)
	c.svcDropped.Collect(ch)
}

// Gather reads the kernel (or waits for a read in progress), at most Timeout, and returns
// the traffic families, each sorted as a registry sorts them. A failed read returns none
// (and counts it), never an error: the rest of the scrape goes on.
func (c *Collector) Gather() []*dto.MetricFamily {
	snap, err := c.read()
	if err != nil {
		c.errors.Inc()
		c.logFailure(err)
		return nil
	}
	c.logSuccess()
	return c.families(snap)
}

func (c *Collector) logFailure(err error) {
	c.mu.Lock()
	first := !c.failing
	c.failing = true
	c.mu.Unlock()
	if c.opts.Logger == nil {
		return
	}
	if first {
		c.opts.Logger.Info("could not read the IPVS counters for the Service traffic metrics; this scrape has none", zap.Error(err))
	} else {
		c.opts.Logger.Debug("could not read the IPVS counters for the Service traffic metrics", zap.Error(err))
	}
}

func (c *Collector) logSuccess() {
	c.mu.Lock()
	c.failing = false
	c.mu.Unlock()
}

// errTimeout is the error of a scrape that waited Timeout for the kernel.
var errTimeout = errors.New("timed out")

// read returns a snapshot: it starts a read, or joins the one in progress, and waits for
// it at most Timeout. A read left behind finishes in the background (each kernel round
// trip is bounded by the client's own timeout) and is given to the scrapes waiting then.
func (c *Collector) read() (*snapshot, error) {
	c.mu.Lock()
	cl := c.inflight
	if cl == nil {
		cl = &call{done: make(chan struct{})}
		c.inflight = cl
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
		go func() {
			defer cancel()
			cl.snap, cl.err = c.gather(ctx)
			c.mu.Lock()
			c.inflight = nil
			c.mu.Unlock()
			close(cl.done)
		}()
	}
	c.mu.Unlock()
	t := time.NewTimer(c.opts.Timeout)
	defer t.Stop()
	select {
	case <-cl.done:
		return cl.snap, cl.err
	case <-t.C:
		return nil, fmt.Errorf("read IPVS counters: %w after %v", errTimeout, c.opts.Timeout)
	}
}

// group is one (Service port, family, VIP kind) and its sums.
type group struct {
	labels           []string // serviceLabels' values
	stats            ipvs.Stats
	active, inactive uint64
	seen             bool // a virtual server of the group exists in the kernel
	conns            bool // active and inactive are known
}

// endpoint is one real server of a group, summed over the group's virtual servers.
type endpoint struct {
	group            int
	addr             netip.AddrPort
	stats            ipvs.Stats
	active, inactive uint64
}

type epKey struct {
	group int
	addr  netip.AddrPort
}

// snapshot is what one read found.
type snapshot struct {
	plan      *scrapePlan // groups[i] is plan's group i
	groups    []group
	endpoints []endpoint
	dropped   int
}

// protocols maps the virtual server list's protocol names to IPVS protocols.
var protocols = map[string]inet.Protocol{"TCP": inet.TCP, "UDP": inet.UDP, "SCTP": inet.SCTP}

// vipKind is the vip_kind label value of a virtual server kind.
func vipKind(k string) string {
	switch k {
	case "ClusterIP":
		return "cluster_ip"
	case "NodePort":
		return "node_port"
	case "ExternalIP":
		return "external_ip"
	case "LoadBalancer":
		return "load_balancer"
	}
	return k
}

type groupKey struct {
	namespace, name, port, protocol, kind string
	family                                inet.Family
}

// gather reads the mapping and the kernel and sums the counters.
func (c *Collector) gather(ctx context.Context) (*snapshot, error) {
	vss := c.opts.VirtualServers()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read the virtual servers kipvs programs: %w", err)
	}
	plan := c.planFor(vss)
	byKey := plan.byKey
	snap := &snapshot{plan: plan, groups: make([]group, len(plan.labels))}
	for i := range snap.groups {
		snap.groups[i].labels = plan.labels[i]
	}
	svcs, err := c.opts.IPVS.Services()
	if err != nil {
		return nil, fmt.Errorf("list IPVS virtual servers: %w", err)
	}
	if !c.opts.Endpoints {
		c.fromServiceDump(snap, svcs, byKey)
		return snap, nil
	}
	eps := map[epKey]int{}
	for _, s := range svcs {
		gi, ok := byKey[s.ServiceKey]
		if !ok {
			continue // not kipvs's, or not yet in its desired state
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read IPVS counters: %w", err)
		}
		dests, err := c.opts.IPVS.Destinations(s.ServiceKey)
		if kerr.IsNotFound(err) {
			continue // deleted since the service dump
		}
		if err != nil {
			return nil, fmt.Errorf("list real servers of %s: %w", s.ServiceKey, err)
		}
		g := &snap.groups[gi]
		g.seen, g.conns = true, true
		addStats(&g.stats, s.Stats)
		for i := range dests {
			d := &dests[i]
			g.active += uint64(d.ActiveConns)
			g.inactive += uint64(d.InactiveConns)
			ek := epKey{group: gi, addr: d.AddrPort()}
			ei, ok := eps[ek]
			if !ok {
				if len(snap.endpoints) >= c.opts.MaxEndpoints {
					snap.dropped++
					eps[ek] = -1
					continue
				}
				ei = len(snap.endpoints)
				eps[ek] = ei
				snap.endpoints = append(snap.endpoints, endpoint{group: gi, addr: ek.addr})
			}
			if ei < 0 {
				continue
			}
			e := &snap.endpoints[ei]
			addStats(&e.stats, d.Stats)
			e.active += uint64(d.ActiveConns)
			e.inactive += uint64(d.InactiveConns)
		}
	}
	return snap, nil
}

// fromServiceDump fills snap's groups from the service dump alone: the counters are the
// virtual servers' own, the connection gauges those the last full read found (none before
// it); no real server is read.
func (c *Collector) fromServiceDump(snap *snapshot, svcs []ipvs.Service, byKey map[ipvs.ServiceKey]int) {
	conns := c.opts.Connections.snapshot()
	for i := range svcs {
		s := &svcs[i]
		gi, ok := byKey[s.ServiceKey]
		if !ok {
			continue // not kipvs's, or not yet in its desired state
		}
		g := &snap.groups[gi]
		g.seen = true
		addStats(&g.stats, s.Stats)
		if conns == nil {
			continue
		}
		g.conns = true
		cc := conns.byVS[s.ServiceKey]
		g.active += cc.active
		g.inactive += cc.inactive
	}
}

func addStats(dst, src *ipvs.Stats) {
	if src == nil {
		return
	}
	dst.Conns += src.Conns
	dst.InPkts += src.InPkts
	dst.OutPkts += src.OutPkts
	dst.InBytes += src.InBytes
	dst.OutBytes += src.OutBytes
}

// families writes a snapshot's series.
func (c *Collector) families(snap *snapshot) []*dto.MetricFamily {
	svc, ep := c.sets(snap)
	return write(write(nil, &c.svc, svc), &c.ep, ep)
}

// sets returns the label sets of a snapshot's service and endpoint series, each sorted as
// a registry sorts a family: by label values in label name order.
func (c *Collector) sets(snap *snapshot) (svc, ep []*labelSet) {
	// The direction label pairs, shared by every series of this scrape.
	values := &[2]string{"in", "out"}
	name := c.svcLayout.dir.names[len(serviceLabels)]
	dir := &[2]dto.LabelPair{{Name: name, Value: &values[0]}, {Name: name, Value: &values[1]}}
	svc = make([]*labelSet, 0, len(snap.plan.order))
	for _, gi := range snap.plan.order {
		if g := &snap.groups[gi]; g.seen {
			svc = c.labelSet(svc, &c.svc, &c.svcLayout, dir, g.labels, &g.stats, g.conns, g.active, g.inactive)
		}
	}
	c.countServicesDropped(snap)
	if snap.dropped > 0 {
		c.dropped.Add(float64(snap.dropped))
	}
	ep = make([]*labelSet, 0, len(snap.endpoints))
	for i := range snap.endpoints {
		e := &snap.endpoints[i]
		labels := append(append(make([]string, 0, len(endpointLabels)+1), snap.groups[e.group].labels...), e.addr.String())
		ep = c.labelSet(ep, &c.ep, &c.epLayout, dir, labels, &e.stats, true, e.active, e.inactive)
	}
	sortSets(svc)
	sortSets(ep)
	return svc, ep
}

// countServicesDropped counts the groups of a snapshot found in the kernel but beyond the
// plan's limit.
func (c *Collector) countServicesDropped(snap *snapshot) {
	n := 0
	for _, gi := range snap.plan.beyond {
		if snap.groups[gi].seen {
			n++
		}
	}
	if n > 0 {
		c.svcDropped.Add(float64(n))
	}
}

func sortSets(sets []*labelSet) {
	slices.SortFunc(sets, func(a, b *labelSet) int {
		for i := range a.lists[plainLabels] {
			if c := strings.Compare(a.lists[plainLabels][i].GetValue(), b.lists[plainLabels][i].GetValue()); c != 0 {
				return c
			}
		}
		return 0
	})
}

// write appends to out d's families of the series of sets (sorted: sortSets; a family none
// of them has is left out), direction in before out. The series of one family share one
// allocation.
func write(out []*dto.MetricFamily, d *descs, sets []*labelSet) []*dto.MetricFamily {
	for i := range d.fams {
		f := &d.fams[i]
		n := 0
		for _, ls := range sets {
			for _, si := range f.series {
				if si < ls.emit {
					n++
				}
			}
		}
		if n == 0 {
			continue
		}
		ms := make([]dto.Metric, n)
		ptrs := make([]*dto.Metric, 0, n)
		for _, si := range f.series {
			for _, ls := range sets {
				if si < ls.emit {
					m := &ms[len(ptrs)]
					_ = ls.series[si].Write(m)
					ptrs = append(ptrs, m)
				}
			}
		}
		out = append(out, &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: f.typ.Enum(), Metric: ptrs})
	}
	return out
}

// labelSet appends to sets one label set's five families (seven series; without gauges,
// the counters' three families, five series); a label set with a value that is not UTF-8
// is left out (Kubernetes names are ASCII; the file source checks them). A scrape keeps
// every series
// of a scrape until the scrape is written (70,000 at 10,000 Services), so one label set's
// series, label pairs and values are one allocation, and the series share the label pairs.
func (c *Collector) labelSet(sets []*labelSet, d *descs, l *layouts, dir *[2]dto.LabelPair, labels []string, st *ipvs.Stats, gauges bool, active, inactive uint64) []*labelSet {
	if !c.validLabels(labels) {
		return sets
	}
	ls := &labelSet{descs: d, values: seriesValues(st, active, inactive)}
	n := len(labels)
	for j := range labels {
		ls.pairs[j].Name, ls.pairs[j].Value = l.plain.names[j], &labels[j]
	}
	ptrs := ls.ptrs[:0]
	ptrs, ls.lists[plainLabels] = l.plain.fill(ptrs, ls.pairs[:n], nil)
	ptrs, ls.lists[inLabels] = l.dir.fill(ptrs, ls.pairs[:n], &dir[0])
	_, ls.lists[outLabels] = l.dir.fill(ptrs, ls.pairs[:n], &dir[1])
	ls.emit = numSeries
	if !gauges {
		ls.emit = numCounters
	}
	for i := range ls.series[:ls.emit] {
		ls.series[i] = series{set: ls, index: uint8(i)}
	}
	return append(sets, ls)
}

// validLabels reports whether every label value is UTF-8 (logged when not).
func (c *Collector) validLabels(labels []string) bool {
	for _, v := range labels {
		if !utf8.ValidString(v) {
			if c.opts.Logger != nil {
				c.opts.Logger.Debug("traffic series left out: a label value is not valid UTF-8", zap.Strings("labels", labels))
			}
			return false
		}
	}
	return true
}

// seriesValues are a label set's seven values (see numSeries).
func seriesValues(st *ipvs.Stats, active, inactive uint64) [numSeries]float64 {
	return [numSeries]float64{float64(st.Conns), float64(st.InPkts), float64(st.OutPkts), float64(st.InBytes), float64(st.OutBytes),
		float64(active), float64(inactive)}
}

// The seven series of a label set, in order: connections, packets in, packets out, bytes in,
// bytes out (counters), active and inactive connections (gauges).
const numSeries = 7

// numCounters is how many of them are counters.
const numCounters = 5

// The label lists of a label set: without direction, with direction in, with out.
const (
	plainLabels = iota
	inLabels
	outLabels
)

// maxLabels is the most labels a label set has (the endpoint series').
const maxLabels = 7

// labelSet is one label set's seven series with their label pairs and values.
type labelSet struct {
	descs  *descs
	pairs  [maxLabels]dto.LabelPair // in descriptor order
	ptrs   [3*maxLabels + 2]*dto.LabelPair
	lists  [3][]*dto.LabelPair // the label lists (plain, in, out), in ptrs
	values [numSeries]float64
	series [numSeries]series
	emit   int // how many of series to send
}

// series is one constant sample of a label set (what prometheus.NewConstMetric makes).
type series struct {
	set   *labelSet
	index uint8
}

func (s *series) Desc() *prometheus.Desc {
	d := s.set.descs
	switch s.index {
	case 0:
		return d.conns
	case 1, 2:
		return d.packets
	case 3, 4:
		return d.bytes
	case 5:
		return d.active
	}
	return d.inactive
}

func (s *series) Write(m *dto.Metric) error {
	v := &s.set.values[s.index]
	switch s.index {
	case 0:
		m.Label, m.Counter = s.set.lists[plainLabels], &dto.Counter{Value: v}
	case 1, 3:
		m.Label, m.Counter = s.set.lists[inLabels], &dto.Counter{Value: v}
	case 2, 4:
		m.Label, m.Counter = s.set.lists[outLabels], &dto.Counter{Value: v}
	default:
		m.Label, m.Gauge = s.set.lists[plainLabels], &dto.Gauge{Value: v}
	}
	return nil
}

// layout turns label values (in a descriptor's order) into label pairs sorted by name,
// as the registry wants them.
type layout struct {
	names []*string // in descriptor order
	order []int     // descriptor positions in name order
}

func newLayout(names []string) layout {
	l := layout{order: make([]int, len(names))}
	for i := range names {
		l.names = append(l.names, &names[i])
		l.order[i] = i
	}
	slices.SortFunc(l.order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	return l
}

// fill appends to dst the label pairs in name order (pairs in descriptor order, then
// extra, if not nil, as the last descriptor label) and returns dst and what it appended.
func (l *layout) fill(dst []*dto.LabelPair, pairs []dto.LabelPair, extra *dto.LabelPair) ([]*dto.LabelPair, []*dto.LabelPair) {
	start := len(dst)
	for _, j := range l.order {
		if j < len(pairs) {
			dst = append(dst, &pairs[j])
		} else {
			dst = append(dst, extra)
		}
	}
	return dst, dst[start:len(dst):len(dst)]
}

// layouts are one scope's label layouts, without and with direction.
type layouts struct{ plain, dir layout }

func newLayouts(labels []string) layouts {
	return layouts{plain: newLayout(labels), dir: newLayout(append(append([]string(nil), labels...), "direction"))}
}
