package ipvs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
)

// With random faults, a batch applies exactly its ops that did not fail (the kernel applies
// a batch op by op), reads fail while Dump keeps working.
func TestFakeFaulty(t *testing.T) {
	f := ipvstest.NewFake()
	k := tcp("10.0.0.1:80")
	if err := f.AddService(ipvs.Service{ServiceKey: k, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	in := faulty.New(3, 0.5)
	f.SetFaulty(in)
	var ops []ipvs.Op
	for i := range 20 {
		ops = append(ops, ipvs.AddDestinationOp(k, masq(fmt.Sprintf("10.1.0.%d:80", i+1), 1)))
	}
	err := f.Apply(ops)
	var be *ipvs.BatchError
	if !errors.As(err, &be) || !faulty.IsInjected(err) {
		t.Fatalf("Apply = %v, want a BatchError of injected faults", err)
	}
	failed := map[int]bool{}
	for _, oe := range be.Errors {
		failed[oe.Index] = true
	}
	if len(failed) == 0 || len(failed) == len(ops) {
		t.Fatalf("%d of %d ops failed at p=0.5", len(failed), len(ops))
	}
	want := []ipvs.Entry{{Service: ipvs.Service{ServiceKey: k, Scheduler: "rr", Netmask: ipvs.FullNetmask(inet.IPv4)}}}
	for i, o := range ops {
		if !failed[i] {
			want[0].Destinations = append(want[0].Destinations, o.Destination)
		}
	}
	want[0].Service.Family = inet.IPv4
	ipvs.SortTable(want)
	if got, w := mustDump(t, f), ipvs.FormatDump(want); got != w {
		t.Errorf("state after the batch:\n%s\nwant the ops that did not fail:\n%s", got, w)
	}
	if len(in.Injected()) != len(failed) {
		t.Errorf("Injected() = %d faults, BatchError %d", len(in.Injected()), len(failed))
	}

	in.SetProbability(0, 1)
	if _, err := f.Table(); !faulty.IsInjected(err) {
		t.Errorf("Table with read faults = %v", err)
	}
	if d, err := f.Dump(); err != nil || d != ipvs.FormatDump(want) {
		t.Errorf("Dump with read faults = %q, %v; want the state after the batch", d, err)
	}
	in.SetProbability(1, 0)
	before := mustDump(t, f)
	if err := f.DeleteService(k); !faulty.IsInjected(err) {
		t.Errorf("DeleteService = %v", err)
	}
	if err := f.Flush(); !faulty.IsInjected(err) {
		t.Errorf("Flush = %v", err)
	}
	if got := mustDump(t, f); got != before {
		t.Errorf("failed requests changed the state:\n%s\nwant\n%s", got, before)
	}
}
