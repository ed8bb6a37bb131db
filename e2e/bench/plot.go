package bench

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Plot geometry (SVG user units).
const (
	plotW, plotH   = 1000, 480
	panelW         = plotW / 2
	marginL        = 78
	marginR        = 24
	plotTop        = 64
	plotBottom     = 350
	legendY        = 414 // first legend row; one row per proxy, legendRow apart
	legendRow      = 18
	captionY       = 466
	markerRadius   = 3.5
	tickLen        = 5
	minDecades     = 1
	targetXTicks   = 5
	fontFamily     = "sans-serif"
	axisColor      = "#333"
	gridColor      = "#ddd"
	noDataColor    = "#888"
	dashedPattern  = "6 4"
	defaultPalette = "#2ca02c,#9467bd,#8c564b,#e377c2"
)

// proxyColor is the colour of a proxy's lines: kube-proxy red, kipvs blue, others in turn.
func proxyColor(proxy string, others []string) string {
	switch proxy {
	case "kube-proxy":
		return "#d62728"
	case "kipvs":
		return "#1f77b4"
	}
	pal := strings.Split(defaultPalette, ",")
	return pal[max(slices.Index(others, proxy), 0)%len(pal)]
}

type point struct{ x, y float64 }

type series struct {
	label  string
	color  string
	dashed bool
	hollow bool
	pts    []point
}

type panel struct {
	title string
	// unit follows the y axis' decade labels ("s" when empty), yLabel names the axis
	// ("seconds (log scale)" when empty).
	unit, yLabel string
	series       []series
	// legend holds the indexes into series of each legend row.
	legend [][]int
}

// RenderSVG draws the run: change latency p50 and p99 against N (left) and the first
// complete sync against N (middle), one colour per proxy, seconds on a log scale; and, when
// a record has data path figures, the new TCP connections per second through the cluster
// IP against N (right), with the floor (straight to one backend) dashed. Records with an
// error keep the figures they have; a figure that is 0 (not measured) is left out.
func RenderSVG(run Run) []byte {
	var proxies []string
	for _, r := range run.Records {
		if !slices.Contains(proxies, r.Proxy) {
			proxies = append(proxies, r.Proxy)
		}
	}
	var others []string
	for _, p := range proxies {
		if p != "kube-proxy" && p != "kipvs" {
			others = append(others, p)
		}
	}
	collect := func(proxy string, val func(Record) float64) []point {
		var pts []point
		for _, r := range run.Records {
			if r.Proxy == proxy {
				if v := val(r); v > 0 && !math.IsNaN(v) && !math.IsInf(v, 0) {
					pts = append(pts, point{float64(r.N), v})
				}
			}
		}
		slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
		return pts
	}
	lat := panel{title: "Endpoint change: API write to real server in IPVS"}
	first := panel{title: "First sync: process start to full IPVS table, and as reported"}
	for _, p := range proxies {
		c := proxyColor(p, others)
		n := len(lat.series)
		lat.series = append(lat.series,
			series{label: p + " p99", color: c, pts: collect(p, func(r Record) float64 { return r.ChangeLatency.P99 })},
			series{label: p + " p50", color: c, dashed: true, hollow: true, pts: collect(p, func(r Record) float64 { return r.ChangeLatency.P50 })})
		lat.legend = append(lat.legend, []int{n, n + 1})
		n = len(first.series)
		first.series = append(first.series,
			series{label: p + " IPVS complete", color: c, pts: collect(p, func(r Record) float64 { return r.FirstSyncSeconds })},
			series{label: p + " sync reported", color: c, dashed: true, hollow: true, pts: collect(p, func(r Record) float64 { return r.FirstSyncReportedSeconds })})
		first.legend = append(first.legend, []int{n, n + 1})
	}
	panels := []panel{lat, first}
	if slices.ContainsFunc(run.Records, func(r Record) bool { return r.DataPath != nil }) {
		rate := panel{title: "New TCP connections/s through the cluster IP", unit: "/s", yLabel: "connections per second (log scale)"}
		for _, p := range proxies {
			c := proxyColor(p, others)
			n := len(rate.series)
			rate.series = append(rate.series,
				series{label: p + " cluster IP", color: c, pts: collect(p, func(r Record) float64 { return dataPathRate(r, PathClusterIP) })},
				series{label: p + " floor", color: c, dashed: true, hollow: true, pts: collect(p, func(r Record) float64 { return dataPathRate(r, PathFloor) })})
			rate.legend = append(rate.legend, []int{n, n + 1})
		}
		panels = append(panels, rate)
	}
	width := len(panels) * panelW

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n",
		width, plotH, width, plotH, fontFamily)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#fff"/>`+"\n", width, plotH)
	for i, p := range panels {
		drawPanel(&b, float64(i*panelW), p)
	}
	for i, p := range panels {
		legend(&b, float64(i*panelW), p)
	}
	text(&b, float64(width)/2, captionY, "middle", caption(run))
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// dataPathRate is a record's new-connection rate through path (0 when not measured).
func dataPathRate(r Record, path string) float64 {
	lr, _ := r.DataPath.Find(path, LoadTCPNew)
	return lr.Rate
}

func caption(run Run) string {
	parts := []string{"N ClusterIP Services x " + strconv.Itoa(run.Params.E) + " endpoints"}
	if run.Params.Changes > 0 {
		parts = append(parts, fmt.Sprintf("%d changes %gs apart", run.Params.Changes, run.Params.IntervalSeconds))
	}
	if len(run.Records) > 0 {
		vm := run.Records[0].VM
		parts = append(parts, fmt.Sprintf("VM: %d vCPU, %d MiB, qemu %s, kernel %s", vm.CPUs, vm.MemoryMB, vm.Accel, vm.Kernel))
	}
	if d, _, ok := strings.Cut(run.Date, "T"); ok {
		parts = append(parts, d)
	}
	return strings.Join(parts, "; ")
}

func drawPanel(b *bytes.Buffer, x0 float64, p panel) {
	left, right := x0+marginL, x0+panelW-marginR
	text(b, (left+right)/2, 30, "middle", p.title)
	var xs, ys []float64
	for _, s := range p.series {
		for _, pt := range s.pts {
			xs = append(xs, pt.x)
			ys = append(ys, pt.y)
		}
	}
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="%s"/>`+"\n",
		f1(left), f1(plotTop), f1(right-left), f1(plotBottom-plotTop), axisColor)
	if len(ys) == 0 {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="%s">no data</text>`+"\n",
			f1((left+right)/2), f1((plotTop+plotBottom)/2), noDataColor)
		return
	}
	// x: 0 to a round maximum; y: whole decades around the data.
	step := niceStep(slices.Max(xs) / targetXTicks)
	xmax := math.Ceil(slices.Max(xs)/step) * step
	lo := math.Floor(math.Log10(slices.Min(ys)))
	hi := math.Ceil(math.Log10(slices.Max(ys)))
	if hi-lo < minDecades {
		hi = lo + minDecades
	}
	xpos := func(v float64) float64 { return left + v/xmax*(right-left) }
	ypos := func(v float64) float64 { return plotBottom - (math.Log10(v)-lo)/(hi-lo)*(plotBottom-plotTop) }
	for v := 0.0; v <= xmax+step/2; v += step {
		x := xpos(v)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", f1(x), f1(plotTop), f1(x), f1(plotBottom), gridColor)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", f1(x), f1(plotBottom), f1(x), f1(plotBottom+tickLen), axisColor)
		text(b, x, plotBottom+20, "middle", thousands(v))
	}
	for d := lo; d <= hi; d++ {
		y := ypos(math.Pow(10, d))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", f1(left), f1(y), f1(right), f1(y), gridColor)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", f1(left-tickLen), f1(y), f1(left), f1(y), axisColor)
		text(b, left-8, y+4, "end", decade(int(d), cmp.Or(p.unit, "s")))
	}
	text(b, (left+right)/2, plotBottom+40, "middle", "N (Services)")
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" transform="rotate(-90 %s %s)">%s</text>`+"\n",
		f1(x0+18), f1((plotTop+plotBottom)/2), f1(x0+18), f1((plotTop+plotBottom)/2), cmp.Or(p.yLabel, "seconds (log scale)"))
	for _, s := range p.series {
		if len(s.pts) == 0 {
			continue
		}
		var coords []string
		for _, pt := range s.pts {
			coords = append(coords, f1(xpos(pt.x))+","+f1(ypos(pt.y)))
		}
		if len(coords) > 1 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(coords, " "), s.color, dash(s))
		}
		for _, pt := range s.pts {
			marker(b, xpos(pt.x), ypos(pt.y), s)
		}
	}
}

// legend draws a panel's legend below it, one row per proxy.
func legend(b *bytes.Buffer, x0 float64, p panel) {
	for row, idx := range p.legend {
		x, y := x0+marginL, float64(legendY+row*legendRow)
		for _, i := range idx {
			s := p.series[i]
			fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>`+"\n",
				f1(x), f1(y), f1(x+28), f1(y), s.color, dash(s))
			marker(b, x+14, y, s)
			text(b, x+34, y+4, "start", s.label)
			x += 200
		}
	}
}

func marker(b *bytes.Buffer, x, y float64, s series) {
	fill := s.color
	if s.hollow {
		fill = "#fff"
	}
	fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="%s" fill="%s" stroke="%s" stroke-width="1.5"/>`+"\n", f1(x), f1(y), f1(markerRadius), fill, s.color)
}

func dash(s series) string {
	if s.dashed {
		return ` stroke-dasharray="` + dashedPattern + `"`
	}
	return ""
}

func text(b *bytes.Buffer, x, y float64, anchor, s string) {
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s">`, f1(x), f1(y), anchor)
	_ = xml.EscapeText(b, []byte(s)) // a bytes.Buffer does not fail
	b.WriteString("</text>\n")
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// decade labels 10^d in unit: "0.01 s", "1 s", "1000 s".
func decade(d int, unit string) string {
	if d >= 0 {
		return "1" + strings.Repeat("0", d) + " " + unit
	}
	return "0." + strings.Repeat("0", -d-1) + "1 " + unit
}

// thousands formats a whole number with comma separators: 10000 -> "10,000".
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
