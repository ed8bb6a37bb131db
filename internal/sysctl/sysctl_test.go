package sysctl_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/sysctl"
	"github.com/kipvs/kipvs/internal/sysctl/sysctltest"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

func TestOpsFake(t *testing.T) {
	f := sysctltest.NewFake(baseline())
	golden.Check(t, "ops.golden", runOps(t, f, nil))
	if got, want := f.Writes(), 10; got != want {
		t.Errorf("the fake wrote %d times, want %d (one per Set that changed something)", got, want)
	}
}

// The real implementation on a directory that looks like /proc/sys.
func TestOpsTempRoot(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, baseline())
	golden.Check(t, "ops.golden", runOps(t, sysctl.New(root, netns.None()), fileObserver(root)))
}

func TestDefaultRoot(t *testing.T) {
	if got := sysctl.New("", netns.None()).Root(); got != sysctl.DefaultRoot {
		t.Fatalf("Root() = %q, want %q", got, sysctl.DefaultRoot)
	}
}

func TestPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"net.ipv4.vs.conntrack", "net/ipv4/vs/conntrack"},
		{"net/ipv4/vs/conntrack", "net/ipv4/vs/conntrack"},
		{"net.ipv4.conf.eth0/1.rp_filter", "net/ipv4/conf/eth0.1/rp_filter"},
		{"net/ipv4/conf/eth0.1/rp_filter", "net/ipv4/conf/eth0.1/rp_filter"},
		{"net.ipv4.conf.eth0.1.rp_filter", "net/ipv4/conf/eth0/1/rp_filter"},
		{"kernel", "kernel"},
	} {
		got, err := sysctl.Path(c.in)
		if err != nil || got != c.want {
			t.Errorf("Path(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", ".", "/", "net.", ".net", "net/", "/net", "net..ipv4", "net//ipv4",
		"net/../etc", "net/./ipv4", "net.ipv4./.x", "net.ipv4./..x", "net\x00x"} {
		if got, err := sysctl.Path(in); !kerr.IsInvalid(err) {
			t.Errorf("Path(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"1\n": "1", " 32768\t60999\n": "32768 60999", "": "", "a  b\tc": "a b c",
	} {
		if got := sysctl.Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// Errors name the key as the caller gave it, whatever the implementation.
func TestErrorsNameTheKey(t *testing.T) {
	root := t.TempDir()
	for _, impl := range []sysctl.Interface{sysctl.New(root, netns.None()), sysctltest.NewFake(nil)} {
		_, err := impl.Get("net.ipv4.vs.conntrack")
		if !kerr.IsNotFound(err) || !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "net.ipv4.vs.conntrack") {
			t.Errorf("%T: Get of a missing key: %v", impl, err)
		}
		_, _, err = impl.Set("net/ipv4/ip_forward", "1")
		if !kerr.IsNotFound(err) || !strings.Contains(err.Error(), "net/ipv4/ip_forward") {
			t.Errorf("%T: Set of a missing key: %v", impl, err)
		}
	}
}

func TestFakeReadOnly(t *testing.T) {
	f := sysctltest.NewFake(map[string]string{"net.ipv4.ip_forward": "1"})
	f.SetReadOnly(true)
	if old, changed, err := f.Set("net.ipv4.ip_forward", "1"); err != nil || changed || old != "1" {
		t.Fatalf("Set of the current value on a read-only fake = %q, %t, %v", old, changed, err)
	}
	old, changed, err := f.Set("net.ipv4.ip_forward", "0")
	if !errors.Is(err, syscall.EROFS) || kerr.IsNotFound(err) || changed || old != "1" ||
		!strings.Contains(err.Error(), "net.ipv4.ip_forward") {
		t.Fatalf("Set of a new value on a read-only fake = %q, %t, %v; want EROFS naming the key", old, changed, err)
	}
	if v, _ := f.Get("net/ipv4/ip_forward"); v != "1" {
		t.Fatalf("value after failed Set = %q", v)
	}
}

func TestFakeFaultAndAdd(t *testing.T) {
	f := sysctltest.NewFake(nil)
	if err := f.Add("net.ipv4.vs.conntrack", "0"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	f.SetFault(func(op, path string) error {
		if op == "set" && path == "net/ipv4/vs/conntrack" {
			return boom
		}
		return nil
	})
	if _, _, err := f.Set("net.ipv4.vs.conntrack", "1"); !errors.Is(err, boom) {
		t.Fatalf("Set with fault = %v", err)
	}
	if v, err := f.Get("net.ipv4.vs.conntrack"); err != nil || v != "0" {
		t.Fatalf("Get after a failed Set = %q, %v", v, err)
	}
	f.SetFault(nil)
	if _, changed, err := f.Set("net.ipv4.vs.conntrack", "1"); err != nil || !changed {
		t.Fatalf("Set = %t, %v", changed, err)
	}
	if got, want := f.Dump(), "net/ipv4/vs/conntrack = 1\n"; got != want {
		t.Fatalf("Dump() = %q, want %q", got, want)
	}
	if got := f.Values(); len(got) != 1 || got["net/ipv4/vs/conntrack"] != "1" {
		t.Fatalf("Values() = %v", got)
	}
}

// A key that already holds the value is not written: Set works on a read-only file.
func TestTempRootNoWriteWhenUnchanged(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores file modes; the kernel test covers a read-only mount")
	}
	root := t.TempDir()
	writeTree(t, root, map[string]string{"net/ipv4/ip_forward": "1"})
	p := filepath.Join(root, "net/ipv4/ip_forward")
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
	s := sysctl.New(root, netns.None())
	if _, changed, err := s.Set("net.ipv4.ip_forward", "1"); err != nil || changed {
		t.Fatalf("Set of the current value = %t, %v", changed, err)
	}
	if _, _, err := s.Set("net.ipv4.ip_forward", "0"); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("Set of a read-only file = %v, want EACCES", err)
	}
}
