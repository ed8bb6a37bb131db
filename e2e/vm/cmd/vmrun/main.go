package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
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
		label   = flag.String("label", "kernel", "word before the closing 'N passed, N failed' line")
		quiet   = flag.Bool("quiet", false, "do not stream the VM console")
		mem     = flag.Int("memory", 3072, "VM memory in MiB")
		arts    = flag.String("artifacts", "", "host directory that receives what the script writes under "+vm.GuestArtifacts)
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
	env := map[string]string{}
	for _, e := range envs {
		name, val, ok := strings.Cut(e, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "vmrun: --env %q is not NAME=VALUE\n", e)
			os.Exit(2)
		}
		env[name] = val
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := vm.Prepare(ctx, *cache); err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
		os.Exit(1)
	}
	cfg := vm.Config{CacheDir: *cache, Timeout: *timeout, MemoryMB: *mem, Artifacts: *arts}
	if !*quiet {
		cfg.Console = os.Stdout
	}

	if *script != "" {
		b, err := os.ReadFile(*script)
		if err != nil {
			fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
			os.Exit(2)
		}
		var pre strings.Builder
		for k, v := range env {
			fmt.Fprintf(&pre, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
		}
		cfg.Script = pre.String() + string(b)
		res, err := vm.Run(ctx, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
			os.Exit(1)
		}
		if *quiet {
			fmt.Print(res.Output)
		}
		os.Exit(res.ExitCode)
	}

	passed, failed, failures, err := vm.RunTests(ctx, cfg, vm.TestRun{Binaries: tests, Args: flag.Args(), Env: env})
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
	}
	for _, f := range failures {
		fmt.Println(f)
	}
	fmt.Printf("%s: %d passed, %d failed\n", *label, passed, failed)
	if failed > 0 || err != nil {
		os.Exit(1)
	}
}
