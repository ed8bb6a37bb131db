//go:build kernel

package netfilter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// kernelEnv binds a real handle to a fresh namespace with the scenario's ipsets, and reads and
// writes the same tables with the standard binaries of the same backend.
func kernelEnv(t *testing.T, mode Mode, f inet.Family) scenarioEnv {
	t.Helper()
	ns := netnstest.New(t)
	dir := t.TempDir()
	var sets strings.Builder
	for name, typ := range scenarioSets {
		name = famOf(f).set(name)
		if strings.HasPrefix(typ, "bitmap:") {
			sets.WriteString("create " + name + " " + typ + " range 0-65535\n")
			continue
		}
		family := "inet"
		if f == inet.IPv6 {
			family = "inet6"
		}
		sets.WriteString("create " + name + " " + typ + " family " + family + " hashsize 1024 maxelem 65536\n")
	}
	setsFile := filepath.Join(dir, "sets")
	if err := os.WriteFile(setsFile, []byte(sets.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "sh", "-c", "ipset restore < "+setsFile)
	t.Cleanup(func() { _, _ = ns.Run("ipset", "destroy") })

	prefix := tool(f) + "-" + string(mode)
	nf, err := New(ns.Handle, f, Backend{Mode: mode, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	chainCounters := regexp.MustCompile(`(?m)^(:\S+ \S+) \[\d+:\d+\]$`)
	return scenarioEnv{
		nf: nf,
		foreign: func(t *testing.T, payload string) {
			t.Helper()
			n++
			file := filepath.Join(dir, fmt.Sprintf("foreign-%d", n))
			if err := os.WriteFile(file, []byte(payload), 0o600); err != nil {
				t.Fatal(err)
			}
			ns.MustRun(t, prefix+"-restore", "--noflush", file)
		},
		saveAll: func(t *testing.T) string {
			t.Helper()
			sections := map[string]*strings.Builder{}
			var cur *strings.Builder
			for _, l := range strings.SplitAfter(ns.MustRun(t, prefix+"-save"), "\n") {
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				if strings.HasPrefix(l, "*") {
					cur = &strings.Builder{}
					sections[strings.TrimSpace(l)] = cur
				}
				if cur == nil {
					t.Fatalf("%s-save printed %q outside a table", prefix, l)
				}
				cur.WriteString(l)
			}
			var b strings.Builder
			for _, table := range []string{"*filter", "*nat"} {
				if sections[table] == nil {
					t.Fatalf("%s-save printed no %s table", prefix, table)
				}
				b.WriteString(sections[table].String())
			}
			return chainCounters.ReplaceAllString(b.String(), "$1 [0:0]")
		},
	}
}

// The shared scenario against the kernel: both backends, both families.
func TestScenarioKernel(t *testing.T) {
	for _, mode := range []Mode{ModeNFT, ModeLegacy} {
		for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
			t.Run(string(mode)+"-"+f.String(), func(t *testing.T) {
				runScenario(t, kernelEnv(t, mode, f))
			})
		}
	}
}

// Detect follows the rules in the namespace it reads.
func TestDetectKernel(t *testing.T) {
	ctx := context.Background()
	ns := netnstest.New(t)
	r := NewRunner(ns.Handle)
	detect := func(want Mode, reason string) {
		t.Helper()
		b, err := Detect(ctx, r, "")
		if err != nil {
			t.Fatal(err)
		}
		if b.Mode != want || !strings.Contains(b.Reason, reason) {
			t.Fatalf("Detect = %v, want %s (%s)", b, want, reason)
		}
	}
	ns.MustRun(t, "iptables-legacy", "-A", "INPUT", "-j", "ACCEPT")
	detect(ModeLegacy, "iptables-legacy holds more rules (1) than iptables-nft (0)")
	ns.MustRun(t, "iptables-nft", "-t", "mangle", "-N", "KUBE-KUBELET-CANARY")
	detect(ModeNFT, "KUBE-KUBELET-CANARY chain is in the iptables-nft mangle table")
}
