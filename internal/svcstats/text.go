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
// expfmt were most of a scrape's cost. An error of reg's Gather is returned before
// anything is written.
func (g *textGatherer) WriteText(w io.Writer) error {
	var own []textFamily
	if snap, err := g.c.read(); err != nil {
		g.c.errors.Inc()
		g.c.logFailure(err)
	} else {
		g.c.logSuccess()
		svc, ep := g.c.sets(snap)
		own = appendText(appendText(nil, &g.c.svc, svc), &g.c.ep, ep)
		slices.SortFunc(own, func(a, b textFamily) int { return strings.Compare(a.name, b.name) })
	}
	mfs, err := g.reg.Gather()
	if err != nil {
		return err
	}
	for len(mfs) > 0 || len(own) > 0 {
		if len(own) == 0 || (len(mfs) > 0 && mfs[0].GetName() < own[0].name) {
			if _, err := expfmt.MetricFamilyToText(w, mfs[0]); err != nil {
				return fmt.Errorf("write %s: %w", mfs[0].GetName(), err)
			}
			mfs = mfs[1:]
			continue
		}
		if _, err := w.Write(own[0].text); err != nil {
			return fmt.Errorf("write %s: %w", own[0].name, err)
		}
		own = own[1:]
	}
	return nil
}

// textFamily is one traffic family, written.
type textFamily struct {
	name string
	text []byte
}

// appendText appends to out d's families of the series of sets (sorted: sortSets), in the
// text format, as write does in data.
func appendText(out []textFamily, d *descs, sets []*labelSet) []textFamily {
	// Each label set's label lists, written once for its seven series.
	var labels [][3][]byte
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
		if labels == nil {
			labels = make([][3][]byte, len(sets))
			for j, ls := range sets {
				for k := range ls.lists {
					labels[j][k] = appendLabels(nil, ls.lists[k])
				}
			}
		}
		b := make([]byte, 0, n*(len(f.name)+len(labels[0][1])+16)+len(f.help)+64)
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
			list := seriesLabels(si)
			for j, ls := range sets {
				if si >= ls.emit {
					continue
				}
				b = append(b, f.name...)
				b = append(b, labels[j][list]...)
				b = append(b, ' ')
				b = appendFloat(b, ls.values[si])
				b = append(b, '\n')
			}
		}
		out = append(out, textFamily{name: f.name, text: b})
	}
	return out
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

func appendLabels(b []byte, list []*dto.LabelPair) []byte {
	b = append(b, '{')
	for i, p := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p.GetName()...)
		b = append(b, '=', '"')
		b = appendEscaped(b, p.GetValue(), true)
		b = append(b, '"')
	}
	return append(b, '}')
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
