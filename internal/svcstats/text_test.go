package svcstats

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// WriteText writes exactly what expfmt's text encoder writes for what Gather returns (the
// path /metrics took before): the same bytes, over random nodes (Services with and without
// traffic, several ports, real servers with connections, counters of every size), with and
// without the endpoint series, the registry's own families interleaved by name.
func TestWriteTextMatchesExpfmt(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		b := newBed(t)
		for i := range 1 + rng.IntN(12) {
			var dests []string
			for j := range rng.IntN(4) {
				dests = append(dests, fmt.Sprintf("10.244.%d.%d:8080", i, j+1))
			}
			proto := []string{"TCP", "UDP", "SCTP"}[rng.IntN(3)]
			kind := []string{"ClusterIP", "NodePort", "LoadBalancer", "ExternalIP"}[rng.IntN(4)]
			k := b.vs(fmt.Sprintf("ns-%d", rng.IntN(3)), fmt.Sprintf("svc-%d", i), []string{"http", "", "dns-udp"}[rng.IntN(3)],
				kind, proto, fmt.Sprintf("10.96.0.%d:%d", 10+i, 80+rng.IntN(3)), dests...)
			if rng.IntN(3) > 0 {
				b.stats(k, []uint64{1, 0, 7, 123456789, 1 << 53, math.MaxUint64}[rng.IntN(6)])
			}
			for _, d := range dests {
				b.dest(k, d, uint64(rng.IntN(1e6)), uint32(rng.IntN(3)), uint32(rng.IntN(3)))
			}
		}
		c := b.collector(Options{Endpoints: seed%2 == 0, Connections: observed(t, b.fake)})
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		// Families of the registry's before, between and after the traffic families.
		for _, name := range []string{"a_first_total", "kipvs_proxy_sync_total", "kipvs_sync_total", "zz_last_total"} {
			reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "A family of the registry's."}))
		}
		g := Gatherer(reg, c)
		compareText(t, g, fmt.Sprintf("seed %d", seed))
		// Scraped again unchanged (the plan reused), then after the virtual servers
		// changed: one gone, one more, one of another Service port (a new plan), and
		// again with new counters only.
		compareText(t, g, fmt.Sprintf("seed %d, again", seed))
		b.vss = b.vss[1:]
		k := b.vs("ns-new", "svc-new", "http", "ClusterIP", "TCP", "10.96.1.1:80", "10.244.9.1:8080")
		b.stats(k, 42)
		if len(b.vss) > 1 {
			b.vss[0].PortName = "renamed"
		}
		compareText(t, g, fmt.Sprintf("seed %d, changed", seed))
		b.stats(k, 43)
		compareText(t, g, fmt.Sprintf("seed %d, new counters", seed))
	}
}

// compareText checks that g.WriteText writes what expfmt writes for g.Gather.
func compareText(t *testing.T, g TextGatherer, what string) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var want, got bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&want, mf); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.WriteText(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("%s: WriteText differs from expfmt:\n--- WriteText ---\n%s--- expfmt ---\n%s", what, got.String(), want.String())
	}
	if !bytes.Contains(got.Bytes(), []byte("kipvs_service_bytes_total{")) {
		t.Fatalf("%s: no traffic series:\n%s", what, got.String())
	}
}

// A scrape reuses what it derives from the virtual servers (their groups, order and
// label text) while they stay the same, real server counts aside, and derives it again
// when they change.
func TestScrapePlanReused(t *testing.T) {
	b := newBed(t)
	b.vs("ns", "a", "http", "ClusterIP", "TCP", "10.96.0.1:80", "10.244.0.1:8080")
	b.vs("ns", "b", "http", "ClusterIP", "TCP", "10.96.0.2:80", "10.244.0.2:8080")
	c := b.collector(Options{Connections: observed(t, b.fake)})
	g := Gatherer(prometheus.NewRegistry(), c)
	text := func() string {
		var w bytes.Buffer
		if err := g.WriteText(&w); err != nil {
			t.Fatal(err)
		}
		return w.String()
	}
	built := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.plansBuilt
	}
	first := text()
	text()
	b.vss[1].Destinations = 5
	if again := text(); again != first || built() != 1 {
		t.Fatalf("unchanged virtual servers: %d plans built, want 1; text changed: %t", built(), again != first)
	}
	b.vs("ns", "c", "http", "ClusterIP", "TCP", "10.96.0.3:80")
	if out := text(); built() != 2 || !strings.Contains(out, `service="c"`) {
		t.Fatalf("a new virtual server: %d plans built, want 2; Service c in the text: %t", built(), strings.Contains(out, `service="c"`))
	}
	b.vss[0].Name = "a2"
	if out := text(); built() != 3 || !strings.Contains(out, `service="a2"`) || strings.Contains(out, `service="a"`) {
		t.Fatalf("a renamed Service port: %d plans built, want 3:\n%s", built(), out)
	}
}

// Label values and help texts are escaped as the text format wants.
func TestAppendEscaped(t *testing.T) {
	for _, c := range []struct {
		in, label, help string
	}{
		{`plain`, `plain`, `plain`},
		{"a\\b\"c\nd", `a\\b\"c\nd`, "a\\\\b\"c\\nd"},
	} {
		if got := string(appendEscaped(nil, c.in, true)); got != c.label {
			t.Errorf("label %q: %q, want %q", c.in, got, c.label)
		}
		if got := string(appendEscaped(nil, c.in, false)); got != c.help {
			t.Errorf("help %q: %q, want %q", c.in, got, c.help)
		}
	}
	for _, f := range []float64{0, 1, -1, 2, 1e6, 1234567, 1 << 53, math.MaxUint64, 0.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
		var want bytes.Buffer
		// expfmt's own formatting of a sample value, through a one-series family.
		m := prometheus.MustNewConstMetric(prometheus.NewDesc("x", "h", nil, nil), prometheus.GaugeValue, f)
		reg := prometheus.NewRegistry()
		reg.MustRegister(constCollector{m})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := expfmt.MetricFamilyToText(&want, mfs[0]); err != nil {
			t.Fatal(err)
		}
		if got := "# HELP x h\n# TYPE x gauge\nx " + string(appendFloat(nil, f)) + "\n"; got != want.String() {
			t.Errorf("%v: %q, want %q", f, got, want.String())
		}
	}
}

type constCollector struct{ m prometheus.Metric }

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.m.Desc() }
func (c constCollector) Collect(ch chan<- prometheus.Metric) { ch <- c.m }
