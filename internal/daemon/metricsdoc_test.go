package daemon

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/metrics"
	"github.com/kipvs/kipvs/internal/svcstats"
)

// recordingRegisterer registers on a registry and keeps every collector, so the test can
// Describe the families that have no series yet (a vector nobody has touched).
type recordingRegisterer struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.reg.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recordingRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// metricFamily is one metric family: its type and label names, as the registry declares it and
// as docs/metrics.md lists it.
type metricFamily struct {
	typ    string   // counter, gauge, histogram, summary
	labels []string // sorted; none: nil
}

func (f metricFamily) String() string {
	l := "-"
	if len(f.labels) > 0 {
		l = strings.Join(f.labels, ",")
	}
	return f.typ + " {" + l + "}"
}

var variableLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)

// collectorType is the metric type of the client_golang collectors kipvs builds families
// with ("" for the others, whose type comes from a scrape). Gauge before Counter: a
// Gauge has a Counter's methods too. A GaugeFunc cannot be told from any Metric; it always
// has a series, so its scrape tells.
func collectorType(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case prometheus.Gauge:
		return "gauge"
	case prometheus.Counter:
		return "counter"
	case prometheus.Histogram:
		return "histogram"
	}
	return ""
}

// registryFamilies is every family `kipvs run` serves on /metrics: the families the daemon's
// registry declares (metrics.New, the svcstats collector; cmd/kipvs adds client-go's
// rest_client_* to the same registry), each with the labels its descriptor declares and
// its type from a scrape of a daemon that has synced a Service with
// --kipvs-endpoint-metrics, or, for a vector that has no series yet, from its collector.
func registryFamilies(t *testing.T) map[string]metricFamily {
	t.Helper()
	// What the descriptors declare.
	rec := &recordingRegisterer{reg: prometheus.NewRegistry()}
	metrics.New(rec)
	metrics.NewRESTClient(rec)
	rec.MustRegister(svcstats.New(svcstats.Options{}))
	got := map[string]metricFamily{}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 256)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			name := s[strings.Index(s, `fqName: "`)+len(`fqName: "`):]
			name = name[:strings.Index(name, `"`)]
			f := metricFamily{typ: collectorType(c)}
			if m := variableLabels.FindStringSubmatch(s); m != nil && m[1] != "" {
				f.labels = strings.Split(m[1], ",")
				slices.Sort(f.labels)
			}
			got[name] = f
		}
	}

	// What a scrape of the real daemon serves.
	reg := prometheus.NewRegistry()
	metrics.NewRESTClient(reg)
	cfg := testConfig(t)
	cfg.Kipvs.EndpointMetrics = true
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(oneService), 0o644); err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t)
	cfg.Kipvs.SourceFile = path
	d := startDaemon(t, cfg, log, newFakeNode().deps(startFileSource(t, t.Context(), path, log), reg))
	mfs, err := d.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		f := metricFamily{typ: strings.ToLower(mf.GetType().String())}
		if len(mf.Metric) > 0 {
			for _, l := range mf.Metric[0].Label {
				f.labels = append(f.labels, l.GetName())
			}
			slices.Sort(f.labels)
		}
		if declared, ok := got[mf.GetName()]; ok && declared.typ != "" {
			if declared.typ != f.typ {
				t.Errorf("%s: declared %s, scraped %s", mf.GetName(), declared, f)
			}
			if len(mf.Metric) > 0 && !slices.Equal(declared.labels, f.labels) {
				t.Errorf("%s: declared %s, scraped %s", mf.GetName(), declared, f)
			}
		}
		got[mf.GetName()] = f
	}
	for name, f := range got {
		if f.typ == "" {
			t.Errorf("%s: no type: neither its collector nor a scrape tells it", name)
		}
	}
	return got
}

// docRow is `| `name` | type | `label`, `label` | ...` in docs/metrics.md; a name ending in
// `*` stands for every family with that prefix (the go_* and process_* sets).
var docRow = regexp.MustCompile("^\\| `([a-z_:*]+)` \\| (counter|gauge|histogram|summary|various) \\| ([^|]*) \\|")
var docLabel = regexp.MustCompile("`([a-z_]+)`")

// docs/metrics.md lists every family /metrics serves, with its type and labels, and nothing
// else: a family added, removed, retyped or relabelled in the code fails here until the
// page says so.
func TestMetricsDocMatchesRegistry(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]metricFamily{}
	var prefixes []string
	for _, l := range strings.Split(string(text), "\n") {
		m := docRow.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if p, ok := strings.CutSuffix(m[1], "*"); ok {
			prefixes = append(prefixes, p)
			continue
		}
		f := metricFamily{typ: m[2]}
		for _, lm := range docLabel.FindAllStringSubmatch(m[3], -1) {
			f.labels = append(f.labels, lm[1])
		}
		slices.Sort(f.labels)
		if _, dup := doc[m[1]]; dup {
			t.Errorf("docs/metrics.md lists %s twice", m[1])
		}
		doc[m[1]] = f
	}
	reg := registryFamilies(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range reg {
			if !yield(n) {
				return
			}
		}
	})
	usedPrefix := map[string]bool{}
	for _, n := range names {
		want, listed := doc[n]
		if !listed {
			i := slices.IndexFunc(prefixes, func(p string) bool { return strings.HasPrefix(n, p) })
			if i < 0 {
				t.Errorf("docs/metrics.md does not list %s (%s)", n, reg[n])
			} else {
				usedPrefix[prefixes[i]] = true
			}
			continue
		}
		if got := reg[n]; got.String() != want.String() {
			t.Errorf("docs/metrics.md: %s is %s, the registry has %s", n, want, got)
		}
	}
	for n := range doc {
		if _, ok := reg[n]; !ok {
			t.Errorf("docs/metrics.md lists %s, which the registry does not have", n)
		}
	}
	for _, p := range prefixes {
		if !usedPrefix[p] {
			t.Errorf("docs/metrics.md lists %s*, and no family has that prefix", p)
		}
	}
}
