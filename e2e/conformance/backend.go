package conformance

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Markers around the generated section of docs/conformance.md on kipvs's nftables filter
// backend.
const (
	BackendBeginMarker = "<!-- BEGIN GENERATED nftables backend, by make conformance-doc (e2e/conformance); do not edit by hand -->"
	BackendEndMarker   = "<!-- END GENERATED nftables backend -->"
)

// SpliceBackend replaces the nftables backend's generated section of doc with section
// (appending it when doc has none).
func SpliceBackend(doc, section string) (string, error) {
	return spliceBetween(doc, section, BackendBeginMarker, BackendEndMarker)
}

// Column is one proxy's cell of each test in the results section's table "Every test that
// ran", as rendered ("pass 1m5s", "**FAIL** 4m52s (2 nodes)", "skip", "-").
type Column map[string]string

// Passed reports whether the test passed in the column.
func (c Column) Passed(test string) bool { return strings.HasPrefix(c[test], "pass") }

// ColumnOf reads proxy's column from a results section as Render writes it: the baseline the
// nftables backend's run is compared with when the iptables backend's raw results are not at
// hand (the section is generated from them, whole).
func ColumnOf(section, proxy string) (Column, error) {
	table := subsectionOf(section, "### Every test that ran")
	col := -1
	out := Column{}
	for _, l := range strings.Split(table, "\n") {
		if !strings.HasPrefix(l, "| ") {
			continue
		}
		cells := splitRow(l)
		if col < 0 {
			if cells[0] != "test" {
				continue
			}
			col = slices.Index(cells, proxy)
			if col < 0 {
				return nil, fmt.Errorf("the table of every test that ran has no column %q (columns %q)", proxy, cells)
			}
			continue
		}
		if len(cells) <= col || strings.HasPrefix(cells[0], "---") {
			continue
		}
		out[strings.ReplaceAll(cells[0], `\|`, "|")] = cells[col]
	}
	if col < 0 {
		return nil, fmt.Errorf("no table of every test that ran")
	}
	return out, nil
}

// splitRow splits a Markdown table row on its unescaped pipes.
func splitRow(l string) []string {
	l = strings.Trim(strings.TrimSpace(l), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(l); i++ {
		if l[i] == '\\' && i+1 < len(l) && l[i+1] == '|' {
			cur.WriteString(`\|`)
			i++
			continue
		}
		if l[i] == '|' {
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(l[i])
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// subsectionOf is text's part from the heading to the next heading.
func subsectionOf(text, heading string) string {
	_, s, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		return ""
	}
	s, _, _ = strings.Cut(s, "\n#")
	return s
}

// BackendSummary is what RenderBackend found.
type BackendSummary struct {
	Regressions []string // passed for kipvs (iptables backend), not with the nftables backend
	Unexplained []string // not passing with the nftables backend, with no note
}

// RenderBackend writes the nftables backend's section: its runs, the Service [Conformance]
// count, every test it ran beside kipvs's (iptables backend) cell from base, and why each
// test that did not pass did not.
func RenderBackend(nft *Result, base Column, notes []Note) (string, BackendSummary) {
	var b strings.Builder
	var sum BackendSummary
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n\n", BackendBeginMarker)
	w("## Results with the nftables filter backend\n\n")
	w("kipvs with `--kipvs-filter-backend=nftables` (`make conformance CONFORMANCE_PROXY=%s`), beside the kipvs column of the results above (the iptables backend, kipvs's default).\n\n", BackendProxy)
	w("| proxy | nodes | started (UTC) | kipvs commit | ran | passed | failed | skipped themselves | suite time | whole run |\n")
	w("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range nft.runs() {
		pass, fail := r.Report.Count(Passed), r.Report.Count(Failed)
		w("| %s | %d | %s | %s | %d | %d | %d | %d | %s | %s |\n", BackendProxy, r.Run.NodeCount(), r.Run.Started.UTC().Format("2006-01-02 15:04"), r.Run.Commit,
			pass+fail, pass, fail, r.Report.Count(Skipped), phase(r, "suite"), r.Run.Total().Round(time.Second))
	}
	for _, r := range nft.runs() {
		w("\n<details><summary>%s: selection, phases</summary>\n\n", runLabel(r))
		w("- focus `%s`\n- skip `%s`\n- suite processes: %d\n- phases:", r.Run.Focus, r.Run.Skip, max(r.Run.Procs, 1))
		for _, ph := range r.Run.Phases {
			w(" %s %s;", ph.Name, ph.Elapsed.Round(time.Second))
		}
		w("\n\n</details>\n")
	}

	var names []string
	for _, n := range nft.Report.Names() {
		if nft.Report.Ran(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	pass, total, compared := 0, 0, 0
	for _, n := range names {
		if servicesConformance(n) {
			total++
			if nft.Report.Cases[n].Status == Passed {
				pass++
			}
		}
		if base.Passed(n) {
			compared++
			if nft.Report.Cases[n].Status != Passed {
				sum.Regressions = append(sum.Regressions, n)
			}
		}
	}
	w("\n### Target with the nftables backend\n\n")
	w("- The Service `[Conformance]` tests: **%d of %d** that ran passed.\n", pass, total)
	w("- %d of the tests it ran passed for kipvs with the iptables backend", compared)
	if len(sum.Regressions) == 0 {
		w("; every one of them passed with the nftables backend.\n")
	} else {
		w("; **%d of them did not pass with the nftables backend** (below, with the reason).\n", len(sum.Regressions))
	}

	w("\n### Every test that ran with the nftables backend\n\n")
	w("| test | kipvs (iptables) | kipvs (nftables) |\n|---|---|---|\n")
	for _, n := range names {
		kv := base[n]
		if kv == "" {
			kv = "-"
		}
		w("| %s | %s | %s |\n", escape(n), kv, cell(nft, n))
	}
	w("\n### Not passing with the nftables backend\n\n")
	notFor := notPassing(nft, names)
	if len(notFor) == 0 {
		w("None: every test that ran passed.\n")
	}
	for _, n := range notFor {
		note, ok := find(notes, n, BackendProxy)
		if !ok {
			sum.Unexplained = append(sum.Unexplained, n)
			w("- **%s**: %s. No reason recorded yet (e2e/conformance/notes.yaml). Failure: `%s`\n", escape(n), nft.Report.Cases[n].Status, escape(nft.Report.Cases[n].Message))
			continue
		}
		w("- **%s**: %s — %s. %s\n", escape(n), note.Reason, reasons[note.Reason], strings.TrimSpace(note.Evidence))
	}
	w("\n%s\n", BackendEndMarker)
	return b.String(), sum
}
