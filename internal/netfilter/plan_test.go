package netfilter

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
)

// The messages below are what iptables 1.8.9 printed in the VM.
func TestClassifyRestore(t *testing.T) {
	payload := "*nat\n:KUBE-MARK-MASQ - [0:0]\n-D PREROUTING -j KUBE-SERVICES\n-X KUBE-MARK-MASQ\nCOMMIT\n"
	cases := []struct {
		stderr string
		exit   int
		kind   error
		line   string
	}{
		{"iptables-nft-restore v1.8.9 (nf_tables): Chain 'KUBE-MISSING' does not exist\nError occurred at line: 3\nTry `iptables-nft-restore -h' or 'iptables-nft-restore --help' for more information.", 2, kerr.ErrNotFound, "-D PREROUTING -j KUBE-SERVICES"},
		{"iptables-restore v1.8.9 (legacy): Couldn't load target `KUBE-MISSING':No such file or directory\n\nError occurred at line: 3", 2, kerr.ErrNotFound, ""},
		{"iptables-nft-restore v1.8.9 (nf_tables): \nline 4: CHAIN_DEL failed (Device or resource busy): chain KUBE-MARK-MASQ", 4, kerr.ErrBusy, "-X KUBE-MARK-MASQ"},
		{"iptables-restore: line 4 failed", 1, kerr.ErrBusy, "-X KUBE-MARK-MASQ"},
		{"iptables-restore: line 3 failed", 1, kerr.ErrNotFound, "-D PREROUTING"},
		{"iptables-nft-restore: line 3 failed: Bad rule (does a matching rule exist in that chain?).", 1, kerr.ErrNotFound, ""},
		{"iptables-restore v1.8.9 (legacy): Set KUBE-NOSET doesn't exist.\n\nError occurred at line: 3", 2, kerr.ErrNotFound, ""},
		{"iptables-restore v1.8.9 (legacy): unknown option \"--bogus\"\nError occurred at line: 2", 2, kerr.ErrInvalid, ":KUBE-MARK-MASQ"},
		{"Another app is currently holding the xtables lock. Stopped waiting after 5s.", 4, kerr.ErrBusy, ""},
	}
	for _, c := range cases {
		err := classifyRestore(payload, &ExecError{Cmd: "iptables-restore", ExitCode: c.exit, Stderr: c.stderr, Err: errors.New("exit status")})
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.line) {
			t.Errorf("%q: %v, want %v naming %q", c.stderr, err, c.kind, c.line)
		}
		var ee *ExecError
		if !errors.As(err, &ee) {
			t.Errorf("%q: the ExecError is not in the chain", c.stderr)
		}
	}
	// A binary that did not start is passed through.
	notFound := &ExecError{Cmd: "iptables-nft-restore", ExitCode: -1, Err: exec.ErrNotFound}
	if err := classifyRestore(payload, notFound); !errors.Is(err, exec.ErrNotFound) {
		t.Fatal(err)
	}
}

func TestDetect(t *testing.T) {
	ctx := context.Background()
	rules := func(n int) string {
		var b strings.Builder
		b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n")
		for i := 0; i < n; i++ {
			b.WriteString("-A INPUT -j ACCEPT\n")
		}
		b.WriteString("COMMIT\n")
		return b.String()
	}
	hint := "*mangle\n:PREROUTING ACCEPT [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n"
	kube := "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\nCOMMIT\n"
	cases := []struct {
		name          string
		nft, legacy   string
		missing       string // binary prefix that is not installed
		override      Mode
		want          Mode
		reasonContain string
	}{
		{"override", rules(5), "", "", ModeLegacy, ModeLegacy, "override"},
		{"empty node", "", "", "", "", ModeNFT, "(0) as iptables-legacy (0)"},
		{"nft hint wins", hint, rules(20) + "*mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n", "", "", ModeNFT, "KUBE-KUBELET-CANARY"},
		{"hint in another nft table is not a hint", "*filter\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n", rules(3) + kube, "", "", ModeLegacy, "iptables-legacy holds more rules (6)"},
		{"legacy hint", rules(20), "*mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n", "", "", ModeLegacy, "KUBE-IPTABLES-HINT"},
		{"kube chains only in nft", kube, rules(30), "", "", ModeNFT, "KUBE-* chains in iptables-nft"},
		{"kube chains only in legacy", rules(30), kube, "", "", ModeLegacy, "KUBE-* chains in iptables-legacy"},
		{"more legacy rules", rules(2), rules(3), "", "", ModeLegacy, "(6) than iptables-nft (4)"},
		{"tie goes to nft", rules(3), rules(3), "", "", ModeNFT, "(6) as iptables-legacy (6)"},
		{"legacy not installed", "", rules(9), "iptables-legacy", "", ModeNFT, "iptables-legacy is not installed"},
		{"nft not installed", rules(9), "", "iptables-nft", "", ModeLegacy, "iptables-nft is not installed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := RunnerFunc(func(_ context.Context, _ []byte, name string, args ...string) ([]byte, error) {
				if len(args) != 0 {
					t.Fatalf("%s %q: Detect must read whole backends", name, args)
				}
				if c.missing != "" && strings.HasPrefix(name, c.missing) {
					return nil, &ExecError{Cmd: name, ExitCode: -1, Err: exec.ErrNotFound}
				}
				if strings.Contains(name, "-nft-") {
					return []byte(c.nft), nil
				}
				return []byte(c.legacy), nil
			})
			b, err := Detect(ctx, r, c.override)
			if err != nil {
				t.Fatal(err)
			}
			if b.Mode != c.want || !strings.Contains(b.Reason, c.reasonContain) {
				t.Fatalf("Detect = %v, want %s (%s)", b, c.want, c.reasonContain)
			}
		})
	}
	none := RunnerFunc(func(_ context.Context, _ []byte, name string, _ ...string) ([]byte, error) {
		return nil, &ExecError{Cmd: name, ExitCode: -1, Err: exec.ErrNotFound}
	})
	if _, err := Detect(ctx, none, ""); !errors.Is(err, kerr.ErrNotFound) {
		t.Fatalf("no binaries: %v", err)
	}
	if _, err := Detect(ctx, none, "bogus"); !errors.Is(err, kerr.ErrInvalid) {
		t.Fatalf("bad override: %v", err)
	}
}

func TestParseSave(t *testing.T) {
	out := "# Warning: iptables-legacy tables present, use iptables-legacy-save to see them\n" +
		"# Generated by iptables-nft-save v1.8.9 (nf_tables) on Sun Nov 22 12:06:11 2026\n" +
		"*filter\n:INPUT ACCEPT [3:180]\n:X - [0:0]\n[1:60] -A INPUT -j X\n-A X\nCOMMIT\n" +
		"*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n[2:120] -A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n"
	st, err := parseSave(TableNAT, []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	tr := st.owned(map[string]bool{ipvsmode.ChainServices: true})
	want := TableRules{Chains: []Chain{{Name: ipvsmode.ChainServices, Rules: []string{}}}, Jumps: []Jump{jumpTo("PREROUTING", ipvsmode.ChainServices, "kubernetes service portals")}}
	if Format(Ruleset{TableNAT: tr}) != Format(Ruleset{TableNAT: want}) {
		t.Fatalf("owned = %+v", tr)
	}
	if st.chains["PREROUTING"].rules[0].counters != "[2:120]" {
		t.Fatalf("counters = %q", st.chains["PREROUTING"].rules[0].counters)
	}
	// The built-in chains of a table that does not exist yet.
	st, err = parseSave(TableNAT, nil)
	if err != nil || len(st.chains) != 4 {
		t.Fatalf("empty: %v %v", st, err)
	}
	f, err := parseSave(TableFilter, []byte(out))
	if err != nil || f.chains["X"].rules[0].spec != "" {
		t.Fatalf("empty rule: %v", err)
	}
	for _, bad := range []string{
		"*nat\n-A NOPE -j RETURN\nCOMMIT\n",
		"*nat\n:A - [0:0]\n",
		"*nat\ngarbage\nCOMMIT\n",
		"# Table `nat' is incompatible, use 'nft' tool.\n",
	} {
		if _, err := parseSave(TableNAT, []byte(bad)); !errors.Is(err, kerr.ErrInvalid) {
			t.Errorf("parseSave(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestDiff(t *testing.T) {
	v1 := rulesetV1(inet.IPv4)
	if d := Diff(v1, v1.Normalize()); d != nil {
		t.Fatalf("equal rulesets differ: %q", d)
	}
	d := Diff(v1, rulesetV2(inet.IPv4))
	want := []string{
		`filter: chain KUBE-PROXY-FIREWALL is missing`,
		`filter: chain KUBE-SOURCE-RANGES-FIREWALL is missing`,
		`filter: INPUT jumps: want ["-m comment --comment \"kubernetes ipvs access filter\" -j KUBE-IPVS-FILTER" "-m comment --comment \"kube-proxy firewall rules\" -j KUBE-PROXY-FIREWALL" "-m comment --comment \"kubernetes health check rules\" -j KUBE-NODE-PORT"], have ["-m comment --comment \"kubernetes ipvs access filter\" -j KUBE-IPVS-FILTER" "-m comment --comment \"kubernetes health check rules\" -j KUBE-NODE-PORT"]`,
		`filter: FORWARD jumps: want ["-m comment --comment \"kube-proxy firewall rules\" -j KUBE-PROXY-FIREWALL" "-m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD"], have ["-m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD"]`,
		`nat: chain KUBE-LOAD-BALANCER is missing`,
		`nat: chain KUBE-SERVICES: rule 1 is "-s 127.0.0.0/8 -m comment --comment \"local traffic\" -j RETURN", want "-s 127.0.0.0/8 -j RETURN"`,
		`nat: OUTPUT jumps: want ["-m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES"], have []`,
	}
	if !slices.Equal(d, want) {
		t.Fatalf("Diff:\n%s", strings.Join(d, "\n"))
	}
}

// HoldsKubeChains decides whether cleanup also looks at the backend Detect did not choose: only
// when that backend is installed and holds KUBE-* chains, read without -t (no table created).
func TestHoldsKubeChains(t *testing.T) {
	ctx := context.Background()
	kube := "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\nCOMMIT\n"
	plain := "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n"
	runner := func(legacy string, installed bool) Runner {
		return RunnerFunc(func(_ context.Context, _ []byte, name string, args ...string) ([]byte, error) {
			if len(args) != 0 {
				t.Fatalf("%s %q: must read the whole backend, without -t", name, args)
			}
			if !strings.Contains(name, "-legacy-") {
				t.Fatalf("%s: asked about legacy, ran another backend", name)
			}
			if !installed {
				return nil, &ExecError{Cmd: name, ExitCode: -1, Err: exec.ErrNotFound}
			}
			return []byte(legacy), nil
		})
	}
	for _, c := range []struct {
		name      string
		legacy    string
		installed bool
		want      bool
	}{
		{"kube chains", kube, true, true},
		{"other rules only", plain, true, false},
		{"empty", "", true, false},
		{"not installed", "", false, false},
	} {
		if got := HoldsKubeChains(ctx, runner(c.legacy, c.installed), ModeLegacy); got != c.want {
			t.Errorf("%s: HoldsKubeChains = %v, want %v", c.name, got, c.want)
		}
	}
}
