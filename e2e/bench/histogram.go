package bench

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// NetworkProgrammingMetric is the upstream network programming latency SLI both proxies export.
const NetworkProgrammingMetric = "kubeproxy_network_programming_duration_seconds"

// Bucket is one cumulative histogram bucket: Count observations were <= LE.
type Bucket struct {
	LE    float64 // +Inf for the last
	Count float64
}

// Histogram is a Prometheus histogram's cumulative buckets, sorted by LE.
type Histogram []Bucket

// HistogramSummary is what Record keeps of a histogram.
type HistogramSummary struct {
	Count float64 `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
}

// HistogramFrom collects metric name's buckets from a scrape (sample "name_bucket{labels}"
// -> value, as harness.Metrics holds it) whose labels include each of match ("key=value",
// unquoted), summed over every other label.
func HistogramFrom(samples map[string]float64, name string, match ...string) Histogram {
	byLE := map[float64]float64{}
next:
	for k, v := range samples {
		base, labels, ok := strings.Cut(k, "{")
		if !ok || base != name+"_bucket" {
			continue
		}
		labels = strings.TrimSuffix(labels, "}")
		for _, m := range match {
			key, want, _ := strings.Cut(m, "=")
			if got, ok := labelValue(labels, key); !ok || got != want {
				continue next
			}
		}
		le, ok := labelValue(labels, "le")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		byLE[f] += v
	}
	h := make(Histogram, 0, len(byLE))
	for le, c := range byLE {
		h = append(h, Bucket{LE: le, Count: c})
	}
	slices.SortFunc(h, func(a, b Bucket) int { return cmp.Compare(a.LE, b.LE) })
	return h
}

// labelValue finds key="value" in a Prometheus label list (values without quotes or
// escaped quotes, which is all bucket labels need).
func labelValue(labels, key string) (string, bool) {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && k == key {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}

// Sub returns h minus an earlier scrape of the same histogram (buckets missing from before
// count as 0): the observations made in between.
func (h Histogram) Sub(before Histogram) Histogram {
	out := make(Histogram, len(h))
	for i, b := range h {
		out[i] = b
		for _, o := range before {
			if o.LE == b.LE {
				out[i].Count -= o.Count
			}
		}
	}
	return out
}

// Count is the number of observations (the +Inf bucket).
func (h Histogram) Count() float64 {
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1].Count
}

// Quantile estimates the q-quantile (0 <= q <= 1) as Prometheus' histogram_quantile does:
// linear interpolation within the bucket the rank falls in, the first bucket starting at
// 0, and the upper bound of the last finite bucket when the rank falls in +Inf. NaN with
// no observations.
func (h Histogram) Quantile(q float64) float64 {
	n := h.Count()
	if n <= 0 || q < 0 || q > 1 {
		return math.NaN()
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for i, b := range h {
		if b.Count >= rank && b.Count > below {
			if math.IsInf(b.LE, 1) {
				if i == 0 {
					return math.NaN()
				}
				return h[i-1].LE
			}
			return lower + (b.LE-lower)*(rank-below)/(b.Count-below)
		}
		lower, below = b.LE, b.Count
	}
	return lower
}

// Summary is the Count, p50 and p99 of h (0 for the quantiles when h is empty).
func (h Histogram) Summary() HistogramSummary {
	s := HistogramSummary{Count: h.Count()}
	if s.Count > 0 {
		s.P50, s.P99 = h.Quantile(0.5), h.Quantile(0.99)
	}
	return s
}
