package dummyif_test

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

func TestOpsFake(t *testing.T) {
	f := dummyiftest.NewFake(testLink)
	h := &harness{impl: f, foreign: func(*testing.T) { f.SetForeignLink("veth") }}
	golden.Check(t, "ops.golden", runOps(t, h))
}

func TestFakeDefaultsAndState(t *testing.T) {
	f := dummyiftest.NewFake("")
	if f.Name() != ipvsmode.DummyName {
		t.Fatalf("Name() = %q, want %q", f.Name(), ipvsmode.DummyName)
	}
	if _, err := f.EnsureLink(); err != nil {
		t.Fatal(err)
	}
	f.SetUp(true)
	up := "link kube-ipvs0 type dummy state UP\naddr " + f.LinkLocal().String() + "\n"
	if d, _ := f.Dump(); d != up {
		t.Fatalf("Dump() after SetUp = %q", d)
	}
	// EnsureLink leaves an existing link's state alone.
	if created, err := f.EnsureLink(); err != nil || created {
		t.Fatalf("EnsureLink on an existing link = %t, %v", created, err)
	}
	if d, _ := f.Dump(); d != up {
		t.Fatalf("EnsureLink changed the state: %q, want %q", d, up)
	}
}

func TestFakeFault(t *testing.T) {
	f := dummyiftest.NewFake(testLink)
	boom := errors.New("boom")
	f.SetFault(func(op string) error {
		if strings.HasPrefix(op, "add dummy link") {
			return boom
		}
		return nil
	})
	if _, err := f.EnsureLink(); !errors.Is(err, boom) {
		t.Fatalf("EnsureLink with fault = %v, want boom", err)
	}
	if d, _ := f.Dump(); d != "no link "+testLink+"\n" {
		t.Fatalf("a failed EnsureLink changed the state: %q", d)
	}
	f.SetFault(func(op string) error {
		if op == "add address 10.96.0.9/32 to link "+testLink {
			return boom
		}
		return nil
	})
	if _, err := f.EnsureLink(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.EnsureAddress(netip.MustParseAddr("10.96.0.9")); !errors.Is(err, boom) {
		t.Fatalf("EnsureAddress with fault = %v, want boom", err)
	}
	if err := f.AddAddress(netip.MustParseAddr("10.96.0.10")); err != nil {
		t.Fatal(err)
	}
	f.SetFault(nil)
	got, err := f.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("10.96.0.10/32")}; !equalPrefixes(got, want) {
		t.Fatalf("Addresses() = %v, want %v", got, want)
	}
}

func TestFakeConcurrent(t *testing.T) {
	f := dummyiftest.NewFake(testLink)
	if _, err := f.EnsureLink(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 32 {
				a := netip.AddrFrom4([4]byte{10, 96, byte(g), byte(i)})
				if added, err := f.EnsureAddress(a); err != nil || !added {
					t.Errorf("EnsureAddress(%s) = %t, %v", a, added, err)
				}
				if _, err := f.Addresses(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got, _ := f.Addresses(); len(got) != 8*32 {
		t.Fatalf("%d addresses, want %d", len(got), 8*32)
	}
}

func TestHostPrefix(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"10.96.0.1", "10.96.0.1/32"},
		{"127.0.0.5", "127.0.0.5/32"},
		{"fd00::1", "fd00::1/128"},
		{"2001:db8::1", "2001:db8::1/128"},
	} {
		p, err := dummyif.HostPrefix(netip.MustParseAddr(c.in))
		if err != nil || p.String() != c.want {
			t.Errorf("HostPrefix(%s) = %v, %v; want %s", c.in, p, err, c.want)
		}
	}
	for _, in := range []string{"", "0.0.0.0", "::", "224.0.0.1", "ff02::1", "::ffff:10.0.0.1", "fe80::1%eth0"} {
		if _, err := dummyif.HostPrefix(addr(in)); !kerr.IsInvalid(err) {
			t.Errorf("HostPrefix(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"kube-ipvs0", "a", "eth0.1", "abcdefghijklmno"} {
		if err := dummyif.ValidName(n); err != nil {
			t.Errorf("ValidName(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"", ".", "..", "abcdefghijklmnop", "a/b", "a:b", "a b"} {
		if err := dummyif.ValidName(n); !kerr.IsInvalid(err) {
			t.Errorf("ValidName(%q) = %v, want ErrInvalid", n, err)
		}
	}
}

func equalPrefixes(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
