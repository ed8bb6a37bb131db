package rtsched

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/testutil/poll"
	"golang.org/x/sys/unix"
)

// TestFavorOneThreadOnly: the favored goroutine's thread runs under SCHED_FIFO at priority
// 1, and once that goroutine has returned no thread of the process does (its thread ended
// with it), read from every thread of the process.
func TestFavorOneThreadOnly(t *testing.T) {
	type outcome struct {
		err              error
		policy, priority uint32
	}
	got := make(chan outcome)
	go func() {
		restore, err := Favor()
		defer restore()
		o := outcome{err: err}
		if err == nil {
			o.policy, o.priority, o.err = Policy()
		}
		got <- o
	}()
	o := <-got
	switch {
	case errors.Is(o.err, unix.EPERM):
		t.Skip("no CAP_SYS_NICE here:", o.err)
	case errors.Is(o.err, ErrOneCPU):
		t.Skip("one CPU:", o.err)
	case o.err != nil:
		t.Fatal(o.err)
	case o.policy != unix.SCHED_FIFO || o.priority != 1:
		t.Fatalf("favored thread: policy %d priority %d, want SCHED_FIFO (%d) priority 1", o.policy, o.priority, unix.SCHED_FIFO)
	}
	// Every thread of the process, once the favored one has ended (just after its goroutine
	// returned).
	poll.Until(t, 5*time.Second, "no thread under SCHED_FIFO", func() (bool, string) {
		fifo := fifoThreads(t)
		return len(fifo) == 0, fmt.Sprintf("threads %v run under SCHED_FIFO after the favored goroutine returned", fifo)
	})
}

// fifoThreads lists the process's threads under SCHED_FIFO.
func fifoThreads(t *testing.T) []int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var fifo []int
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // the thread ended since
		}
		if err != nil {
			t.Fatal(err)
		}
		if attr.Policy == unix.SCHED_FIFO {
			fifo = append(fifo, tid)
		}
	}
	return fifo
}
