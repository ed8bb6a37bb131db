package vm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TestRun describes Go test binaries to run inside one VM boot.
type TestRun struct {
	Binaries []string          // host paths of `go test -c` binaries
	Args     []string          // extra test flags for every binary (e.g. -test.run)
	Env      map[string]string // exported before the binaries run
}

// Script renders the shell script that runs every binary with -test.v, keeps going after a
// failure, and exits non-zero if any binary failed.
func (tr TestRun) Script() (string, error) {
	var b strings.Builder
	b.WriteString("set -u\n")
	for k, v := range tr.Env {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}
	b.WriteString("rc=0\n")
	for _, bin := range tr.Binaries {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("vm: test binary: %w", err)
		}
		args := append([]string{"-test.v", "-test.timeout=30m"}, tr.Args...)
		for i, a := range args {
			args[i] = shellQuote(a)
		}
		name := filepath.Base(abs)
		fmt.Fprintf(&b, "echo '=== VM BINARY %s'\n(cd %s && %s %s)\nr=$?\necho \"=== VM RESULT %s rc=$r\"\n[ $r = 0 ] || rc=1\n",
			name, shellQuote(filepath.Dir(abs)), shellQuote(abs), strings.Join(args, " "), name)
	}
	b.WriteString("exit $rc\n")
	return b.String(), nil
}

// RunTests boots the VM once for tr and counts top-level test results. A VM that does not
// boot, a binary that fails without a FAIL line (panic, timeout), or a run with no test at
// all counts as a failure.
func RunTests(ctx context.Context, cfg Config, tr TestRun) (passed, failed int, failures []string, err error) {
	script, err := tr.Script()
	if err != nil {
		return 0, 1, nil, err
	}
	cfg.Script = script
	res, err := Run(ctx, cfg)
	if err != nil {
		return 0, 1, nil, err
	}
	passed, failed, failures = countResults(res.Output)
	if passed+failed == 0 {
		return 0, 1, nil, fmt.Errorf("vm: the VM ran no test (exit code %d)", res.ExitCode)
	}
	if res.ExitCode != 0 && failed == 0 {
		failed = 1
		failures = append(failures, fmt.Sprintf("a test binary failed without a --- FAIL line (exit code %d): panic or timeout", res.ExitCode))
	}
	return passed, failed, failures, nil
}

// failureContext is how many of a failed test's own log lines (t.Log, t.Error: the
// "    name_test.go:N: ..." lines and their continuations) follow its FAIL line in the summary:
// a run's last lines then say why it failed even when the test dumped a daemon log after the
// error.
const failureContext = 30

// failureContinuations is how many continuation lines of one log line are kept (a dumped
// daemon log or kernel table is one log line with many).
const failureContinuations = 4

// countResults counts the top-level PASS and FAIL lines of -test.v output; each failure is
// its FAIL line followed by the last failureContext lines the test (or its subtests) logged
// from a _test.go file.
func countResults(output string) (passed, failed int, failures []string) {
	logged := map[string][]string{} // top-level test -> its _test.go log lines
	current := ""
	inLog := false // the last line was a _test.go log line (its indented continuations follow)
	cont := 0      // continuation lines of the current log line
	for _, l := range strings.Split(output, "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case strings.HasPrefix(l, "=== RUN ") || strings.HasPrefix(l, "=== CONT ") || strings.HasPrefix(l, "=== NAME "):
			if f := strings.Fields(l); len(f) >= 3 {
				current, _, _ = strings.Cut(f[2], "/")
			}
			inLog = false
		case strings.HasPrefix(l, "--- PASS: "):
			passed++
			inLog = false
		case strings.HasPrefix(l, "--- FAIL: "):
			failed++
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "--- FAIL: "), " ")
			lines := logged[name]
			if len(lines) > failureContext {
				lines = append([]string{fmt.Sprintf("    (%d earlier lines in the log above)", len(lines)-failureContext)}, lines[len(lines)-failureContext:]...)
			}
			failures = append(failures, strings.Join(append([]string{l}, lines...), "\n"))
			inLog = false
		case current != "" && isTestLogLine(l):
			logged[current] = append(logged[current], l)
			inLog, cont = true, 0
		case inLog && strings.HasPrefix(l, "        "):
			cont++
			switch {
			case cont <= failureContinuations:
				logged[current] = append(logged[current], l)
			case cont == failureContinuations+1:
				logged[current] = append(logged[current], "        ...")
			}
		default:
			inLog = false
		}
	}
	return passed, failed, failures
}

// isTestLogLine reports whether l is a t.Log or t.Error line of a _test.go file
// ("    file_test.go:12: message", indented 4 spaces per subtest level).
func isTestLogLine(l string) bool {
	t := strings.TrimLeft(l, " ")
	if len(t) == len(l) {
		return false
	}
	file, rest, ok := strings.Cut(t, ":")
	if !ok || !strings.HasSuffix(file, "_test.go") {
		return false
	}
	line, _, ok := strings.Cut(rest, ":")
	return ok && line != "" && strings.Trim(line, "0123456789") == ""
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
