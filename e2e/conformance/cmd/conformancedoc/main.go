package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kipvs/kipvs/e2e/conformance"
	"github.com/kipvs/kipvs/e2e/oracle"
)

func main() {
	results := flag.String("results", ".cache/conformance", "directory with one run directory per proxy (PROXY/), and sets of runs (SET/PROXY/, e.g. 2-nodes/kipvs)")
	doc := flag.String("doc", "docs/conformance.md", "the document whose generated section is rewritten")
	notesPath := flag.String("notes", "e2e/conformance/notes.yaml", "reasons for tests that do not pass")
	flag.Parse()
	if err := run(*results, *doc, *notesPath); err != nil {
		fmt.Fprintf(os.Stderr, "conformancedoc: %v\n", err)
		os.Exit(1)
	}
}

func run(dir, docPath, notesPath string) error {
	notes, err := conformance.ReadNotes(notesPath)
	if err != nil {
		return err
	}
	runs, err := conformance.ReadResults(dir)
	if err != nil {
		return err
	}
	for _, r := range runs {
		fmt.Printf("%s (%s, %d node(s), %s, %s): %d passed, %d failed, %d skipped\n", r.Run.Proxy, filepath.Join(dir, r.Set, r.Run.Proxy),
			r.Run.NodeCount(), r.Run.Started.UTC().Format("2006-01-02 15:04"), r.Run.Commit,
			r.Report.Count(conformance.Passed), r.Report.Count(conformance.Failed), r.Report.Count(conformance.Skipped))
	}
	if len(runs) == 0 {
		return fmt.Errorf("no run in %s: run make conformance first", dir)
	}
	res := conformance.Merge(runs)
	nft := res[conformance.BackendProxy]
	delete(res, conformance.BackendProxy)
	b, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	doc := string(b)
	var unexplained []conformance.MetricDiff
	if len(res) > 0 {
		var metrics string
		metrics, unexplained, err = compareMetrics(dir)
		if err != nil {
			return err
		}
		section, sum := conformance.Render(res, notes, metrics)
		if doc, err = conformance.Splice(doc, section); err != nil {
			return fmt.Errorf("%s: %w", docPath, err)
		}
		for _, n := range sum.Regressions {
			fmt.Printf("passed with kube-proxy, not with kipvs: %s\n", n)
		}
		for _, n := range sum.Unexplained {
			fmt.Printf("UNEXPLAINED (add a note to %s): %s\n", notesPath, n)
		}
	}
	if nft != nil {
		// The baseline is kipvs's column as the results section has it (rendered above from
		// this directory's kipvs run, or earlier from runs no longer at hand).
		_, results, _ := strings.Cut(doc, conformance.BeginMarker)
		base, err := conformance.ColumnOf(results, "kipvs")
		if err != nil {
			return fmt.Errorf("%s: kipvs's results: %w", docPath, err)
		}
		section, sum := conformance.RenderBackend(nft, base, notes)
		if doc, err = conformance.SpliceBackend(doc, section); err != nil {
			return fmt.Errorf("%s: %w", docPath, err)
		}
		for _, n := range sum.Regressions {
			fmt.Printf("passed for kipvs with the iptables backend, not with nftables: %s\n", n)
		}
		for _, n := range sum.Unexplained {
			fmt.Printf("UNEXPLAINED (add a note with proxy %s to %s): %s\n", conformance.BackendProxy, notesPath, n)
		}
	}
	if err := os.WriteFile(docPath, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", docPath)
	for _, d := range unexplained {
		fmt.Printf("UNEXPLAINED metrics finding (add it to e2e/oracle/differences.yaml or fix kipvs): %s %s: %s\n", d.Family, d.Kind, d.Detail)
	}
	return nil
}

// compareMetrics compares the two proxies' saved /metrics when both runs saved them.
func compareMetrics(dir string) (string, []conformance.MetricDiff, error) {
	kp, err := conformance.ReadMetrics(filepath.Join(dir, "kube-proxy", conformance.MetricsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	} else if err != nil {
		return "", nil, err
	}
	kv, err := conformance.ReadMetrics(filepath.Join(dir, "kipvs", conformance.MetricsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	} else if err != nil {
		return "", nil, err
	}
	ds, err := oracle.Load()
	if err != nil {
		return "", nil, err
	}
	out, unexplained := conformance.RenderMetrics(conformance.CompareMetrics(kp, kv), len(kp), len(kv), func(family, kind string) string {
		if d := ds.ExplainMetric(family, kind); d != nil {
			return d.ID
		}
		return ""
	})
	return out, unexplained, nil
}
