package faulty

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"syscall"
	"testing"

	"github.com/kipvs/kipvs/internal/kerr"
)

// The same seed fails the same requests, whatever the order different requests come in;
// another seed fails others; the rate is about the probability.
func TestInjectorDeterministic(t *testing.T) {
	ops := make([]string, 200)
	for i := range ops {
		ops[i] = fmt.Sprintf("op %d", i%50) // each asked 4 times
	}
	run := func(seed uint64, order []string) map[string]int {
		in := New(seed, 0.3)
		failed := map[string]int{}
		for _, op := range order {
			if in.Mutation(op) != nil {
				failed[op]++
			}
		}
		return failed
	}
	rev := slices.Clone(ops)
	slices.Reverse(rev)
	a, b, c := run(1, ops), run(1, rev), run(2, ops)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("order changed the decisions:\n%v\n%v", a, b)
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Errorf("seeds 1 and 2 failed the same requests: %v", a)
	}
	n := 0
	for _, v := range a {
		n += v
	}
	if math.Abs(float64(n)/float64(len(ops))-0.3) > 0.12 {
		t.Errorf("%d of %d failed at p=0.3", n, len(ops))
	}
}

// Injected errors carry the errno and its kerr type; reads fail only when asked; off and nil
// never fail.
func TestInjectorErrors(t *testing.T) {
	in := New(7, 1, syscall.EBUSY)
	err := in.Mutation("add service TCP 10.96.0.1:80")
	if !errors.Is(err, syscall.EBUSY) || !kerr.IsBusy(err) || !IsInjected(err) {
		t.Fatalf("err = %v, want an injected EBUSY matching kerr.ErrBusy", err)
	}
	if err := in.Read("list"); err != nil {
		t.Errorf("read failed with read probability 0: %v", err)
	}
	in.SetProbability(0, 1)
	if err := in.Mutation("x"); err != nil {
		t.Errorf("mutation failed with probability 0: %v", err)
	}
	if err := in.Read("list"); !IsInjected(err) {
		t.Errorf("read = %v, want an injected fault", err)
	}
	mine := errors.New("xtables lock held")
	if err := New(1, 1, mine).Mutation("restore"); !errors.Is(err, mine) || err.Error() != "injected fault: xtables lock held" {
		t.Errorf("custom error = %v", err)
	}
	in.SetProbability(1, 1)
	in.SetFilter(func(op string) bool { return op != "spared" })
	if err := in.Mutation("spared"); err != nil {
		t.Errorf("a request the filter leaves out failed: %v", err)
	}
	if err := in.Mutation("other"); !IsInjected(err) {
		t.Errorf("a request the filter keeps = %v", err)
	}
	if got := in.Injected(); len(got) != 3 {
		t.Errorf("Injected = %q, want the three faults", got)
	}
	var none *Injector
	if none.Mutation("x") != nil || none.Read("x") != nil || none.Injected() != nil {
		t.Error("a nil Injector failed something")
	}
}
