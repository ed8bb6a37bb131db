package netfilter_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

func TestPlanJumps(t *testing.T) {
	own := map[string]bool{"A": true, "B": true, "C": true}
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
			dels, ins := netfilter.PlanJumps("X", c.cur, c.want, own)
			if !slices.Equal(dels, c.dels) || !slices.Equal(ins, c.ins) {
				t.Fatalf("dels %q ins %q, want %q %q", dels, ins, c.dels, c.ins)
			}
			if c.resulting == nil {
				return
			}
			// Replaying the payload on the fake gives the expected chain.
			fk := netfiltertest.NewFake(inet.IPv4, netfilter.WithOwned(netfilter.OwnedChains{netfilter.TableFilter: {"A", "B", "C"}}))
			var p strings.Builder
			p.WriteString("*filter\n:A - [0:0]\n:B - [0:0]\n:C - [0:0]\n:F1 - [0:0]\n:F2 - [0:0]\n")
			for _, r := range c.cur {
				p.WriteString("-A INPUT " + r + "\n")
			}
			p.WriteString("COMMIT\n*filter\n" + strings.ReplaceAll(strings.Join(append(dels, ins...), "\n"), " X ", " INPUT ") + "\nCOMMIT\n")
			if err := fk.Restore(p.String()); err != nil {
				t.Fatal(err)
			}
			got, err := netfilter.SavedSpecs(netfilter.TableFilter, []byte(fk.Save(netfilter.TableFilter)), "INPUT")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.resulting) {
				t.Fatalf("INPUT is %q, want %q", got, c.resulting)
			}
		})
	}
}

// script is a Runner that serves iptables-save output from a fake and records every command,
// so the real handle's commands and payloads can be checked without root.
type script struct {
	fk    *netfiltertest.Fake
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
		return s.fk.Tables().Save(ctx)
	case strings.HasSuffix(name, "-restore"):
		return nil, s.fk.Tables().Restore(ctx, string(stdin))
	}
	return nil, errors.New("unexpected command")
}

func TestHandleCommands(t *testing.T) {
	ctx := context.Background()
	sc := &script{fk: netfiltertest.NewFake(inet.IPv6)}
	h, err := netfilter.New(netns.None(), inet.IPv6, netfilter.Backend{Mode: netfilter.ModeLegacy, Reason: "test"}, netfilter.WithRunner(sc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Apply(ctx, netfilter.RulesetV1(inet.IPv6))
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
	golden.Check(t, "ipv6-v1-payload-nat.golden", res.Payloads[netfilter.TableNAT])
	if !strings.HasPrefix(res.Payloads[netfilter.TableFilter], "*filter\n") {
		t.Fatalf("filter payload:\n%s", res.Payloads[netfilter.TableFilter])
	}

	// Unchanged: only reads.
	sc.calls = nil
	if res, err = h.Apply(ctx, netfilter.RulesetV1(inet.IPv6)); err != nil || res.Changed() {
		t.Fatalf("re-apply: %v %v", res, err)
	}
	if !slices.Equal(sc.calls, []string{"ip6tables-legacy-save -c"}) {
		t.Fatalf("re-apply commands: %q", sc.calls)
	}

	// A change touches only the chains and jumps that differ.
	res, err = h.Apply(ctx, netfilter.RulesetV2(inet.IPv6))
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "ipv6-v2-payload-filter.golden", res.Payloads[netfilter.TableFilter])
	golden.Check(t, "ipv6-v2-payload-nat.golden", res.Payloads[netfilter.TableNAT])

	res, err = h.Remove(ctx)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "ipv6-remove-payload-nat.golden", res.Payloads[netfilter.TableNAT])
}

// A restore that the kernel accepts but saves differently (a rule not in canonical form that
// Canonical does not know about) is reported instead of re-applied forever.
func TestHandleVerifiesReadBack(t *testing.T) {
	ctx := context.Background()
	fk := netfiltertest.NewFake(inet.IPv4)
	sc := &script{fk: fk}
	h, err := netfilter.New(netns.None(), inet.IPv4, netfilter.Backend{Mode: netfilter.ModeNFT}, netfilter.WithRunner(netfilter.RunnerFunc(func(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
		if strings.HasSuffix(name, "-restore") {
			// the "kernel" canonicalises a rule
			stdin = []byte(strings.ReplaceAll(string(stdin), "-j MARK --set-xmark 0x4000/0x4000", "-j MARK --set-xmark 0x4000/0xffffffff"))
		}
		return sc.Run(ctx, stdin, name, args...)
	})))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Apply(ctx, netfilter.RulesetV1(inet.IPv4))
	if !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), "KUBE-MARK-MASQ") {
		t.Fatalf("error %v", err)
	}
}
