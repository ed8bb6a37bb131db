package conformance

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// maxValues bounds the label values a family keeps for comparison: labels with more values
// than this (addresses, ports) are per-object, compared by name only.
const maxValues = 16

// Family is what the comparison keeps of one metric family.
type Family struct {
	Name     string
	Type     string
	Labels   []string            // label names, sorted
	Values   map[string][]string // label -> its values, sorted, for labels with few values
	Observed bool                // any counter, gauge or histogram/summary count is non-zero
}

// ReadMetrics reads a Prometheus text exposition file.
func ReadMetrics(path string) (map[string]*Family, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseMetrics(f)
}

// ParseMetrics parses a Prometheus text exposition.
func ParseMetrics(r io.Reader) (map[string]*Family, error) {
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	out := map[string]*Family{}
	for name, mf := range mfs {
		fam := &Family{Name: name, Type: strings.ToLower(mf.GetType().String()), Values: map[string][]string{}}
		labels := map[string]map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] == nil {
					labels[l.GetName()] = map[string]bool{}
				}
				labels[l.GetName()][l.GetValue()] = true
			}
			fam.Observed = fam.Observed || observed(m)
		}
		for l, vs := range labels {
			fam.Labels = append(fam.Labels, l)
			if len(vs) <= maxValues {
				fam.Values[l] = sortedKeys(vs)
			}
		}
		sort.Strings(fam.Labels)
		out[name] = fam
	}
	return out, nil
}

func observed(m *dto.Metric) bool {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue() != 0
	case m.Gauge != nil:
		return m.Gauge.GetValue() != 0
	case m.Histogram != nil:
		return m.Histogram.GetSampleCount() != 0
	case m.Summary != nil:
		return m.Summary.GetSampleCount() != 0
	case m.Untyped != nil:
		return m.Untyped.GetValue() != 0
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// MetricDiff is one finding of the comparison: Kind as oracle.MetricKinds.
type MetricDiff struct {
	Family string
	Kind   string
	Detail string
}

// CompareMetrics compares kube-proxy's families with kipvs's after the same suite: which
// each exports alone, and for the ones both export their type, label names, label values
// (for labels with few values) and whether each observed anything.
func CompareMetrics(kp, kv map[string]*Family) []MetricDiff {
	var out []MetricDiff
	for _, name := range sortedFamilies(kp, kv) {
		a, b := kp[name], kv[name]
		switch {
		case b == nil:
			out = append(out, MetricDiff{name, "only-kube-proxy", a.Type})
			continue
		case a == nil:
			out = append(out, MetricDiff{name, "only-kipvs", b.Type})
			continue
		}
		if a.Type != b.Type {
			out = append(out, MetricDiff{name, "type", fmt.Sprintf("kube-proxy %s, kipvs %s", a.Type, b.Type)})
		}
		if x, y := strings.Join(a.Labels, ","), strings.Join(b.Labels, ","); x != y {
			out = append(out, MetricDiff{name, "labels", fmt.Sprintf("kube-proxy {%s}, kipvs {%s}", x, y)})
		}
		for _, l := range a.Labels {
			va, okA := a.Values[l]
			vb, okB := b.Values[l]
			if okA && okB && strings.Join(va, ",") != strings.Join(vb, ",") {
				out = append(out, MetricDiff{name, "values", fmt.Sprintf("%s: kube-proxy %q, kipvs %q", l, va, vb)})
			}
		}
		if a.Observed != b.Observed {
			out = append(out, MetricDiff{name, "observed", fmt.Sprintf("observed something: kube-proxy %t, kipvs %t", a.Observed, b.Observed)})
		}
	}
	return out
}

func sortedFamilies(a, b map[string]*Family) []string {
	seen := map[string]bool{}
	for n := range a {
		seen[n] = true
	}
	for n := range b {
		seen[n] = true
	}
	return sortedKeys(seen)
}

// RenderMetrics writes the metrics comparison as markdown: every finding with the
// differences.yaml entry that explains it (explain returns its id, or ""); it returns the
// findings nothing explains.
func RenderMetrics(diffs []MetricDiff, kpFamilies, kvFamilies int, explain func(family, kind string) string) (string, []MetricDiff) {
	var b strings.Builder
	var unexplained []MetricDiff
	fmt.Fprintf(&b, "\n### Metrics side by side\n\n")
	fmt.Fprintf(&b, "`/metrics` of each proxy after its run (kube-proxy %d families, kipvs %d), compared by family, type, label names, "+
		"label values (labels with at most %d values) and whether anything was observed; each finding is explained by an entry "+
		"of e2e/oracle/differences.yaml ([differences-from-kube-proxy.md](differences-from-kube-proxy.md)).\n\n", kpFamilies, kvFamilies, maxValues)
	if len(diffs) == 0 {
		b.WriteString("No difference.\n")
		return b.String(), nil
	}
	b.WriteString("| family | finding | detail | explained by |\n|---|---|---|---|\n")
	for _, d := range diffs {
		id := explain(d.Family, d.Kind)
		if id == "" {
			unexplained = append(unexplained, d)
			id = "**UNEXPLAINED**"
		} else {
			id = "`" + id + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.Family, d.Kind, escape(d.Detail), id)
	}
	return b.String(), unexplained
}

// SyncFigure is one proxy's sync work during a run, per IP family, from its own
// /metrics saved after the suite: how many syncs and how long they took in all
// (kubeproxy_sync_proxy_rules_duration_seconds), and how long a change took from the
// API object's change to the kernel (kubeproxy_network_programming_duration_seconds).
type SyncFigure struct {
	Family            string // IPv4, IPv6
	Syncs             uint64
	SyncTotal         time.Duration
	Programmed        uint64 // changes observed by network programming duration
	ProgrammingTotal  time.Duration
	ProgrammingOver30 uint64 // of those, the ones that took more than 30 s
	Has30             bool   // the histogram has a 30 s bucket (else ProgrammingOver30 is unknown)
}

// Sync figures' metric families.
const (
	syncDurationFamily = "kubeproxy_sync_proxy_rules_duration_seconds"
	programmingFamily  = "kubeproxy_network_programming_duration_seconds"
)

// ReadSyncFigures reads a saved /metrics file's sync figures by ip_family, sorted.
func ReadSyncFigures(path string) ([]SyncFigure, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	by := map[string]*SyncFigure{}
	get := func(m *dto.Metric) *SyncFigure {
		fam := "-"
		for _, l := range m.GetLabel() {
			if l.GetName() == "ip_family" {
				fam = l.GetValue()
			}
		}
		if by[fam] == nil {
			by[fam] = &SyncFigure{Family: fam}
		}
		return by[fam]
	}
	for _, m := range mfs[syncDurationFamily].GetMetric() {
		h := m.GetHistogram()
		s := get(m)
		s.Syncs += h.GetSampleCount()
		s.SyncTotal += seconds(h.GetSampleSum())
	}
	for _, m := range mfs[programmingFamily].GetMetric() {
		h := m.GetHistogram()
		s := get(m)
		s.Programmed += h.GetSampleCount()
		s.ProgrammingTotal += seconds(h.GetSampleSum())
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == 30 {
				s.Has30 = true
				s.ProgrammingOver30 += h.GetSampleCount() - b.GetCumulativeCount()
			}
		}
	}
	out := make([]SyncFigure, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Family < out[j].Family })
	return out, nil
}

// mean is total/n, rounded for a table, or "-" with nothing observed.
func mean(total time.Duration, n uint64) string {
	if n == 0 {
		return "-"
	}
	return roundForTable(total / time.Duration(n)).String()
}

func roundForTable(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
