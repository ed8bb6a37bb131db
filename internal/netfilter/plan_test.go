package netfilter

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/testutil/golden"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
)

func TestPlanJumps(t *testing.T) {
	own := map[string]bool{"A": true, "B": true, "C": true}
	saved := func(specs ...string) []savedRule {
		out := make([]savedRule, len(specs))
		for i, s := range specs {
			out[i] = savedRule{spec: s}
		}
		return out
	}
	cases := []struct {
		name      string
		cur       []string
		want      []string
		dels      []string
		ins       []string
		resulting []string
	}{
		{"empty chain", nil, []string{"-j A", "-j B"}, nil,
			[]string{"-I X 1 -j A", "-I X 2 -j B"}, []string{"-j A", "-j B"}},
		{"foreign rules stay below", []string{"-j F1", "-j F2"}, []string{"-j A", "-j B"}, nil,
			[]string{"-I X 1 -j A", "-I X 2 -j B"}, []string{"-j A", "-j B", "-j F1", "-j F2"}},
		{"match", []string{"-j F1", "-j A", "-j B"}, []string{"-j A", "-j B"}, nil, nil, nil},
		{"missing after a present one", []string{"-j F1", "-j A", "-j F2"}, []string{"-j A", "-j B"}, nil,
			[]string{"-I X 3 -j B"}, []string{"-j F1", "-j A", "-j B", "-j F2"}},
		{"missing first goes on top", []string{"-j F1", "-j B"}, []string{"-j A", "-j B"}, nil,
			[]string{"-I X 1 -j A"}, []string{"-j A", "-j F1", "-j B"}},
		{"duplicate deleted", []string{"-j A", "-j F1", "-j A"}, []string{"-j A"}, []string{"-D X -j A"}, nil, nil},
		{"unwanted deleted", []string{"-j A", "-j F1", "-j C"}, []string{"-j A"}, []string{"-D X -j C"}, nil, nil},
		{"changed comment", []string{`-m comment --comment old -j A`, "-j F1"}, []string{`-m comment --comment new -j A`},
			[]string{`-D X -m comment --comment old -j A`}, []string{`-I X 1 -m comment --comment new -j A`}, nil},
		{"wrong order: all reinserted on top", []string{"-j F1", "-j B", "-j A"}, []string{"-j A", "-j B"},
			[]string{"-D X -j B", "-D X -j A"}, []string{"-I X 1 -j A", "-I X 2 -j B"}, []string{"-j A", "-j B", "-j F1"}},
		{"all removed", []string{"-j A", "-j F1", "-j B"}, nil, []string{"-D X -j A", "-D X -j B"}, nil, []string{"-j F1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dels, ins := planJumps("X", saved(c.cur...), c.want, own)
			if !slices.Equal(dels, c.dels) || !slices.Equal(ins, c.ins) {
				t.Fatalf("dels %q ins %q, want %q %q", dels, ins, c.dels, c.ins)
			}
			if c.resulting == nil {
				return
			}
			// Replaying the payload on the fake gives the expected chain.
			fk := NewFake(inet.IPv4, withOwned(ownedChains{TableFilter: {"A", "B", "C"}}))
			var p strings.Builder
			p.WriteString("*filter\n:A - [0:0]\n:B - [0:0]\n:C - [0:0]\n:F1 - [0:0]\n:F2 - [0:0]\n")
			for _, r := range c.cur {
				p.WriteString("-A INPUT " + r + "\n")
			}
			p.WriteString("COMMIT\n*filter\n" + strings.ReplaceAll(strings.Join(append(dels, ins...), "\n"), " X ", " INPUT ") + "\nCOMMIT\n")
			if err := fk.Restore(p.String()); err != nil {
				t.Fatal(err)
			}
			st, err := parseSave(TableFilter, []byte(fk.Save(TableFilter)))
			if err != nil {
				t.Fatal(err)
			}
			if got := st.chains["INPUT"].specs(); !slices.Equal(got, c.resulting) {
				t.Fatalf("INPUT is %q, want %q", got, c.resulting)
			}
		})
	}
}

// script is a Runner that serves iptables-save output from a fake and records every command,
// so the real handle's commands and payloads can be checked without root.
type script struct {
	fk    *Fake
	calls []string
	fail  map[string]error // binary -> error to return
}

func (s *script) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	s.calls = append(s.calls, strings.Join(append([]string{name}, args...), " "))
	if err := s.fail[name]; err != nil {
		return nil, err
	}
	switch {
	case strings.HasSuffix(name, "-save") && len(args) == 1 && args[0] == "-c":
		return s.fk.kernel.save(ctx)
	case strings.HasSuffix(name, "-restore"):
		return nil, s.fk.kernel.restore(ctx, string(stdin))
	}
	return nil, errors.New("unexpected command")
}

func TestHandleCommands(t *testing.T) {
	ctx := context.Background()
	sc := &script{fk: NewFake(inet.IPv6)}
	h, err := New(netns.None(), inet.IPv6, Backend{Mode: ModeLegacy, Reason: "test"}, WithRunner(sc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Apply(ctx, rulesetV1(inet.IPv6))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ip6tables-legacy-save -c",
		"ip6tables-legacy-restore --noflush --counters -w 5",
		"ip6tables-legacy-save -c",
	}
	if !slices.Equal(sc.calls, want) {
		t.Fatalf("commands:\n%s\nwant\n%s", strings.Join(sc.calls, "\n"), strings.Join(want, "\n"))
	}
	golden.Check(t, "ipv6-v1-payload-nat.golden", res.Payloads[TableNAT])
	if !strings.HasPrefix(res.Payloads[TableFilter], "*filter\n") {
		t.Fatalf("filter payload:\n%s", res.Payloads[TableFilter])
	}

	// Unchanged: only reads.
	sc.calls = nil
	if res, err = h.Apply(ctx, rulesetV1(inet.IPv6)); err != nil || res.Changed() {
		t.Fatalf("re-apply: %v %v", res, err)
	}
	if !slices.Equal(sc.calls, []string{"ip6tables-legacy-save -c"}) {
		t.Fatalf("re-apply commands: %q", sc.calls)
	}

	// A change touches only the chains and jumps that differ.
	res, err = h.Apply(ctx, rulesetV2(inet.IPv6))
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "ipv6-v2-payload-filter.golden", res.Payloads[TableFilter])
	golden.Check(t, "ipv6-v2-payload-nat.golden", res.Payloads[TableNAT])

	res, err = h.Remove(ctx)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "ipv6-remove-payload-nat.golden", res.Payloads[TableNAT])
}

// A restore that the kernel accepts but saves differently (a rule not in canonical form that
// Canonical does not know about) is reported instead of re-applied forever.
func TestHandleVerifiesReadBack(t *testing.T) {
	ctx := context.Background()
	fk := NewFake(inet.IPv4)
	sc := &script{fk: fk}
	h, err := New(netns.None(), inet.IPv4, Backend{Mode: ModeNFT}, WithRunner(RunnerFunc(func(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
		if strings.HasSuffix(name, "-restore") {
			// the "kernel" canonicalises a rule
			stdin = []byte(strings.ReplaceAll(string(stdin), "-j MARK --set-xmark 0x4000/0x4000", "-j MARK --set-xmark 0x4000/0xffffffff"))
		}
		return sc.Run(ctx, stdin, name, args...)
	})))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Apply(ctx, rulesetV1(inet.IPv4))
	if !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), "KUBE-MARK-MASQ") {
		t.Fatalf("error %v", err)
	}
}

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
