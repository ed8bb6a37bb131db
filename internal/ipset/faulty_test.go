package ipset_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
)

// With random faults, an Add applies its members up to the failing one, as an ipset restore
// batch stops at its failing line; failed Create, Destroy and Flush change nothing; reads
// fail while Dump keeps working.
func TestFakeFaulty(t *testing.T) {
	f := ipsettest.NewFake()
	s := ipset.Set{Name: "KUBE-CLUSTER-IP", Type: ipset.HashIPPort}
	if err := f.Create(s); err != nil {
		t.Fatal(err)
	}
	in := faulty.New(1, 0.2)
	f.SetFaulty(in)
	all := ents(ipset.HashIPPort, "10.0.0.1,tcp:80", "10.0.0.2,tcp:80", "10.0.0.3,tcp:80", "10.0.0.4,tcp:80",
		"10.0.0.5,tcp:80", "10.0.0.6,tcp:80", "10.0.0.7,tcp:80", "10.0.0.8,tcp:80", "10.0.0.9,tcp:80", "10.0.0.10,tcp:80")
	in.SetProbability(0, 0)
	mutations := f.Mutations()
	in.SetProbability(0.2, 0)
	err := f.Add(s.Name, all...)
	if !faulty.IsInjected(err) {
		t.Fatalf("Add of 10 members at p=0.2 = %v, want an injected fault (pick another seed)", err)
	}
	applied := f.Mutations() - mutations - 1 // the members before the failing one
	in.SetProbability(0, 0)
	info, err := f.List(s.Name)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(all[:applied])
	got := info.Entries
	slices.SortFunc(want, func(a, b ipset.Entry) int { return strings.Compare(a.String(), b.String()) })
	slices.SortFunc(got, func(a, b ipset.Entry) int { return strings.Compare(a.String(), b.String()) })
	if !slices.Equal(got, want) {
		t.Errorf("members after a failed Add = %v, want the %d before the fault: %v", got, applied, want)
	}

	before := dumpOf(t, f)
	in.SetProbability(1, 1)
	for name, err := range map[string]error{
		"create":  f.Create(ipset.Set{Name: "KUBE-NODE-PORT-TCP", Type: ipset.BitmapPort}),
		"destroy": f.Destroy(s.Name),
		"flush":   f.Flush(s.Name),
		"del":     f.Del(s.Name, all[0]),
	} {
		if !faulty.IsInjected(err) {
			t.Errorf("%s = %v, want an injected fault", name, err)
		}
	}
	if _, err := f.ListNames(); !faulty.IsInjected(err) {
		t.Errorf("ListNames = %v, want an injected fault", err)
	}
	if got := dumpOf(t, f); got != before {
		t.Errorf("failed requests changed the state:\n%s\nwant\n%s", got, before)
	}
}

func dumpOf(t *testing.T, f *ipsettest.Fake) string {
	t.Helper()
	d, err := f.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
