package sysctl_test

import (
	"testing"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/sysctl/sysctltest"
)

// A failed write changes nothing; a value already in place is not written, so never fails.
func TestFakeFaulty(t *testing.T) {
	f := sysctltest.NewFake(map[string]string{"net/ipv4/vs/conntrack": "0", "net/ipv4/ip_forward": "1"})
	in := faulty.New(1, 1)
	f.SetFaulty(in)
	if _, _, err := f.Set("net.ipv4.vs.conntrack", "1"); !faulty.IsInjected(err) {
		t.Errorf("Set = %v", err)
	}
	if _, changed, err := f.Set("net.ipv4.ip_forward", "1"); err != nil || changed {
		t.Errorf("Set of the current value = %v, %v", changed, err)
	}
	if got := f.Dump(); got != "net/ipv4/ip_forward = 1\nnet/ipv4/vs/conntrack = 0\n" || f.Writes() != 0 {
		t.Errorf("after a failed write (%d writes):\n%s", f.Writes(), got)
	}
	in.SetProbability(0, 1)
	if _, err := f.Get("net.ipv4.ip_forward"); !faulty.IsInjected(err) {
		t.Errorf("Get = %v", err)
	}
}
