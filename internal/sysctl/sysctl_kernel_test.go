//go:build kernel

package sysctl_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/sysctl"
	"github.com/kipvs/kipvs/internal/testutil/golden"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// nsSysctl reads keys with one sysctl(8) run inside the namespace.
func nsSysctl(t *testing.T, ns *netnstest.NS, keys ...string) []string {
	t.Helper()
	return lines(ns.MustRun(t, append([]string{"sysctl", "-n"}, keys...)...))
}

// rootSysctl reads keys with sysctl(8) in the test's own (the VM's root) namespace.
func rootSysctl(t *testing.T, keys ...string) []string {
	t.Helper()
	out, err := exec.Command("sysctl", append([]string{"-n"}, keys...)...).Output()
	if err != nil {
		t.Fatalf("sysctl -n %s: %v", keys, err)
	}
	return lines(string(out))
}

func lines(out string) []string {
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range ls {
		ls[i] = sysctl.Normalize(l)
	}
	return ls
}

// The shared table against the kernel's /proc/sys, bound to a fresh namespace whose keys
// were first set to the baseline with sysctl(8).
func TestOpsKernel(t *testing.T) {
	ns := netnstest.New(t)
	ns.MustRun(t, "ip", "link", "add", dotIface, "type", "dummy")
	args := []string{"sysctl", "-q", "-w"}
	for k, v := range baseline() {
		args = append(args, k+"="+v)
	}
	ns.MustRun(t, args...)
	observe := func(t *testing.T, keys []string) []string { return nsSysctl(t, ns, keys...) }
	golden.Check(t, "ops.golden", runOps(t, sysctl.New("", ns.Handle), observe))
}

// /proc/sys/net belongs to the namespace of the opening thread: a Sysctl bound to a test
// namespace changes that namespace only, whichever goroutine calls it, and one bound to
// netns.None() sees the caller's (here the VM's root) namespace.
func TestNamespaceIsolationKernel(t *testing.T) {
	keys := []string{"net.ipv4.ip_forward", "net.ipv4.vs.conntrack"}
	rootBefore := rootSysctl(t, keys...)
	ns := netnstest.New(t)
	nsBefore := nsSysctl(t, ns, keys...)
	in := sysctl.New("", ns.Handle)
	root := sysctl.New("", netns.None())
	want := make([]string, len(keys))
	for i, k := range keys {
		want[i] = "1"
		if rootBefore[i] == "1" {
			want[i] = "0"
		}
		old, changed, err := in.Set(k, want[i])
		if err != nil || !changed || old != nsBefore[i] {
			t.Fatalf("Set(%s, %s) in %s = %q, %t, %v; want old %q, changed", k, want[i], ns.Name, old, changed, err, nsBefore[i])
		}
		if got, err := in.Get(k); err != nil || got != want[i] {
			t.Errorf("Get(%s) in %s = %q, %v; want %q", k, ns.Name, got, err, want[i])
		}
		if got, err := root.Get(k); err != nil || got != rootBefore[i] {
			t.Errorf("Get(%s) with netns.None() = %q, %v; want the root namespace's %q", k, got, err, rootBefore[i])
		}
	}
	if got := nsSysctl(t, ns, keys...); !slices.Equal(got, want) {
		t.Errorf("%s in %s after Set: %q, want %q", keys, ns.Name, got, want)
	}
	if got := rootSysctl(t, keys...); !slices.Equal(got, rootBefore) {
		t.Errorf("%s in the root namespace changed from %q to %q", keys, rootBefore, got)
	}
}

// The kernel's own rejections: a value it cannot parse is kerr.ErrInvalid (EINVAL) and
// leaves the key alone.
func TestInvalidValueKernel(t *testing.T) {
	ns := netnstest.New(t)
	s := sysctl.New("", ns.Handle)
	before, err := s.Get("net.ipv4.vs.conntrack")
	if err != nil {
		t.Fatal(err)
	}
	_, changed, err := s.Set("net.ipv4.vs.conntrack", "yes")
	if !kerr.IsInvalid(err) || !errors.Is(err, syscall.EINVAL) || changed ||
		!strings.Contains(err.Error(), "net.ipv4.vs.conntrack") {
		t.Fatalf("Set of a non-number = %t, %v; want ErrInvalid/EINVAL naming the key", changed, err)
	}
	if got := nsSysctl(t, ns, "net.ipv4.vs.conntrack")[0]; got != before {
		t.Fatalf("value after a rejected Set = %q, want %q", got, before)
	}
}

// A read-only root (as /proc/sys is in many containers): a Set that changes nothing
// succeeds without writing, a Set that would change the value fails with EROFS and names
// the key, and is not mistaken for a missing key.
func TestReadOnlyRootKernel(t *testing.T) {
	root := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "kipvs-sysctl", root).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", root).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", root, err, out)
		}
	})
	writeTree(t, root, map[string]string{"net/ipv4/ip_forward": "1"})
	if out, err := exec.Command("mount", "-o", "remount,ro", root).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v: %s", err, out)
	}
	s := sysctl.New(root, netns.None())
	if old, changed, err := s.Set("net.ipv4.ip_forward", "1"); err != nil || changed || old != "1" {
		t.Fatalf("Set of the current value on a read-only root = %q, %t, %v", old, changed, err)
	}
	old, changed, err := s.Set("net.ipv4.ip_forward", "0")
	if !errors.Is(err, syscall.EROFS) || kerr.IsNotFound(err) || changed || old != "1" ||
		!strings.Contains(err.Error(), "net.ipv4.ip_forward") {
		t.Fatalf("Set of a new value on a read-only root = %q, %t, %v; want EROFS naming the key", old, changed, err)
	}
	if _, err := s.Get("net.ipv4.vs.conntrack"); !kerr.IsNotFound(err) {
		t.Fatalf("Get of a missing key on a read-only root = %v, want ErrNotFound", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "net/ipv4/ip_forward")); string(b) != "1\n" {
		t.Fatalf("file changed to %q", b)
	}
}
