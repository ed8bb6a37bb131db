package conntrack_test

import (
	"testing"

	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
)

// A fault on a flow stops Delete there, the flows before it deleted; a failed dump deletes
// nothing.
func TestFakeFaulty(t *testing.T) {
	f := conntracktest.NewFake(seedFlows()...)
	before, _ := f.Dump()
	in := faulty.New(1, 0)
	f.SetFaulty(in)
	in.SetProbability(0, 1)
	if n, err := deleteByOrigDst(f, inet.UDP, ap("10.96.0.10:53")); n != 0 || !faulty.IsInjected(err) {
		t.Errorf("Delete with a failed dump = %d, %v", n, err)
	}
	if _, err := f.List(); !faulty.IsInjected(err) {
		t.Errorf("List = %v", err)
	}
	in.SetProbability(1, 0)
	if n, err := deleteByOrigDst(f, inet.UDP, ap("10.96.0.10:53")); n != 0 || !faulty.IsInjected(err) {
		t.Errorf("Delete with every flow failing = %d, %v", n, err)
	}
	if after, _ := f.Dump(); after != before {
		t.Errorf("failed deletes changed the flows:\n%s", after)
	}
	in.SetProbability(0, 0)
	if n, err := deleteByOrigDst(f, inet.UDP, ap("10.96.0.10:53")); n != 3 || err != nil {
		t.Errorf("Delete without faults = %d, %v; want the 3 flows", n, err)
	}
}
