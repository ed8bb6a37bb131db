package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kipvs/kipvs/e2e/cluster"
	"github.com/kipvs/kipvs/e2e/vm"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var (
		binDir  = flag.String("k8s-bin", ".cache/k8s", "directory with the etcd and kube-apiserver binaries")
		state   = flag.String("state", ".cache/e2e", "state directory (certs, etcd data, logs, kubeconfigs); must be inside the tree the VM sees")
		vmCache = flag.String("vm-cache", ".cache/vm", "kernel cache prepared by e2e/vm/prepare.sh")
		timeout = flag.Duration("timeout", 40*time.Minute, "limit for the VM run")
		quiet   = flag.Bool("quiet", false, "do not stream the VM console")
		tests   multi
		envs    multi
	)
	flag.Var(&tests, "test", "e2e test binary to run inside the VM (repeatable)")
	flag.Var(&envs, "env", "NAME=VALUE passed to the tests (repeatable)")
	flag.Parse()
	if len(tests) == 0 {
		fmt.Fprintln(os.Stderr, "e2erun: no --test binary")
		os.Exit(2)
	}
	if err := run(*binDir, *state, *vmCache, *timeout, *quiet, tests, envs, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "e2erun: %v\n", err)
		os.Exit(1)
	}
}

func run(binDir, state, vmCache string, timeout time.Duration, quiet bool, tests, envs, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	state, err := filepath.Abs(state)
	if err != nil {
		return err
	}
	_ = os.RemoveAll(state)
	if err := vm.Prepare(ctx, vmCache); err != nil {
		return err
	}
	fmt.Println("e2erun: starting etcd and kube-apiserver on 127.0.0.1")
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, Dir: filepath.Join(state, "cluster")})
	if err != nil {
		fmt.Println("e2e: 0 passed, 1 failed")
		return err
	}
	defer c.Stop()
	fmt.Printf("e2erun: apiserver ready on %s in %s\n", c.HostServer(), time.Since(start).Round(100*time.Millisecond))
	guestKC := filepath.Join(state, "kubeconfig-guest")
	if err := os.WriteFile(guestKC, c.Kubeconfig(cluster.GuestServer), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, "kubeconfig-host"), c.Kubeconfig(c.HostServer()), 0o600); err != nil {
		return err
	}
	env := map[string]string{"KIPVS_E2E_KUBECONFIG": guestKC}
	for _, e := range envs {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return fmt.Errorf("--env %q is not NAME=VALUE", e)
		}
		env[k] = v
	}
	cfg := vm.Config{CacheDir: vmCache, Timeout: timeout, Net: &vm.Net{HostPort: c.APIPort}}
	if !quiet {
		cfg.Console = os.Stdout
	}
	passed, failed, failures, err := vm.RunTests(ctx, cfg, vm.TestRun{Binaries: tests, Args: args, Env: env})
	for _, f := range failures {
		fmt.Println(f)
	}
	fmt.Printf("e2e: %d passed, %d failed\n", passed, failed)
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d failed (cluster logs in %s)", failed, filepath.Join(state, "cluster"))
	}
	return nil
}
