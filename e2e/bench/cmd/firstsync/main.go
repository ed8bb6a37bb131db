// Command firstsync measures kipvs's first sync of N ClusterIP Services x E endpoints in the
// kernel-test VM against what the kernel itself costs, without the apiserver (loading
// 50,000 Services into it takes half an hour): kipvs runs on a standalone source file
// (--kipvs-source-file) holding the same objects as make bench-compare's, with profiling on.
// In the same boot, first, in a namespace of their own, `ip -batch` binds the N VIPs on a
// dummy link and `ipvsadm -R` restores the same IPVS table: the kernel's cost of the same
// objects through the standard tools, one request per object.
//
//	go run ./e2e/bench/cmd/firstsync --kipvs bin/kipvs --n 50000 --e 4 --memory 6144
//
// It prints the lines FLOOR ... and FIRSTSYNC ... and leaves the CPU profiles (30 s each,
// from kipvs's start to 30 s after its first IPv4 sync) in OUT/profiles; read them merged
// with `go tool pprof -top OUT/profiles/cpu-*.pprof`.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kipvs/kipvs/e2e/bench"
	"github.com/kipvs/kipvs/e2e/vm"
)

//go:embed firstsync.sh
var script string

func main() {
	var (
		kipvs   = flag.String("kipvs", "bin/kipvs", "the kipvs binary")
		n       = flag.Int("n", 50000, "Services")
		e       = flag.Int("e", 4, "endpoints per Service")
		out     = flag.String("out", ".cache/bench/firstsync", "directory for the generated files and the profiles")
		cache   = flag.String("vm-cache", ".cache/vm", "kernel cache directory prepared by e2e/vm/prepare.sh")
		mem     = flag.Int("memory", 6144, "VM memory in MiB")
		timeout = flag.Duration("timeout", 60*time.Minute, "limit for the VM run")
		floor   = flag.Bool("floor", true, "measure ip -batch and ipvsadm -R on the same objects first")
		quiet   = flag.Bool("quiet", false, "do not stream the VM console")
	)
	flag.Parse()
	if err := run(*kipvs, *n, *e, *out, *cache, *mem, *timeout, *floor, *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "firstsync:", err)
		os.Exit(1)
	}
}

func run(kipvs string, n, e int, out, cache string, mem int, timeout time.Duration, floor, quiet bool) error {
	if err := bench.CheckSize(n, e); err != nil {
		return err
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if kipvs, err = filepath.Abs(kipvs); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(out, "profiles")); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	files := map[string]func(*strings.Builder){
		"services.json": func(b *strings.Builder) { writeSource(b, n, e) },
		"addresses.ip":  func(b *strings.Builder) { writeAddresses(b, n) },
		"ipvs.restore":  func(b *strings.Builder) { writeIPVS(b, n, e) },
	}
	for name, fill := range files {
		var b strings.Builder
		fill(&b)
		if err := os.WriteFile(filepath.Join(out, name), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := vm.Prepare(ctx, cache); err != nil {
		return err
	}
	floorFlag := "0"
	if floor {
		floorFlag = "1"
	}
	pre := fmt.Sprintf("export KIPVS=%q DIR=%q FLOOR=%s\n", kipvs, out, floorFlag)
	cfg := vm.Config{CacheDir: cache, Script: pre + script, Timeout: timeout, MemoryMB: mem, Artifacts: out}
	if !quiet {
		cfg.Console = os.Stdout
	}
	fmt.Printf("firstsync: %d Services x %d endpoints, files in %s; booting the VM\n", n, e, out)
	res, err := vm.Run(ctx, cfg)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(res.Output, "\n") {
		if strings.HasPrefix(l, "FLOOR ") || strings.HasPrefix(l, "FIRSTSYNC ") {
			fmt.Println(strings.TrimSpace(l))
		}
	}
	if res.ExitCode != 0 {
		return errors.New("the VM script failed (see its output)")
	}
	fmt.Printf("firstsync: profiles in %s\n", filepath.Join(out, "profiles"))
	return nil
}

// writeSource writes the Services and EndpointSlices make bench-compare loads, as a JSON
// stream for --kipvs-source-file.
func writeSource(b *strings.Builder, n, e int) {
	enc := json.NewEncoder(b)
	for i := range n {
		svc := bench.Service(i)
		svc.APIVersion, svc.Kind = "v1", "Service"
		addrs := make([]netip.Addr, e)
		for j := range addrs {
			addrs[j] = bench.EndpointIP(i, j, e)
		}
		sl := bench.Slice(i, addrs)
		sl.APIVersion, sl.Kind = "discovery.k8s.io/v1", "EndpointSlice"
		for _, obj := range []any{svc, sl} {
			if err := enc.Encode(obj); err != nil {
				panic(err) // the types marshal
			}
		}
	}
}

// writeAddresses writes the `ip -batch` commands that bind every VIP on kube-ipvs0.
func writeAddresses(b *strings.Builder, n int) {
	for i := range n {
		fmt.Fprintf(b, "address add %s/32 dev kube-ipvs0\n", bench.ClusterIP(i))
	}
}

// writeIPVS writes the `ipvsadm -R` input of the same virtual servers and real servers.
func writeIPVS(b *strings.Builder, n, e int) {
	for i := range n {
		vs := netip.AddrPortFrom(bench.ClusterIP(i), bench.ServicePort)
		fmt.Fprintf(b, "-A -t %s -s rr\n", vs)
		for j := range e {
			fmt.Fprintf(b, "-a -t %s -r %s -m -w 1\n", vs, netip.AddrPortFrom(bench.EndpointIP(i, j, e), bench.TargetPort))
		}
	}
}
