package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"sigs.k8s.io/yaml"
)

// Run is what a conformance run on the node records next to its JUnit report (run.json):
// enough to say what was judged, when, on what.
type Run struct {
	Proxy      string            `json:"proxy"` // kipvs, kipvs-nftables or kube-proxy
	Started    time.Time         `json:"started"`
	Commit     string            `json:"commit"` // kipvs's git describe
	Kubernetes string            `json:"kubernetes"`
	Images     map[string]string `json:"images"` // name:tag -> digest of the archive imported
	Focus      string            `json:"focus"`
	Skip       string            `json:"skip"`
	Procs      int               `json:"procs"` // parallel suite processes (1: serial)
	Nodes      int               `json:"nodes"` // the cluster's nodes (0 in runs from before two nodes: 1)
	Phases     []Phase           `json:"phases"`
	// SuiteExit is e2e.test's exit status: 0 all selected passed, 1 some failed.
	SuiteExit int    `json:"suiteExit"`
	Node      string `json:"node"` // kubectl get nodes -o wide
	Pods      string `json:"pods"` // kubectl get pods -A -o wide, before the suite
	JUnit     string `json:"junit"`
	Machine   string `json:"machine"` // the host: cores, what ran the VM
}

// Phase is one timed step of the run.
type Phase struct {
	Name    string        `json:"name"`
	Elapsed time.Duration `json:"elapsed"`
}

// Total is the run's wall time over its phases.
func (r *Run) Total() time.Duration {
	var t time.Duration
	for _, p := range r.Phases {
		t += p.Elapsed
	}
	return t
}

// WriteRun writes run.json into dir.
func WriteRun(dir string, r *Run) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "run.json"), append(b, '\n'), 0o644)
}

// Result is one proxy's run and its report, read back from a run directory; or, made by
// Merge, one proxy's runs together.
type Result struct {
	Run    Run
	Report *Report
	Syncs  []SyncFigure // from the run's saved /metrics (MetricsFile), if it was saved
	// Set is the run's directory under the results root: "" for the one-node runs, "2-nodes"
	// for the two-node ones.
	Set string
	// Runs, in a merged Result, are the runs it joins, oldest first (nil: a single run).
	Runs []*Result
	// from is, in a merged Result, the run each case comes from.
	from map[string]*Result
}

// runs are the runs r stands for: itself, or the runs it merges.
func (r *Result) runs() []*Result {
	if len(r.Runs) == 0 {
		return []*Result{r}
	}
	return r.Runs
}

// source is the run a case of r comes from.
func (r *Result) source(name string) *Result {
	if s, ok := r.from[name]; ok {
		return s
	}
	return r
}

// NodeCount is how many nodes the run's cluster had.
func (r *Run) NodeCount() int { return max(r.Nodes, 1) }

// ReadResults reads every run under root: root/PROXY and root/SET/PROXY (for example
// 2-nodes/kipvs), oldest first within each set.
func ReadResults(root string) ([]*Result, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	sets := []string{""}
	for _, e := range entries {
		if e.IsDir() && !slices.Contains(allProxies(), e.Name()) {
			sets = append(sets, e.Name())
		}
	}
	var out []*Result
	for _, set := range sets {
		for _, p := range allProxies() {
			r, err := ReadResult(filepath.Join(root, set, p))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			r.Set = set
			out = append(out, r)
		}
	}
	return out, nil
}

// Merge joins each proxy's runs into one Result: a test's outcome is the one of the latest run
// that ran it (passed or failed); a test no run ran keeps the latest run's status (skipped,
// or absent).
func Merge(runs []*Result) map[string]*Result {
	by := map[string][]*Result{}
	for _, r := range runs {
		by[r.Run.Proxy] = append(by[r.Run.Proxy], r)
	}
	out := map[string]*Result{}
	for p, rs := range by {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Run.Started.Before(rs[j].Run.Started) })
		if len(rs) == 1 {
			out[p] = rs[0]
			continue
		}
		m := &Result{Run: rs[len(rs)-1].Run, Report: &Report{Cases: map[string]Case{}}, Runs: rs, from: map[string]*Result{}}
		for _, r := range rs {
			m.Report.Time += r.Report.Time
			for n, c := range r.Report.Cases {
				if r.Report.Ran(n) || !m.Report.Ran(n) {
					m.Report.Cases[n] = c
					m.from[n] = r
				}
			}
		}
		out[p] = m
	}
	return out
}

// MetricsFile is what noderun saves of the proxy's /metrics after the suite, in the run directory.
const MetricsFile = "metrics.txt"

// ReadResult reads run.json and the JUnit file it names from dir.
func ReadResult(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, err
	}
	var res Result
	if err := json.Unmarshal(b, &res.Run); err != nil {
		return nil, fmt.Errorf("%s/run.json: %w", dir, err)
	}
	if res.Run.JUnit == "" {
		return nil, fmt.Errorf("%s/run.json: the suite wrote no JUnit report", dir)
	}
	rep, err := ReadJUnit(filepath.Join(dir, res.Run.JUnit))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	res.Report = rep
	res.Syncs, err = ReadSyncFigures(filepath.Join(dir, MetricsFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return &res, nil
}

// Note says why a test does not pass for a proxy (notes.yaml).
type Note struct {
	Test     string `json:"test"`            // the test's name as the report has it
	Proxy    string `json:"proxy,omitempty"` // kipvs (default), kipvs-nftables or kube-proxy
	Reason   string `json:"reason"`          // fixed, upstream, environment, difference
	Evidence string `json:"evidence"`
}

// Reasons a note may give.
var reasons = map[string]string{
	"fixed":       "fixed in kipvs since this run",
	"upstream":    "kube-proxy fails it the same way",
	"environment": "the test environment, not the proxy",
	"difference":  "a deliberate difference from kube-proxy, listed in e2e/oracle/differences.yaml",
}

// ReadNotes reads notes.yaml.
func ReadNotes(path string) ([]Note, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var notes []Note
	if err := yaml.UnmarshalStrict(b, &notes); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, n := range notes {
		if n.Test == "" || n.Evidence == "" {
			return nil, fmt.Errorf("%s: note %d: test and evidence are required", path, i)
		}
		if _, ok := reasons[n.Reason]; !ok {
			return nil, fmt.Errorf("%s: note %d (%s): reason %q: want fixed, upstream or environment", path, i, n.Test, n.Reason)
		}
		if n.Proxy == "" {
			notes[i].Proxy = "kipvs"
		}
	}
	return notes, nil
}
