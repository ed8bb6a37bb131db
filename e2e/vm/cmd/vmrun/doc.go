// Command vmrun boots the kipvs kernel-test VM and runs a script or Go test binaries in it.
//
//	vmrun [flags] --script FILE
//	vmrun [flags] --test BIN [--test BIN ...] [-- extra test flags]
//
// With --test it runs every binary with -test.v, streams the console, and ends with the
// line "kernel: N passed, N failed" (top-level tests). A VM that does not boot, a binary
// that fails, or a run with no test at all exits non-zero. With --artifacts DIR, what the
// script or the tests write under /run/vm/artifacts is copied into DIR after the run.
package main
