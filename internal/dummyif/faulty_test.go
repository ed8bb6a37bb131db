package dummyif_test

import (
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/faulty"
)

// Failed requests change nothing; Addresses fails as a read; Dump keeps working.
func TestFakeFaulty(t *testing.T) {
	f := dummyiftest.NewFake("")
	if _, err := f.EnsureLink(); err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("10.96.0.2")
	if err := f.AddAddress(a); err != nil {
		t.Fatal(err)
	}
	before, _ := f.Dump()
	in := faulty.New(1, 1)
	f.SetFaulty(in)
	if _, err := f.EnsureAddress(b); !faulty.IsInjected(err) {
		t.Errorf("EnsureAddress = %v", err)
	}
	if _, err := f.RemoveAddress(a); !faulty.IsInjected(err) {
		t.Errorf("RemoveAddress = %v", err)
	}
	if err := f.DeleteLink(); !faulty.IsInjected(err) {
		t.Errorf("DeleteLink = %v", err)
	}
	if _, err := f.EnsureLink(); err != nil {
		t.Errorf("EnsureLink of an existing link sends nothing, so cannot fail: %v", err)
	}
	if after, _ := f.Dump(); after != before {
		t.Errorf("failed requests changed the link:\n%s\nwant\n%s", after, before)
	}
	in.SetProbability(0, 1)
	if _, err := f.Addresses(); !faulty.IsInjected(err) {
		t.Errorf("Addresses = %v", err)
	}
}
