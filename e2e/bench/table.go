package bench

import (
	"fmt"
	"strings"
)

// MarkdownTable renders the records as the table docs/performance.md shows: one row per N
// and proxy, in the order of the run.
func MarkdownTable(run Run) string {
	var b strings.Builder
	b.WriteString("| Services x endpoints | proxy | first complete sync (programmed) | first sync reported | CPU of the first sync | change latency p50 / p99 / max | own network programming p50 / p99 | idle CPU | peak RSS | host load |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range run.Records {
		row := []string{
			fmt.Sprintf("%s x %d", thousands(float64(r.N)), r.E),
			r.Proxy,
			orDash(r.FirstSyncSeconds, func(v float64) string { return fmt.Sprintf("%s s", sig(v)) }),
			orDash(r.FirstSyncReportedSeconds, func(v float64) string { return fmt.Sprintf("%s s", sig(v)) }),
			orDash(r.FirstSyncCPUSeconds, func(v float64) string { return fmt.Sprintf("%s s", sig(v)) }),
			latencyCell(r.ChangeLatency),
			npCell(r.NetworkProgramming),
			idleCell(r),
			orDash(float64(r.PeakRSSBytes), func(v float64) string { return fmt.Sprintf("%.1f MB", v/1e6) }),
			orDash(r.HostLoadMax, func(float64) string { return fmt.Sprintf("%.1f (max %.1f)", r.HostLoadMean, r.HostLoadMax) }),
		}
		if r.Error != "" {
			row[1] += " (failed: " + r.Error + ")"
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	return b.String()
}

func latencyCell(l Latency) string {
	if l.Count == 0 {
		return "-"
	}
	s := fmt.Sprintf("%s / %s / %s s (%d changes)", sig(l.P50), sig(l.P99), sig(l.Max), l.Count)
	if l.TimedOut > 0 {
		s += fmt.Sprintf(", %d not seen in time", l.TimedOut)
	}
	return s
}

func npCell(h HistogramSummary) string {
	if h.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s s", sig(h.P50), sig(h.P99))
}

// sig prints v with three significant digits, without exponent for 0.001 <= v < 100000.
func sig(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func orDash(v float64, f func(float64) string) string {
	if v <= 0 {
		return "-"
	}
	return f(v)
}

func idleCell(r Record) string {
	if r.IdleSeconds <= 0 {
		return "-"
	}
	if r.ScrapedIdleSeconds <= 0 || r.IdleCPUCores <= 0 {
		return fmt.Sprintf("%.3f cores", r.IdleCPUCores)
	}
	return fmt.Sprintf("%.3f cores (scraped: %.3f, %.2fx)", r.IdleCPUCores, r.ScrapedIdleCPUCores, r.ScrapedIdleCPUCores/r.IdleCPUCores)
}

// DataPathTable renders the data path figures of the records that have them: per N and
// proxy, a row per path with each mode's rate and latency, and for the paths through the
// Service the rate as a fraction of the floor's (straight to one backend) in the same run.
// "" when no record has them.
func DataPathTable(run Run) string {
	var b strings.Builder
	for _, r := range run.Records {
		if r.DataPath == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("| Services x endpoints | proxy | path | new TCP connections/s (p50 / p99) | kept-alive requests/s (p50 / p99) | UDP requests/s (p50 / p99) | generator CPU |\n")
			b.WriteString("|---|---|---|---|---|---|---|\n")
		}
		for _, path := range DataPaths() {
			row := []string{fmt.Sprintf("%s x %d", thousands(float64(r.N)), r.E), r.Proxy, path}
			var cpus []string
			for _, mode := range LoadModes() {
				lr, ok := r.DataPath.Find(path, mode)
				if !ok {
					row = append(row, "-")
					continue
				}
				floor, _ := r.DataPath.Find(PathFloor, mode)
				row = append(row, loadCell(lr, floor, path != PathFloor))
				cpus = append(cpus, fmt.Sprintf("%.2f", lr.CPUCores))
			}
			row = append(row, strings.Join(cpus, " / "))
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
	}
	return b.String()
}

// loadCell is "RATE/s (RATIOx) P50 / P99 ms", with the errors when there were some.
func loadCell(r, floor LoadResult, ratio bool) string {
	if r.Count == 0 {
		return fmt.Sprintf("none answered (%d errors)", r.Errors)
	}
	s := fmt.Sprintf("%s/s", sig(r.Rate))
	if ratio && floor.Rate > 0 {
		s += fmt.Sprintf(" (%.2fx)", r.Rate/floor.Rate)
	}
	s += fmt.Sprintf(" %s / %s ms", sig(r.P50*1e3), sig(r.P99*1e3))
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors", r.Errors)
	}
	return s
}

// BehaviourTable renders the connection behaviour of the records that have it; "" when
// none has.
func BehaviourTable(run Run) string {
	var b strings.Builder
	for _, r := range run.Records {
		if r.Behaviour == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("| Services x endpoints | proxy | held connection after its endpoint's removal | sessionAffinity ClientIP: backends answering |\n")
			b.WriteString("|---|---|---|---|\n")
		}
		aff := "-"
		if r.Behaviour.AffinityConnections > 0 {
			aff = fmt.Sprintf("%d of %d connections", r.Behaviour.AffinityBackends, r.Behaviour.AffinityConnections)
		}
		fmt.Fprintf(&b, "| %s x %d | %s | %s | %s |\n", thousands(float64(r.N)), r.E, r.Proxy, orText(r.Behaviour.HeldAfterRemoval), aff)
	}
	return b.String()
}

func orText(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
