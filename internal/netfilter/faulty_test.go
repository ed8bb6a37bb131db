package netfilter_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/netfilter"
)

// A random fault at a table's COMMIT keeps the tables committed before it and changes nothing
// in its own, as iptables-restore does; a failed iptables-save fails Observe.
func TestFakeFaulty(t *testing.T) {
	ctx := context.Background()
	fk, _ := fakeEnv(t, inet.IPv4)
	// The restore commits filter, then nat. Pick a seed that fails nat's COMMIT only.
	var seed uint64
	for s := uint64(1); ; s++ {
		probe := faulty.New(s, 0.5)
		if probe.Mutation("iptables-restore COMMIT *filter") == nil && probe.Mutation("iptables-restore COMMIT *nat") != nil {
			seed = s
			break
		}
	}
	in := faulty.New(seed, 0.5)
	fk.SetFaulty(in)
	filterBefore, natBefore := fk.Save(netfilter.TableFilter), fk.Save(netfilter.TableNAT)
	res, err := fk.Apply(ctx, netfilter.RulesetV1(inet.IPv4))
	var re *netfilter.RestoreError
	if !faulty.IsInjected(err) || !errors.As(err, &re) || re.Text != "COMMIT" {
		t.Fatalf("Apply = %v, want an injected fault at a COMMIT", err)
	}
	if !slices.Equal(res.Restored, []netfilter.Table{netfilter.TableFilter}) {
		t.Errorf("restored %v, want [filter]", res.Restored)
	}
	if fk.Save(netfilter.TableFilter) == filterBefore {
		t.Error("the filter table, committed before the fault, did not change")
	}
	if got := fk.Save(netfilter.TableNAT); got != natBefore {
		t.Errorf("the nat table changed at its failed COMMIT:\n%s", got)
	}

	in.SetProbability(0, 1)
	if _, err := fk.Observe(ctx); !faulty.IsInjected(err) {
		t.Errorf("Observe with read faults = %v", err)
	}
	in.SetProbability(0, 0)
	if _, err := fk.Apply(ctx, netfilter.RulesetV1(inet.IPv4)); err != nil {
		t.Fatalf("Apply without faults: %v", err)
	}
	if d := netfilter.Dump(t, fk); d != netfilter.Format(netfilter.RulesetV1(inet.IPv4)) {
		t.Errorf("after the retry:\n%s", d)
	}
}
