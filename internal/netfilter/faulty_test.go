package netfilter

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
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
	filterBefore, natBefore := fk.Save(TableFilter), fk.Save(TableNAT)
	res, err := fk.Apply(ctx, rulesetV1(inet.IPv4))
	var re *RestoreError
	if !faulty.IsInjected(err) || !errors.As(err, &re) || re.Text != "COMMIT" {
		t.Fatalf("Apply = %v, want an injected fault at a COMMIT", err)
	}
	if !slices.Equal(res.Restored, []Table{TableFilter}) {
		t.Errorf("restored %v, want [filter]", res.Restored)
	}
	if fk.Save(TableFilter) == filterBefore {
		t.Error("the filter table, committed before the fault, did not change")
	}
	if got := fk.Save(TableNAT); got != natBefore {
		t.Errorf("the nat table changed at its failed COMMIT:\n%s", got)
	}

	in.SetProbability(0, 1)
	if _, err := fk.Observe(ctx); !faulty.IsInjected(err) {
		t.Errorf("Observe with read faults = %v", err)
	}
	in.SetProbability(0, 0)
	if _, err := fk.Apply(ctx, rulesetV1(inet.IPv4)); err != nil {
		t.Fatalf("Apply without faults: %v", err)
	}
	if d := dump(t, fk); d != Format(rulesetV1(inet.IPv4)) {
		t.Errorf("after the retry:\n%s", d)
	}
}
