package svcstats

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/kipvs/kipvs/internal/ipvs"
)

// TextGatherer is what Gatherer returns: a prometheus.Gatherer that also writes everything
// it gathers in the text format (0.0.4) itself (WriteText), which /metrics serves to
// clients that ask for text (internal/server).
type TextGatherer interface {
	prometheus.Gatherer
	WriteText(w io.Writer) error
}

type textGatherer struct {
	reg prometheus.Gatherer
	c   *Collector
}

// Gatherer is what /metrics serves: reg's families (c registered on it) and c's traffic
// families, by name. c's are gathered first, so a failure they count shows in the same
// scrape.
func Gatherer(reg prometheus.Gatherer, c *Collector) TextGatherer {
	return &textGatherer{reg: reg, c: c}
}

func (g *textGatherer) Gather() ([]*dto.MetricFamily, error) {
	own := g.c.Gather()
	mfs, err := g.reg.Gather()
	mfs = append(mfs, own...)
	slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return mfs, err
}

// WriteText writes what Gather returns as expfmt's text encoder writes it, byte for byte,
// but writes the traffic families itself: at 10,000 Services their 70,000 series through
// expfmt were most of a scrape's cost. It writes as it goes, in chunks of at most
// textChunk bytes (a family's text is never built whole). An error of reg's Gather is
// returned before anything is written.
func (g *textGatherer) WriteText(w io.Writer) error {
	var own []textFamily
	if snap, err := g.c.read(); err != nil {
		g.c.errors.Inc()
		g.c.logFailure(err)
	} else {
		g.c.logSuccess()
		svc, ep := g.c.textSets(snap)
		own = appendText(nil, &g.c.svc, svc, func(i, k int) []byte { return snap.plan.list(svc[i].group, k) })
		own = appendText(own, &g.c.ep, ep, labelLists(&g.c.epLayout, ep))
		slices.SortFunc(own, func(a, b textFamily) int { return strings.Compare(a.name, b.name) })
	}
	mfs, err := g.reg.Gather()
	if err != nil {
		return err
	}
	var buf []byte
	for len(mfs) > 0 || len(own) > 0 {
		if len(own) == 0 || (len(mfs) > 0 && mfs[0].GetName() < own[0].name) {
			if _, err := expfmt.MetricFamilyToText(w, mfs[0]); err != nil {
				return fmt.Errorf("write %s: %w", mfs[0].GetName(), err)
			}
			mfs = mfs[1:]
			continue
		}
		if buf, err = own[0].write(w, buf[:0]); err != nil {
			return fmt.Errorf("write %s: %w", own[0].name, err)
		}
		own = own[1:]
	}
	return nil
}

// textChunk is how much of a traffic family WriteText buffers before it writes.
const textChunk = 64 << 10

// textFamily is one traffic family, to be written: write writes it to w through buf
// (returned, for the next family).
type textFamily struct {
	name  string
	write func(w io.Writer, buf []byte) ([]byte, error)
}

// textSet is one label set as the text path writes it (labelSet's data without the
// data model: no label pairs, no per-set allocation).
type textSet struct {
	labels []string // in descriptor order, direction aside
	group  int      // the snapshot's group (service sets)
	values [numSeries]float64
	emit   int
}

// textSets returns a snapshot's service and endpoint label sets (those whose label values
// are all UTF-8, as labelSet), each sorted as sets sorts them.
func (c *Collector) textSets(snap *snapshot) (svc, ep []textSet) {
	// The plan has the groups with valid labels in order.
	svc = make([]textSet, 0, len(snap.plan.order))
	for _, gi := range snap.plan.order {
		if g := &snap.groups[gi]; g.seen {
			ts := newTextSet(g.labels, &g.stats, g.conns, g.active, g.inactive)
			ts.group = gi
			svc = append(svc, ts)
		}
	}
	c.countServicesDropped(snap)
	if snap.dropped > 0 {
		c.dropped.Add(float64(snap.dropped))
	}
	ep = make([]textSet, 0, len(snap.endpoints))
	for i := range snap.endpoints {
		e := &snap.endpoints[i]
		labels := append(append(make([]string, 0, len(endpointLabels)), snap.groups[e.group].labels...), e.addr.String())
		if c.validLabels(labels) {
			ep = append(ep, newTextSet(labels, &e.stats, true, e.active, e.inactive))
		}
	}
	sortTextSets(ep, &c.epLayout.plain)
	return svc, ep
}

func newTextSet(labels []string, st *ipvs.Stats, gauges bool, active, inactive uint64) textSet {
	ts := textSet{labels: labels, values: seriesValues(st, active, inactive), emit: numSeries}
	if !gauges {
		ts.emit = numCounters
	}
	return ts
}

// sortTextSets sorts by label values in label name order (l: the layout without direction).
func sortTextSets(sets []textSet, l *layout) {
	slices.SortFunc(sets, func(a, b textSet) int {
		for _, j := range l.order {
			if c := strings.Compare(a.labels[j], b.labels[j]); c != 0 {
				return c
			}
		}
		return 0
	})
}

// labelLists writes each set's three label lists (plain, direction in, out) into one
// buffer, for their seven series, and returns list(i, k): set i's list k (l: the layouts).
func labelLists(l *layouts, sets []textSet) func(i, k int) []byte {
	var arena []byte
	bounds := make([][4]int, len(sets))
	for i := range sets {
		bounds[i][0] = len(arena)
		for k := range 3 {
			arena = appendSetLabels(arena, l, sets[i].labels, k)
			bounds[i][k+1] = len(arena)
		}
	}
	return func(i, k int) []byte { return arena[bounds[i][k]:bounds[i][k+1]] }
}

// appendText appends to out d's families of the series of sets (in series order), in the
// text format, as write does in data; list(i, k) is set i's label list k.
func appendText(out []textFamily, d *descs, sets []textSet, list func(i, k int) []byte) []textFamily {
	if len(sets) == 0 {
		return out
	}
	for fi := range d.fams {
		f := &d.fams[fi]
		n := 0
		for _, si := range f.series {
			for i := range sets {
				if si < sets[i].emit {
					n++
				}
			}
		}
		if n == 0 {
			continue
		}
		out = append(out, textFamily{name: f.name, write: func(w io.Writer, b []byte) ([]byte, error) {
			return writeFamily(w, b, f, sets, list)
		}})
	}
	return out
}

// writeFamily writes family f of sets to w, through b in chunks of about textChunk bytes.
func writeFamily(w io.Writer, b []byte, f *familySpec, sets []textSet, list func(i, k int) []byte) ([]byte, error) {
	b = append(b, "# HELP "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = appendEscaped(b, f.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.name...)
	if f.typ == dto.MetricType_COUNTER {
		b = append(b, " counter\n"...)
	} else {
		b = append(b, " gauge\n"...)
	}
	for _, si := range f.series {
		k := seriesLabels(si)
		for i := range sets {
			if si >= sets[i].emit {
				continue
			}
			b = append(b, f.name...)
			b = append(b, list(i, k)...)
			b = append(b, ' ')
			b = appendFloat(b, sets[i].values[si])
			b = append(b, '\n')
			if len(b) >= textChunk {
				if _, err := w.Write(b); err != nil {
					return b[:0], err
				}
				b = b[:0]
			}
		}
	}
	_, err := w.Write(b)
	return b[:0], err
}

// appendSetLabels appends {name="value",...} in label name order: the plain list (k 0), or
// with direction="in" (1) or "out" (2).
func appendSetLabels(b []byte, l *layouts, labels []string, k int) []byte {
	lay := &l.plain
	if k > 0 {
		lay = &l.dir
	}
	b = append(b, '{')
	for i, j := range lay.order {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, *lay.names[j]...)
		b = append(b, '=', '"')
		switch {
		case j < len(labels):
			b = appendEscaped(b, labels[j], true)
		case k == 1:
			b = append(b, "in"...)
		default:
			b = append(b, "out"...)
		}
		b = append(b, '"')
	}
	return append(b, '}')
}

// seriesLabels is which label list of its set series si has (see series.Write).
func seriesLabels(si int) int {
	switch si {
	case 1, 3:
		return inLabels
	case 2, 4:
		return outLabels
	}
	return plainLabels
}

// appendEscaped escapes as the text format does: backslash and newline, and the double
// quote in label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat formats a sample value as the text format does.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}
