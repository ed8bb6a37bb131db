// Package rtsched gives the calling goroutine's OS thread the real-time scheduler, for
// kernel work that per-CPU kernel workers would otherwise interleave with.
//
// Why: each IPv4 address the kernel binds queues its address-lifetime check
// (check_lifetime, a walk over every IPv4 address of the node) on the binding CPU's
// workqueue, at once. An ordinary thread is preempted by that worker at the next request
// of a batch, so a first sync that binds N VIPs runs the check N times: a third walk over
// the addresses per VIP beside the kernel's two own (about half of the kernel's time in
// the binds at 20,000 VIPs, perf in the VM). A thread under SCHED_FIFO is not preempted by
// ordinary workers: the check runs when the thread yields (between messages, and in the
// 5% of each second the kernel keeps for ordinary threads, sched_rt_runtime_us), once for
// many binds, and sees them all.
package rtsched

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrOneCPU is Favor's error on a machine, or under a CPU affinity, of one CPU: the thread
// would hold back every other thread of the node while it binds.
var ErrOneCPU = errors.New("one CPU: the thread keeps the ordinary scheduler")

// Favor locks the calling goroutine to its OS thread and gives that thread SCHED_FIFO at
// priority 1, the lowest real-time priority, reset to the ordinary scheduler in any thread
// it creates (SCHED_FLAG_RESET_ON_FORK; Go creates threads from a locked one through
// another thread anyway). The goroutine calls restore before it returns, and must not
// unlock the thread: Go ends a thread whose goroutine returns locked (the process's main
// thread is parked for good instead), so nothing else ever runs on it. Favor fails, the
// thread locked but unchanged (restore is then a no-op), without CAP_SYS_NICE (or
// RLIMIT_RTPRIO), where real-time policies are forbidden (systemd's RestrictRealtime) and
// with one CPU (ErrOneCPU).
func Favor() (restore func(), err error) {
	runtime.LockOSThread()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil && set.Count() < 2 {
		return func() {}, ErrOneCPU
	}
	attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1, Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return func() {}, fmt.Errorf("set SCHED_FIFO on the binding thread: %w", err)
	}
	return func() {
		// Lowering the policy needs no privilege.
		_ = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_NORMAL}, 0)
	}, nil
}

// Policy reports the calling thread's scheduling policy and real-time priority (tests).
func Policy() (policy uint32, priority uint32, err error) {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return 0, 0, err
	}
	return attr.Policy, attr.Priority, nil
}
