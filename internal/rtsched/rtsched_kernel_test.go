//go:build kernel

package rtsched

import (
	"os"
	"strings"
	"testing"
)

// TestFavorSeenByTheKernel (in the VM's kernel): the favored thread's policy and
// real-time priority as /proc/thread-self/stat shows them to ps and top (fields 41 and 40),
// and the ordinary policy again once restore ran.
func TestFavorSeenByTheKernel(t *testing.T) {
	type seen struct {
		favored, restored [2]string
		err               error
	}
	got := make(chan seen)
	go func() {
		var s seen
		restore, err := Favor()
		if err != nil {
			restore()
			s.err = err
			got <- s
			return
		}
		s.favored, s.err = policyFromProc()
		restore()
		if s.err == nil {
			s.restored, s.err = policyFromProc()
		}
		got <- s
	}()
	s := <-got
	if s.err != nil {
		t.Fatal(s.err) // root in the VM, two CPUs: Favor must work
	}
	if s.favored != [2]string{"1", "1"} {
		t.Errorf("favored thread: policy %s rt_priority %s, want SCHED_FIFO (1) at 1", s.favored[0], s.favored[1])
	}
	if s.restored != [2]string{"0", "0"} {
		t.Errorf("after restore: policy %s rt_priority %s, want SCHED_NORMAL (0) at 0", s.restored[0], s.restored[1])
	}
}

// policyFromProc reads the calling thread's policy and rt_priority from
// /proc/thread-self/stat (the fields after the command's closing parenthesis).
func policyFromProc() ([2]string, error) {
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		return [2]string{}, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	return [2]string{f[41-3], f[40-3]}, nil
}
