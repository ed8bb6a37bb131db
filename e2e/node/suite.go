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
}

// junitName is the file e2e.test's --report-dir gets (test/e2e/framework's JUnit reporter).
const junitName = "junit_01.xml"

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

// suiteArgs is e2e.test's command line against this cluster.
func (r *runner) suiteArgs() []string {
	s := r.cfg.Suite
	args := []string{
		"--kubeconfig", r.admin,
		"--provider", "local",
		"--report-dir", s.Dir,
		"--e2e-output-dir", filepath.Join(s.Dir, "output"),
		"--ginkgo.focus", s.Focus,
		"--ginkgo.timeout", s.Timeout.String(),
		"--ginkgo.no-color",
		"--ginkgo.poll-progress-after", "10m",
		"--dump-logs-on-failure=false",
		"--num-nodes", "1",
	}
	if s.Skip != "" {
		args = append(args, "--ginkgo.skip", s.Skip)
	}
	return append(args, s.Args...)
}

// runSuite runs e2e.test, its output into the report directory's e2e.log and to the progress
// log, and records run.json. Failed tests are the suite's result, not the step's failure: the
// step fails only when the suite wrote no JUnit report (it could not start, or was killed).
func (r *runner) runSuite(ctx context.Context) error {
	s := r.cfg.Suite
	rec := &conformance.Run{
		Proxy: r.proxyName(), Started: time.Now().UTC(), Commit: s.Commit, Kubernetes: "v1.34.10",
		Focus: s.Focus, Skip: s.Skip, Images: imageDigests(r.cfg.Images),
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
	r.logf("running %s %s\n  (output: %s)", s.Bin, strings.Join(quoteArgs(args), " "), logf.Name())
	sctx, cancel := context.WithTimeout(ctx, s.Timeout+suiteGrace)
	defer cancel()
	cmd := exec.CommandContext(sctx, s.Bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+r.admin)
	var out io.Writer = logf
	if r.cfg.Log != nil {
		out = io.MultiWriter(logf, r.cfg.Log)
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

// proxyName is the proxy under test.
func (r *runner) proxyName() string { return "kipvs" }
