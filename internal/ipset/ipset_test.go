package ipset_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

func TestFakeOps(t *testing.T) {
	f := ipsettest.NewFake()
	applyOps(t, f)
	got, err := f.Dump()
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "ops.golden", got)
}

// The Dump format matches what ipset(8) 7.17 saves (captured in the test VM, kernel 6.1) once
// normalized: the fake, given the same sets, dumps exactly that.
func TestDumpMatchesRealSave(t *testing.T) {
	save, err := os.ReadFile(testdata("save-7.17.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f := ipsettest.NewFake()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	type set struct {
		s       ipset.Set
		members []string
	}
	sets := []set{
		{ipset.Set{Name: "a", Type: ipset.HashIP}, []string{"10.0.0.1"}},
		{ipset.Set{Name: "b", Type: ipset.HashIPPort}, []string{"10.0.0.1,tcp:80", "10.0.0.1,udp:53", "10.0.0.1,sctp:80"}},
		{ipset.Set{Name: "c", Type: ipset.HashIPPortIP}, []string{"10.0.0.1,tcp:80,10.0.0.2"}},
		{ipset.Set{Name: "d", Type: ipset.HashIPPortNet}, []string{"10.0.0.1,tcp:80,10.1.0.0/16", "10.0.0.1,tcp:80,10.2.0.1", "10.0.0.1,tcp:80,10.1.0.1/32"}},
		{ipset.Set{Name: "e", Type: ipset.HashNet}, []string{"10.1.0.0/16", "10.3.0.1/32", "10.3.0.9"}},
		{ipset.Set{Name: "f", Type: ipset.BitmapPort}, []string{"8080", "8081", "8082"}},
		{ipset.Set{Name: "g", Type: ipset.HashIPPort, Family: inet.IPv6, Comment: true}, []string{"fd00:0:0:1::1,tcp:81"}},
		{ipset.Set{Name: "h", Type: ipset.HashIP, HashSize: 100, MaxElem: 10}, nil},
	}
	for _, s := range sets {
		must(f.Create(s.s))
		must(f.Add(s.s.Name, ents(s.s.Type, s.members...)...))
	}
	must(f.Add("g", withComment(ent(ipset.HashIPPort, "fd00::1,tcp:80"), "hello world")))
	got, err := f.Dump()
	must(err)
	if want := ipset.NormalizeSave(string(save)); got != want {
		t.Errorf("fake Dump differs from normalized ipset save:\n%s", lineDiff(want, got))
	}
}

func TestNormalizeSave(t *testing.T) {
	in := "create z hash:ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1234\n" +
		"add z 10.0.0.2\nadd z 10.0.0.10\n" +
		"create a bitmap:port range 0-65535\nadd a 80\n"
	want := "create a bitmap:port range 0-65535\nadd a 80\n" +
		"create z hash:ip family inet hashsize 1024 maxelem 65536\nadd z 10.0.0.10\nadd z 10.0.0.2\n"
	if got := ipset.NormalizeSave(in); got != want {
		t.Errorf("NormalizeSave:\n%s\nwant:\n%s", got, want)
	}
}

func TestEntryNotation(t *testing.T) {
	good := []struct {
		t    ipset.Type
		in   string
		want string // String() of the parsed entry; "" means in
	}{
		{ipset.HashIP, "10.0.0.1", ""},
		{ipset.HashIP, "fd00::1", ""},
		{ipset.HashIPPort, "10.0.0.1,tcp:80", ""},
		{ipset.HashIPPort, "10.0.0.1,udp:53", ""},
		{ipset.HashIPPort, "10.0.0.1,sctp:9000", ""},
		{ipset.HashIPPort, "10.0.0.1,80", "10.0.0.1,tcp:80"},
		{ipset.HashIPPort, "fd00::1,tcp:443", ""},
		{ipset.HashIPPortIP, "10.0.0.1,tcp:80,10.0.0.2", ""},
		{ipset.HashIPPortNet, "10.0.0.1,tcp:80,10.1.0.0/16", ""},
		{ipset.HashIPPortNet, "10.0.0.1,tcp:80,10.1.2.3/16", "10.0.0.1,tcp:80,10.1.0.0/16"},
		{ipset.HashIPPortNet, "10.0.0.1,tcp:80,10.2.0.1/32", "10.0.0.1,tcp:80,10.2.0.1"},
		{ipset.HashIPPortNet, "10.0.0.1,tcp:80,10.2.0.1", ""},
		{ipset.HashIPPortNet, "fd00::1,tcp:80,fd00:1::/64", ""},
		{ipset.HashNet, "10.1.0.0/16", ""},
		{ipset.HashNet, "10.3.0.9", ""},
		{ipset.HashNet, "fd00::/8", ""},
		{ipset.BitmapPort, "8080", ""},
		{ipset.BitmapPort, "0", ""},
		{ipset.BitmapPort, "65535", ""},
	}
	for _, c := range good {
		e, err := ipset.ParseEntry(c.t, c.in)
		if err != nil {
			t.Errorf("ParseEntry(%s, %q): %v", c.t, c.in, err)
			continue
		}
		want := c.want
		if want == "" {
			want = c.in
		}
		if got := e.String(); got != want {
			t.Errorf("ParseEntry(%s, %q).String() = %q, want %q", c.t, c.in, got, want)
		}
		again, err := ipset.ParseEntry(c.t, e.String())
		if err != nil || again != e {
			t.Errorf("%s %q does not round-trip: %+v, %v", c.t, e.String(), again, err)
		}
	}
	bad := []struct {
		t  ipset.Type
		in string
	}{
		{ipset.HashIP, "10.0.0.1,tcp:80"},
		{ipset.HashIP, "10.0.0"},
		{ipset.HashIPPort, "10.0.0.1"},
		{ipset.HashIPPort, "10.0.0.1,icmp:8"},
		{ipset.HashIPPort, "10.0.0.1,tcp:65536"},
		{ipset.HashIPPort, "10.0.0.1,tcp:http"},
		{ipset.HashIPPortIP, "10.0.0.1,tcp:80"},
		{ipset.HashIPPortIP, "10.0.0.1,tcp:80,10.0.0.0/8"},
		{ipset.HashIPPortNet, "10.0.0.1,tcp:80,10.0.0.0/33"},
		{ipset.HashNet, "10.0.0.0/8,tcp:80"},
		{ipset.BitmapPort, "tcp:80"},
		{ipset.BitmapPort, "-1"},
		{ipset.Type("hash:mac"), "00:11:22:33:44:55"},
	}
	for _, c := range bad {
		if e, err := ipset.ParseEntry(c.t, c.in); !kerr.IsInvalid(err) {
			t.Errorf("ParseEntry(%s, %q) = %+v, %v; want ErrInvalid", c.t, c.in, e, err)
		}
	}
}

func TestNamesAndTempNames(t *testing.T) {
	for _, n := range []string{"", strings.Repeat("K", 32), "A B", `A"B`, "A\tB"} {
		if err := ipset.CheckName(n); !kerr.IsInvalid(err) {
			t.Errorf("CheckName(%q) = %v, want ErrInvalid", n, err)
		}
	}
	long := strings.Repeat("K", 31)
	if err := ipset.CheckName(long); err != nil {
		t.Errorf("CheckName(31 bytes) = %v", err)
	}
	seen := map[string]string{}
	for _, n := range []string{"KUBE-CLUSTER-IP", "KUBE-6-CLUSTER-IP", long, "KUBE-6-LOAD-BALANCER-SOURCE-CID", "KUBE-6-LOAD-BALANCER-SOURCE-IP", "x"} {
		tmp := ipset.TempName(n)
		if err := ipset.CheckName(tmp); err != nil || !strings.HasPrefix(tmp, ipset.TempPrefix) {
			t.Errorf("TempName(%q) = %q: %v", n, tmp, err)
		}
		if tmp != ipset.TempName(n) {
			t.Errorf("TempName(%q) is not deterministic", n)
		}
		if other, dup := seen[tmp]; dup {
			t.Errorf("TempName(%q) = TempName(%q) = %q", n, other, tmp)
		}
		seen[tmp] = n
	}
	f := ipsettest.NewFake()
	if err := f.Create(ipset.Set{Name: long + "X", Type: ipset.HashIP}); !kerr.IsInvalid(err) {
		t.Errorf("fake created a 32-byte name: %v", err)
	}
	if err := f.Create(ipset.Set{Name: long, Type: ipset.HashIP}); err != nil {
		t.Errorf("fake refused a 31-byte name: %v", err)
	}
}

func TestFakeReferencedSetIsBusy(t *testing.T) {
	f := ipsettest.NewFake()
	s := ipset.Set{Name: "KUBE-CLUSTER-IP", Type: ipset.HashIPPort}
	if err := f.Create(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Reference(s.Name); err != nil {
		t.Fatal(err)
	}
	if err := f.Destroy(s.Name); !kerr.IsBusy(err) {
		t.Fatalf("destroy of a referenced set: %v, want ErrBusy", err)
	}
	// Replace swaps the content in under the referenced name.
	if err := f.Replace(s, ents(ipset.HashIPPort, "10.96.0.1,tcp:443")); err != nil {
		t.Fatal(err)
	}
	info, err := f.List(s.Name)
	if err != nil {
		t.Fatal(err)
	}
	if info.References != 1 || len(info.Entries) != 1 {
		t.Fatalf("after replace: %+v", info)
	}
	if err := f.Unreference(s.Name); err != nil {
		t.Fatal(err)
	}
	if err := f.Destroy(s.Name); err != nil {
		t.Fatal(err)
	}
}

// A fault at any step of Replace leaves the set with its old content and no temporary set
// behind, except a failed final destroy (new content, temp set left), which the next Replace
// that changes the set cleans up.
func TestFakeReplaceFaults(t *testing.T) {
	s := ipset.Set{Name: "KUBE-LOAD-BALANCER", Type: ipset.HashIPPort}
	oldC := ents(ipset.HashIPPort, "10.0.0.1,tcp:80", "10.0.0.2,tcp:80")
	newC := ents(ipset.HashIPPort, "10.0.0.2,tcp:80", "10.0.0.3,tcp:80", "10.0.0.4,udp:53")
	setup := func() *ipsettest.Fake {
		f := ipsettest.NewFake()
		if err := f.Replace(s, oldC); err != nil {
			t.Fatal(err)
		}
		return f
	}
	dump := func(f *ipsettest.Fake) string {
		d, err := f.Dump()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	clean := setup()
	before := clean.Mutations()
	if err := clean.Replace(s, newC); err != nil {
		t.Fatal(err)
	}
	steps := clean.Mutations() - before // destroy leftover, create temp, 3 adds, swap, destroy temp
	if steps != 7 {
		t.Fatalf("a replace made %d mutations, want 7", steps)
	}
	oldDump, newDump := dump(setup()), dump(clean)
	injected := errors.New("injected")
	for n := 1; n <= steps; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := setup()
			f.FailNth(n, injected)
			err := f.Replace(s, newC)
			if !errors.Is(err, injected) {
				t.Fatalf("replace with fault at step %d: %v", n, err)
			}
			got := dump(f)
			leftover := strings.Contains(got, ipset.TempName(s.Name))
			switch {
			case n == steps: // the final destroy: swapped, temp left
				if !leftover {
					t.Errorf("no leftover temp set after a failed final destroy:\n%s", got)
				}
			case got != oldDump:
				t.Errorf("state after a fault at step %d:\n%s\nwant the old state:\n%s", n, got, oldDump)
			}
			// A Replace that changes the set removes any leftover temp set.
			for _, c := range [][]ipset.Entry{oldC, newC} {
				if err := f.Replace(s, c); err != nil {
					t.Fatal(err)
				}
			}
			if got := dump(f); got != newDump {
				t.Errorf("retry after a fault at step %d:\n%s\nwant:\n%s", n, got, newDump)
			}
		})
	}
}

func TestFakeConcurrent(t *testing.T) {
	f := ipsettest.NewFake()
	s := ipset.Set{Name: "KUBE-IPVS-IPS", Type: ipset.HashIP}
	if err := f.Create(s); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				e := ipset.Entry{IP: netip.AddrFrom4([4]byte{10, byte(g), 0, byte(i)})}
				if err := f.Add(s.Name, e); err != nil {
					t.Error(err)
					return
				}
				if ok, err := f.Test(s.Name, e); err != nil || !ok {
					t.Errorf("test %s: %v %v", e, ok, err)
					return
				}
				if err := f.Replace(ipset.Set{Name: fmt.Sprintf("KIPVS-G%d", g), Type: ipset.HashIP}, []ipset.Entry{e}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	info, err := f.List(s.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Entries) != 200 {
		t.Errorf("%d members, want 200", len(info.Entries))
	}
}

func TestClosed(t *testing.T) {
	f := ipsettest.NewFake()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Create(ipset.Set{Name: "X", Type: ipset.HashIP}); !errors.Is(err, ipset.ErrClosed) {
		t.Errorf("create after close: %v", err)
	}
}
