package dummyif_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/kerr"
)

// This file holds the operation table shared by the fake (fake_test.go) and the kernel
// (dummyif_kernel_test.go). Each run produces a transcript (every step's outcome, typed
// error and errno, and the dumps) that must equal testdata/ops.golden.

const testLink = "kipvs-dummy0"

// harness is what the table needs from one implementation's environment.
type harness struct {
	impl dummyif.Interface
	// foreign replaces the link by a veth of the same name, created by someone else.
	foreign func(t *testing.T)
	// observe reads the link independently (the kernel test uses `ip`); nil for the fake.
	// It returns the Dump format.
	observe func(t *testing.T) string
}

type step struct {
	name string
	run  func(h *harness, t *testing.T) (string, error)
}

func mk(name string, fn func(i dummyif.Interface) error) step {
	return step{name, func(h *harness, _ *testing.T) (string, error) { return "", fn(h.impl) }}
}

func addr(s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	return netip.MustParseAddr(s)
}

func add(s string) step {
	return mk("add "+s, func(i dummyif.Interface) error { return i.AddAddress(addr(s)) })
}

func del(s string) step {
	return mk("delete "+s, func(i dummyif.Interface) error { return i.DeleteAddress(addr(s)) })
}

func ensure(s string) step {
	return step{"ensure " + s, func(h *harness, _ *testing.T) (string, error) {
		added, err := h.impl.EnsureAddress(addr(s))
		return fmt.Sprintf("added=%t", added), err
	}}
}

// ensureAll binds every address of ss with one EnsureAddresses.
func ensureAll(ss ...string) step {
	return step{"ensure all " + strings.Join(ss, ","), func(h *harness, _ *testing.T) (string, error) {
		as := make([]netip.Addr, len(ss))
		for i, s := range ss {
			as[i] = addr(s)
		}
		errs := h.impl.EnsureAddresses(as)
		out := make([]string, len(errs))
		for i, err := range errs {
			out[i] = outcome(err)
		}
		return "[" + strings.Join(out, " ") + "]", nil
	}}
}

func remove(s string) step {
	return step{"remove " + s, func(h *harness, _ *testing.T) (string, error) {
		removed, err := h.impl.RemoveAddress(addr(s))
		return fmt.Sprintf("removed=%t", removed), err
	}}
}

func ensureLink() step {
	return step{"ensure link", func(h *harness, _ *testing.T) (string, error) {
		created, err := h.impl.EnsureLink()
		return fmt.Sprintf("created=%t", created), err
	}}
}

func deleteLink() step {
	return mk("delete link", func(i dummyif.Interface) error { return i.DeleteLink() })
}

func list() step {
	return step{"addresses", func(h *harness, _ *testing.T) (string, error) {
		ps, err := h.impl.Addresses()
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = p.String()
		}
		if err != nil {
			return "", err
		}
		return "[" + strings.Join(s, " ") + "]", nil
	}}
}

// dump records the implementation's Dump and, when the harness can, checks it against an
// independent reading of the kernel.
func dump() step {
	return step{"dump", func(h *harness, t *testing.T) (string, error) {
		d, err := h.impl.Dump()
		if err == nil && h.observe != nil {
			if got := h.observe(t); got != d {
				t.Errorf("Dump() and the independent reading differ (-dump +observed):\n%s", cmp.Diff(d, got))
			}
		}
		return "\n" + strings.TrimSuffix(d, "\n"), err
	}}
}

func foreign() step {
	return step{"replace link by a veth", func(h *harness, t *testing.T) (string, error) {
		h.foreign(t)
		return "", nil
	}}
}

// opTable covers the link's life cycle, IPv4 and IPv6 host addresses, the idempotent
// helpers, the typed errors of duplicate, missing and invalid addresses, the order of
// Addresses and Dump, and a link of the name that is not a dummy.
func opTable() []step {
	return []step{
		dump(),
		add("10.96.0.1"),
		list(),
		deleteLink(),
		remove("10.96.0.1"),
		ensureAll("10.96.0.1", "fd00::1"),
		ensureLink(),
		ensureLink(),
		dump(),
		add("10.96.0.1"),
		add("10.96.0.1"),
		add("fd00::1"),
		add("fd00::1"),
		ensure("10.96.0.2"),
		ensure("10.96.0.2"),
		ensure("fd00::2"),
		ensureAll("10.96.0.2", "10.96.0.30", "", "fd00::30", "224.0.0.1", "fd00::2", "10.96.0.31", "10.96.0.30"),
		list(),
		add(""),
		add("224.0.0.1"),
		add("ff02::1"),
		add("0.0.0.0"),
		add("::"),
		add("::ffff:10.96.0.3"),
		add("fe80::1%eth0"),
		del("10.96.0.99"),
		del("fd00::99"),
		del("10.96.0.2"),
		del("10.96.0.2"),
		remove("fd00::2"),
		remove("fd00::2"),
		add("192.168.0.1"),
		add("10.0.0.5"),
		add("2001:db8::1"),
		add("fd00::10"),
		add("172.16.0.1"),
		list(),
		dump(),
		deleteLink(),
		dump(),
		list(),
		ensureLink(),
		list(),
		add("10.96.0.7"),
		dump(),
		foreign(),
		add("10.96.0.9"), // the link an address change knew is gone: looked up again
		ensureAll("10.96.0.9"),
		ensureLink(),
		ensureAll("10.96.0.10", "10.96.0.11"),
		add("10.96.0.8"),
		del("10.96.0.7"),
		remove("10.96.0.7"),
		list(),
		deleteLink(),
		dump(),
	}
}

// runOps applies the table and returns the transcript.
func runOps(t *testing.T, h *harness) string {
	t.Helper()
	var b strings.Builder
	for i, s := range opTable() {
		out, err := s.run(h, t)
		fmt.Fprintf(&b, "%02d %s: %s", i, s.name, outcome(err))
		switch {
		case strings.HasPrefix(out, "\n"):
			b.WriteString(out)
		case out != "":
			b.WriteString(" " + out)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// outcome names an error by its kerr type (and ErrNotDummy) and errno, which real and fake
// share, not by its text.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var kind string
	switch {
	case errors.Is(err, dummyif.ErrNotDummy):
		kind = "not a dummy"
	case kerr.IsNotFound(err):
		kind = "not found"
	case kerr.IsExists(err):
		kind = "exists"
	case kerr.IsInvalid(err):
		kind = "invalid"
	case kerr.IsBusy(err):
		kind = "busy"
	default:
		kind = "untyped error: " + err.Error()
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		kind += " " + unix.ErrnoName(errno)
	}
	return "error: " + kind
}
