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
	for _, l := range strings.Split(res.Output, "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case strings.HasPrefix(l, "--- PASS: "):
			passed++
		case strings.HasPrefix(l, "--- FAIL: "):
			failed++
			failures = append(failures, l)
		}
	}
	if passed+failed == 0 {
		return 0, 1, nil, fmt.Errorf("vm: the VM ran no test (exit code %d)", res.ExitCode)
	}
	if res.ExitCode != 0 && failed == 0 {
		failed = 1
		failures = append(failures, fmt.Sprintf("a test binary failed without a --- FAIL line (exit code %d): panic or timeout", res.ExitCode))
	}
	return passed, failed, failures, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
