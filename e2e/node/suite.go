package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/kipvs/kipvs/e2e/conformance"
)

// Suite is upstream's e2e suite run against the node after the smoke (`make conformance`).
type Suite struct {
	Bin     string        // e2e.test v1.34.10 (make conformance-bins)
	Focus   string        // --ginkgo.focus
	Skip    string        // --ginkgo.skip
	Dir     string        // report directory (removed first): run.json, the JUnit file, e2e.log
	Timeout time.Duration // --ginkgo.timeout; the step's own limit adds a grace period
	Args    []string      // more e2e.test flags
	Commit  string        // kipvs's version, for run.json
	// Procs > 1 runs the suite in that many processes through the ginkgo CLI (Ginkgo), as
	// upstream's jobs do; tests marked [Serial] still run alone, at the end.
	Procs  int
	Ginkgo string

	digests map[string]string // of the archives, read when the run starts (they may be rebuilt meanwhile)
}

// The JUnit file e2e.test writes into --report-dir: junit_<--report-prefix>01.xml.
const (
	junitPrefix = "suite_"
	junitName   = "junit_" + junitPrefix + "01.xml"
)

// suiteGrace is how long the step waits beyond --ginkgo.timeout for the suite to write its
// report and exit.
const suiteGrace = 5 * time.Minute

func (r *runner) preflightSuite() error {
	s := r.cfg.Suite
	if s == nil {
		return nil
	}
	abs, err := filepath.Abs(s.Bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("the e2e suite is not built (make conformance-bins): %w", err)
	}
	s.Bin = abs
	s.digests = imageDigests(r.cfg.Images)
	if s.Procs > 1 {
		if s.Ginkgo, err = filepath.Abs(s.Ginkgo); err != nil {
			return err
		}
		if _, err := os.Stat(s.Ginkgo); err != nil {
			return fmt.Errorf("--procs %d needs the ginkgo CLI (make conformance-bins): %w", s.Procs, err)
		}
	}
	if s.Dir, err = filepath.Abs(s.Dir); err != nil {
		return err
	}
	if s.Timeout <= 0 {
		s.Timeout = 4 * time.Hour
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return err
	}
	return os.MkdirAll(s.Dir, 0o755)
}

// suiteArgs is e2e.test's command line against this cluster. The provider is skeleton: with
// local the suite would run its SSH tests; kubectl is the cluster's own; the seed is fixed so
// both proxies meet the tests in the same order.
func (r *runner) suiteArgs() []string {
	s := r.cfg.Suite
	args := []string{
		"--kubeconfig=" + r.admin,
		"--kubectl-path=" + r.kubectl,
		"--provider=skeleton",
		fmt.Sprintf("--num-nodes=%d", len(r.nodes)),
		"--node-os-distro=debian",
		"--allowed-not-ready-nodes=0",
		"--system-pods-startup-timeout=5m",
		"--report-dir=" + s.Dir,
		"--report-prefix=" + junitPrefix,
		"--e2e-output-dir=" + filepath.Join(s.Dir, "output"),
		"--disable-log-dump",
		"--dump-logs-on-failure",
	}
	ginkgo := []string{
		"focus=" + s.Focus,
		"timeout=" + s.Timeout.String(),
		"seed=1",
		"v",
		"no-color",
		"poll-progress-after=5m",
	}
	if s.Skip != "" {
		ginkgo = append(ginkgo, "skip="+s.Skip)
	}
	if s.Procs > 1 {
		// The ginkgo CLI runs the suite in Procs processes; its flags go before the binary,
		// the suite's after "--".
		cli := []string{fmt.Sprintf("--procs=%d", s.Procs)}
		for _, g := range ginkgo {
			cli = append(cli, "--"+g)
		}
		return append(append(append(cli, s.Bin, "--"), args...), s.Args...)
	}
	for _, g := range ginkgo {
		args = append(args, "--ginkgo."+g)
	}
	return append(args, s.Args...)
}

// runSuite runs e2e.test, its output into the report directory's e2e.log and to the progress
// log, and records run.json. Failed tests are the suite's result, not the step's failure: the
// step fails only when the suite wrote no JUnit report (it could not start, or was killed).
func (r *runner) runSuite(ctx context.Context) error {
	s := r.cfg.Suite
	rec := &conformance.Run{
		Proxy: r.cfg.proxyName(), Started: time.Now().UTC(), Commit: s.Commit, Kubernetes: "v1.34.10",
		Focus: s.Focus, Skip: s.Skip, Procs: max(s.Procs, 1), Nodes: len(r.nodes), Images: s.digests,
		Machine: fmt.Sprintf("%d host cores; node VM qemu TCG %d vCPU %d MiB", runtime.NumCPU(), r.cfg.CPUs, r.cfg.MemoryMB),
	}
	rec.Node, _ = r.kubectlRun(ctx, 20*time.Second, nil, "get", "nodes", "-o", "wide")
	rec.Pods, _ = r.kubectlRun(ctx, 20*time.Second, nil, "get", "pods", "-A", "-o", "wide")
	// The smoke's objects go: the suite gets the node to itself.
	if _, err := r.kubectlRun(ctx, time.Minute, []byte(fmt.Sprintf(smokeManifests, r.cfg.EchoImage)),
		"delete", "--wait=false", "--ignore-not-found", "-f", "-"); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(s.Dir, "e2e.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	args := r.suiteArgs()
	r.logf("running %s %s\n  (output: %s)", map[bool]string{true: s.Ginkgo, false: s.Bin}[s.Procs > 1], strings.Join(quoteArgs(args), " "), logf.Name())
	sctx, cancel := context.WithTimeout(ctx, s.Timeout+suiteGrace)
	defer cancel()
	bin := s.Bin
	if s.Procs > 1 {
		bin = s.Ginkgo
	}
	cmd := exec.CommandContext(sctx, bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+r.admin)
	var out io.Writer = logf
	if r.cfg.Log != nil {
		out = io.MultiWriter(logf, &progress{out: r.cfg.Log})
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	elapsed := time.Since(start)
	var exit *exec.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &exit):
		rec.SuiteExit = exit.ExitCode()
	default:
		return fmt.Errorf("e2e.test: %w", runErr)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, junitName)); err != nil {
		return fmt.Errorf("e2e.test exited (%v) after %s without a JUnit report (%s): see %s", runErr,
			elapsed.Round(time.Second), err, logf.Name())
	}
	rec.JUnit = junitName
	rec.Phases = append(convertPhases(r.rep.Phases), conformance.Phase{Name: "suite", Elapsed: elapsed})
	if err := conformance.WriteRun(s.Dir, rec); err != nil {
		return err
	}
	rep, err := conformance.ReadJUnit(filepath.Join(s.Dir, junitName))
	if err != nil {
		return err
	}
	r.logf("suite done in %s (exit %d): %d passed, %d failed, %d skipped; report in %s", elapsed.Round(time.Second),
		rec.SuiteExit, rep.Count(conformance.Passed), rep.Count(conformance.Failed), rep.Count(conformance.Skipped), s.Dir)
	return nil
}

func convertPhases(ps []Phase) []conformance.Phase {
	out := make([]conformance.Phase, 0, len(ps))
	for _, p := range ps {
		out = append(out, conformance.Phase{Name: p.Name, Elapsed: p.Elapsed})
	}
	return out
}

// imageDigests reads the digest file hack/ociimage writes next to each archive.
func imageDigests(archives []string) map[string]string {
	out := map[string]string{}
	for _, a := range archives {
		d, err := os.ReadFile(a + ".digest")
		if err != nil {
			d = []byte("(no digest file)")
		}
		out[filepath.Base(a)] = string(bytes.TrimSpace(d))
	}
	return out
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " |\\[]()'\"*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}

// progress is the console's view of the suite's verbose output (the whole of it goes to
// e2e.log): one line per finished test with its outcome, and the suite's summary.
type progress struct {
	out     io.Writer
	buf     []byte
	name    string // the test name seen since the last separator
	pending string // a result seen before its name (the parallel runner prints it first)
	done    int
}

func (p *progress) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.line(strings.TrimRight(string(p.buf[:i]), "\r"))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *progress) line(l string) {
	switch {
	case strings.HasPrefix(l, "------------------------------"):
		p.name, p.pending = "", ""
	case strings.HasPrefix(l, "[sig-") || strings.HasPrefix(l, "[It] ") || strings.HasPrefix(l, "[SynchronizedBeforeSuite]"):
		if p.name != "" {
			return
		}
		p.name = strings.TrimSpace(l)
		if p.pending != "" {
			p.print(p.pending)
		}
	case strings.HasPrefix(l, "• ") || strings.HasPrefix(l, "S [SKIPPED]") || strings.HasPrefix(l, "P [PENDING]"):
		switch {
		case strings.HasPrefix(l, "S "):
			// skipped specs are many and say nothing here
		case p.name != "":
			p.print(l) // serial: the name came first
		default:
			p.pending = l
		}
	case strings.HasPrefix(l, "Ran ") || strings.HasPrefix(l, "FAIL!") || strings.HasPrefix(l, "SUCCESS!") ||
		strings.HasPrefix(l, "Summarizing") || strings.HasPrefix(l, "  [FAIL]") || strings.HasPrefix(l, "[FAIL]"):
		fmt.Fprintf(p.out, "suite: %s\n", l)
	}
}

func (p *progress) print(result string) {
	p.done++
	fmt.Fprintf(p.out, "suite: %3d %s  %s\n", p.done, strings.TrimPrefix(result, "• "), p.name)
	p.name, p.pending = "", ""
}
