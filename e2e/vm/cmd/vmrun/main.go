// Command vmrun boots the kipvs kernel-test VM and runs a script or Go test binaries in it.
//
//	vmrun [flags] --script FILE
//	vmrun [flags] --test BIN [--test BIN ...] [-- extra test flags]
//
// With --test it runs every binary with -test.v, streams the console, and ends with the
// line "kernel: N passed, N failed" (top-level tests). A VM that does not boot, a binary
// that fails, or a run with no test at all exits non-zero.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/kipvs/kipvs/e2e/vm"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var (
		cache   = flag.String("cache", ".cache/vm", "kernel cache directory prepared by e2e/vm/prepare.sh")
		script  = flag.String("script", "", "shell script to run inside the VM")
		timeout = flag.Duration("timeout", 20*time.Minute, "limit for the whole run, boot included")
		apiPort = flag.Int("apiserver-port", 0, "give the VM restricted networking to 127.0.0.1:PORT as 10.0.2.100:6443")
		label   = flag.String("label", "kernel", "word before the closing 'N passed, N failed' line")
		quiet   = flag.Bool("quiet", false, "do not stream the VM console")
		mem     = flag.Int("memory", 3072, "VM memory in MiB")
		tests   multi
		envs    multi
	)
	flag.Var(&tests, "test", "Go test binary to run inside the VM (repeatable)")
	flag.Var(&envs, "env", "NAME=VALUE exported to the script (repeatable)")
	flag.Parse()

	if (*script == "") == (len(tests) == 0) {
		fmt.Fprintln(os.Stderr, "vmrun: give exactly one of --script or --test")
		os.Exit(2)
	}
	var body strings.Builder
	body.WriteString("set -u\n")
	for _, e := range envs {
		name, val, ok := strings.Cut(e, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "vmrun: --env %q is not NAME=VALUE\n", e)
			os.Exit(2)
		}
		fmt.Fprintf(&body, "export %s=%s\n", name, shellQuote(val))
	}
	if *script != "" {
		b, err := os.ReadFile(*script)
		if err != nil {
			fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
			os.Exit(2)
		}
		body.Write(b)
	} else {
		body.WriteString("rc=0\n")
		for _, t := range tests {
			abs, err := filepath.Abs(t)
			if err != nil {
				fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
				os.Exit(2)
			}
			if _, err := os.Stat(abs); err != nil {
				fmt.Fprintf(os.Stderr, "vmrun: test binary: %v\n", err)
				os.Exit(2)
			}
			args := append([]string{"-test.v", "-test.timeout=15m"}, flag.Args()...)
			quoted := make([]string, len(args))
			for i, a := range args {
				quoted[i] = shellQuote(a)
			}
			fmt.Fprintf(&body, "echo '=== VM BINARY %s'\n(cd %s && %s %s)\nr=$?\necho \"=== VM RESULT %s rc=$r\"\n[ $r = 0 ] || rc=1\n",
				filepath.Base(abs), shellQuote(filepath.Dir(abs)), shellQuote(abs), strings.Join(quoted, " "), filepath.Base(abs))
		}
		body.WriteString("exit $rc\n")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := vm.Config{CacheDir: *cache, Script: body.String(), Timeout: *timeout, MemoryMB: *mem}
	if !*quiet {
		cfg.Console = os.Stdout
	}
	if *apiPort != 0 {
		cfg.Net = &vm.Net{HostPort: *apiPort}
	}
	res, err := vm.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
		if errors.Is(err, vm.ErrNoResult) && *quiet {
			fmt.Fprintln(os.Stderr, res.Output)
		}
		if len(tests) > 0 {
			fmt.Printf("%s: 0 passed, 1 failed\n", *label)
		}
		os.Exit(1)
	}
	if *quiet && res.ExitCode != 0 {
		fmt.Print(res.Output)
	}
	fmt.Printf("vmrun: VM finished in %s, exit code %d\n", res.Elapsed.Round(time.Second), res.ExitCode)
	if len(tests) == 0 {
		os.Exit(res.ExitCode)
	}
	passed, failed := countTests(res.Output)
	if passed+failed == 0 {
		fmt.Fprintln(os.Stderr, "vmrun: the VM ran no test")
		failed = 1
	}
	if res.ExitCode != 0 && failed == 0 {
		failed = 1 // a binary failed without a --- FAIL line (panic, timeout, build tag mismatch)
	}
	for _, l := range regexp.MustCompile(`(?m)^--- FAIL: .*$`).FindAllString(res.Output, -1) {
		fmt.Println(strings.TrimSpace(l))
	}
	fmt.Printf("%s: %d passed, %d failed\n", *label, passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// countTests counts top-level test results in go test -v output.
func countTests(out string) (passed, failed int) {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case strings.HasPrefix(l, "--- PASS: "):
			passed++
		case strings.HasPrefix(l, "--- FAIL: "):
			failed++
		}
	}
	return passed, failed
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
