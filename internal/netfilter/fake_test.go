package netfilter_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

func fakeEnv(t *testing.T, f inet.Family) (*netfiltertest.Fake, netfilter.ScenarioEnv) {
	fk := netfiltertest.NewFake(f)
	fk.SetIPSets(func(name string) bool {
		for s := range netfilter.ScenarioSets {
			if name == netfilter.SetName(f, s) {
				return true
			}
		}
		return false
	})
	return fk, netfilter.NewScenarioEnv(
		fk,
		func(t *testing.T, payload string) {
			t.Helper()
			if err := fk.Restore(payload); err != nil {
				t.Fatalf("foreign restore: %v", err)
			}
		},
		func(t *testing.T) string { return fk.Save(netfilter.TableFilter) + fk.Save(netfilter.TableNAT) },
	)
}

func TestScenarioFake(t *testing.T) {
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			_, env := fakeEnv(t, f)
			netfilter.RunScenario(t, env)
		})
	}
}

func TestFakeFaultInjection(t *testing.T) {
	ctx := context.Background()
	fk, _ := fakeEnv(t, inet.IPv4)
	boom := errors.New("boom")
	fk.FailNext(netfiltertest.OpApply, boom)
	if _, err := fk.Apply(ctx, netfilter.RulesetV1(inet.IPv4)); !errors.Is(err, boom) {
		t.Fatalf("apply with fault: %v", err)
	}
	if d := netfilter.Dump(t, fk); d != "" {
		t.Fatalf("a failed apply changed the tables:\n%s", d)
	}
	if _, err := fk.Apply(ctx, netfilter.RulesetV1(inet.IPv4)); err != nil {
		t.Fatalf("the fault must hit only the next apply: %v", err)
	}
	fk.FailNext(netfiltertest.OpObserve, boom)
	if _, err := fk.Observe(ctx); !errors.Is(err, boom) {
		t.Fatalf("observe with fault: %v", err)
	}
	fk.FailNext(netfiltertest.OpRemove, boom)
	if _, err := fk.Remove(ctx); !errors.Is(err, boom) {
		t.Fatalf("remove with fault: %v", err)
	}
	fk.FailNext(netfiltertest.OpDump, boom)
	if _, err := fk.Dump(ctx); !errors.Is(err, boom) {
		t.Fatalf("dump with fault: %v", err)
	}
	if d := netfilter.Dump(t, fk); d != netfilter.Format(netfilter.RulesetV1(inet.IPv4)) {
		t.Fatalf("faults changed the tables:\n%s", d)
	}
}

// The fake rejects what iptables-restore rejects, with the same typed errors.
func TestFakeRejections(t *testing.T) {
	cases := []struct {
		name    string
		payload string
		kind    error
	}{
		{"jump to a missing chain", "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-NOPE\nCOMMIT\n", kerr.ErrNotFound},
		{"delete a referenced chain", "*nat\n:A - [0:0]\n:B - [0:0]\n-A A -j B\n-X B\nCOMMIT\n", kerr.ErrBusy},
		{"delete a non-empty chain", "*nat\n:A - [0:0]\n-A A -j RETURN\n-X A\nCOMMIT\n", kerr.ErrBusy},
		{"delete a missing chain", "*nat\n-X NOPE\nCOMMIT\n", kerr.ErrNotFound},
		{"delete a missing rule", "*nat\n-D PREROUTING -j RETURN\nCOMMIT\n", kerr.ErrNotFound},
		{"delete a built-in chain", "*nat\n-X PREROUTING\nCOMMIT\n", kerr.ErrInvalid},
		{"rule in a missing chain", "*nat\n-A NOPE -j RETURN\nCOMMIT\n", kerr.ErrNotFound},
		{"insert too far", "*nat\n-I PREROUTING 2 -j RETURN\nCOMMIT\n", kerr.ErrInvalid},
		{"missing ipset", "*nat\n-A PREROUTING -m set --match-set KUBE-NOPE dst -j RETURN\nCOMMIT\n", kerr.ErrNotFound},
		{"create twice", "*nat\n-N A\n-N A\nCOMMIT\n", kerr.ErrExists},
		{"no COMMIT", "*nat\n:A - [0:0]\n", kerr.ErrInvalid},
		{"unknown table", "*nope\nCOMMIT\n", kerr.ErrNotFound},
		{"jump to a built-in chain", "*nat\n-A PREROUTING -j OUTPUT\nCOMMIT\n", kerr.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fk, _ := fakeEnv(t, inet.IPv4)
			before := fk.Save(netfilter.TableNAT)
			err := fk.Restore(c.payload)
			if !errors.Is(err, c.kind) {
				t.Fatalf("error %v, want %v", err, c.kind)
			}
			if after := fk.Save(netfilter.TableNAT); after != before {
				t.Fatalf("a failed restore changed the table:\n%s", after)
			}
		})
	}
}

// Under --noflush a `:CHAIN` line flushes a user chain and only sets a built-in chain's policy.
func TestFakeNoflushSemantics(t *testing.T) {
	fk, _ := fakeEnv(t, inet.IPv4)
	if err := fk.Restore("*filter\n:A - [0:0]\n-A A -j RETURN\n-A INPUT -j A\nCOMMIT\n"); err != nil {
		t.Fatal(err)
	}
	if err := fk.Restore("*filter\n:INPUT DROP [0:0]\n:A - [0:0]\n-A A -j ACCEPT\nCOMMIT\n"); err != nil {
		t.Fatal(err)
	}
	want := "*filter\n:INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:A - [0:0]\n-A INPUT -j A\n-A A -j ACCEPT\nCOMMIT\n"
	if got := fk.Save(netfilter.TableFilter); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// Concurrent use is safe (run with -race).
func TestFakeConcurrent(t *testing.T) {
	ctx := context.Background()
	fk, _ := fakeEnv(t, inet.IPv4)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rs := netfilter.RulesetV1(inet.IPv4)
			if i%2 == 1 {
				rs = netfilter.RulesetV2(inet.IPv4)
			}
			if _, err := fk.Apply(ctx, rs); err != nil {
				t.Errorf("apply: %v", err)
			}
			if _, err := fk.Observe(ctx); err != nil {
				t.Errorf("observe: %v", err)
			}
		}(i)
	}
	wg.Wait()
	d := netfilter.Dump(t, fk)
	if d != netfilter.Format(netfilter.RulesetV1(inet.IPv4)) && d != netfilter.Format(netfilter.RulesetV2(inet.IPv4)) {
		t.Fatalf("final state is neither ruleset:\n%s", d)
	}
}

// Counters of rules that survive a refill of their chain are carried over.
func TestCountersCarried(t *testing.T) {
	ctx := context.Background()
	fk, env := fakeEnv(t, inet.IPv4)
	if _, err := fk.Apply(ctx, netfilter.RulesetV1(inet.IPv4)); err != nil {
		t.Fatal(err)
	}
	// Give every KUBE-SERVICES rule counters, as traffic would.
	var p strings.Builder
	p.WriteString("*nat\n:KUBE-SERVICES - [0:0]\n")
	for _, r := range netfilter.RulesetV1(inet.IPv4)[netfilter.TableNAT].Chains[0].Rules {
		p.WriteString("[7:420] -A KUBE-SERVICES " + r + "\n")
	}
	p.WriteString("COMMIT\n")
	env.Foreign(t, p.String())
	res, err := fk.Apply(ctx, netfilter.RulesetV2(inet.IPv4))
	if err != nil {
		t.Fatal(err)
	}
	payload := res.Payloads[netfilter.TableNAT]
	// The unchanged rules keep their counters, the new and changed ones start at zero.
	const wantPayload = "*nat\n" +
		":KUBE-LOAD-BALANCER - [0:0]\n" +
		":KUBE-SERVICES - [0:0]\n" +
		"-D OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n" +
		"-A KUBE-SERVICES -s 127.0.0.0/8 -m comment --comment \"local traffic\" -j RETURN\n" +
		"[7:420] -A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment \"Kubernetes service cluster ip + port for masquerade purpose\" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ\n" +
		"-A KUBE-SERVICES -m comment --comment \"Kubernetes service external ip + port for masquerade and filter purpose\" -m set --match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ\n" +
		"[7:420] -A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT\n" +
		"[7:420] -A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT\n" +
		"[7:420] -A KUBE-SERVICES -m set --match-set KUBE-LOAD-BALANCER dst,dst -j ACCEPT\n" +
		"-X KUBE-LOAD-BALANCER\n" +
		"COMMIT\n"
	if payload != wantPayload {
		t.Fatalf("payload:\n%s\nwant:\n%s", payload, wantPayload)
	}
	out, _ := fk.Tables().Save(ctx)
	// The kernel keeps the counters of the rules the payload kept.
	golden.Check(t, "ipv4-counters-carried.golden", string(out))
}
