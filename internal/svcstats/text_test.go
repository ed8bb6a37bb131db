package svcstats

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
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
			t.Fatalf("seed %d: WriteText differs from expfmt:\n--- WriteText ---\n%s--- expfmt ---\n%s", seed, got.String(), want.String())
		}
		if !bytes.Contains(got.Bytes(), []byte("kipvs_service_bytes_total{")) {
			t.Fatalf("seed %d: no traffic series:\n%s", seed, got.String())
		}
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
