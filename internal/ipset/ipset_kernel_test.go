//go:build kernel

package ipset_test

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/testutil/golden"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

func newReal(t *testing.T, ns *netnstest.NS) *ipset.Real {
	t.Helper()
	r, err := ipset.New(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func mustDump(t *testing.T, i ipset.Interface) string {
	t.Helper()
	d, err := i.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkSave compares Dump with `ipset save`, and ListNames with `ipset list -n`, both run in
// the namespace (in one command: process start-up is slow in the VM).
func checkSave(t *testing.T, ns *netnstest.NS, r *ipset.Real) {
	t.Helper()
	const sep = "--- names ---"
	save, list, ok := strings.Cut(ns.MustRun(t, "sh", "-c", "ipset save && echo '"+sep+"' && ipset list -n"), sep+"\n")
	if !ok {
		t.Fatalf("no separator in the output of ipset save / list -n")
	}
	got := mustDump(t, r)
	if want := ipset.NormalizeSave(save); got != want {
		t.Errorf("Dump() differs from normalized `ipset save`:\n%s", lineDiff(want, got))
	}
	names, err := r.ListNames()
	if err != nil {
		t.Fatal(err)
	}
	tool := strings.Fields(list)
	slices.Sort(tool)
	if !slices.Equal(names, tool) {
		t.Errorf("ListNames() = %v, `ipset list -n` = %v", names, tool)
	}
}

// The shared table on the kernel: the same error kinds as the fake, the same golden Dump, and
// ipset(8) sees the same state.
func TestKernelOps(t *testing.T) {
	ns := netnstest.New(t)
	r := newReal(t, ns)
	applyOps(t, r)
	golden.Check(t, "ops.golden", mustDump(t, r))
	checkSave(t, ns, r) // upstream's headers (hashsize 1024 maxelem 65536, range 0-65535) included
}

// A set referenced by an iptables rule cannot be destroyed (kerr.ErrBusy) but can be replaced:
// the swap keeps the rule's reference on the name.
func TestKernelReferencedSet(t *testing.T) {
	ns := netnstest.New(t)
	r := newReal(t, ns)
	s := ipset.Set{Name: clusterIP, Type: ipset.HashIPPort}
	if err := r.Replace(s, ents(ipset.HashIPPort, "10.96.0.1,tcp:443")); err != nil {
		t.Fatal(err)
	}
	rule := []string{"INPUT", "-m", "set", "--match-set", clusterIP, "dst,dst", "-j", "ACCEPT"}
	ns.MustRun(t, append([]string{"iptables", "-w", "-A"}, rule...)...)

	info, err := r.List(clusterIP)
	if err != nil {
		t.Fatal(err)
	}
	if info.References != 1 {
		t.Errorf("References = %d with one rule, want 1", info.References)
	}
	if err := r.Destroy(clusterIP); !kerr.IsBusy(err) {
		t.Fatalf("destroy of a referenced set: %v, want ErrBusy", err)
	}
	s.MaxElem = 1000 // a header change goes through the swap as well
	if err := r.Replace(s, ents(ipset.HashIPPort, "10.96.0.2,tcp:80", "10.96.0.3,udp:53")); err != nil {
		t.Fatalf("replace of a referenced set: %v", err)
	}
	info, err = r.List(clusterIP)
	if err != nil {
		t.Fatal(err)
	}
	if info.References != 1 || info.MaxElem != 1000 || len(info.Entries) != 2 {
		t.Errorf("after replace: %+v", info)
	}
	if save := ns.MustRun(t, "iptables-save", "-t", "filter"); !strings.Contains(save, "--match-set "+clusterIP+" dst,dst") {
		t.Errorf("the rule lost its set:\n%s", save)
	}

	ns.MustRun(t, append([]string{"iptables", "-w", "-D"}, rule...)...)
	if err := r.Destroy(clusterIP); err != nil {
		t.Fatalf("destroy after the rule is gone: %v", err)
	}
	if names, err := r.ListNames(); err != nil || len(names) != 0 {
		t.Errorf("sets left: %v %v", names, err)
	}
}

// Replace changes a set in one kernel step: a second instance (its own sockets) testing a
// member present in both the old and the new content never finds it missing. The same checker
// does find it missing when the set is rewritten in place (flush, then add), so it can tell.
func TestKernelReplaceIsAtomic(t *testing.T) {
	ns := netnstest.New(t)
	r := newReal(t, ns)
	checker := newReal(t, ns)
	s := ipset.Set{Name: "KUBE-LOAD-BALANCER", Type: ipset.HashIPPort}
	stable := ent(ipset.HashIPPort, "10.0.0.1,tcp:80")
	content := func(second byte) []ipset.Entry {
		var es []ipset.Entry
		for i := range 150 {
			es = append(es, ipset.Entry{IP: netip.AddrFrom4([4]byte{10, second, byte(i / 200), byte(i % 200)}), Protocol: inet.TCP, Port: 80})
		}
		return append(es, stable) // last, so rewriting in place leaves it out longest
	}
	a, b := content(1), content(2)
	if err := r.Replace(s, a); err != nil {
		t.Fatal(err)
	}

	// watch tests stable until stop is closed; it returns the number of tests and misses.
	watch := func(stop <-chan struct{}, checks, misses *atomic.Int64, errs chan<- error) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			ok, err := checker.Test(s.Name, stable)
			if err != nil {
				errs <- err
				return
			}
			checks.Add(1)
			if !ok {
				misses.Add(1)
			}
		}
	}
	run := func(rounds int, deadline time.Time, step func(round int) error, until func(misses int64) bool) (checks, misses int64) {
		t.Helper()
		var c, m atomic.Int64
		stop := make(chan struct{})
		errs := make(chan error, 1)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); watch(stop, &c, &m, errs) }()
		for i := 0; i < rounds || (until != nil && !until(m.Load()) && time.Now().Before(deadline)); i++ {
			if err := step(i); err != nil {
				close(stop)
				wg.Wait()
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		select {
		case err := <-errs:
			t.Fatalf("checker: %v", err)
		default:
		}
		return c.Load(), m.Load()
	}

	checks, misses := run(16, time.Time{}, func(i int) error {
		if i%2 == 0 {
			return r.Replace(s, b)
		}
		return r.Replace(s, a)
	}, nil)
	t.Logf("replace: %d membership tests during 16 replaces, %d misses", checks, misses)
	if misses != 0 {
		t.Errorf("the stable member was missing %d times during Replace", misses)
	}
	if checks < 16 {
		t.Errorf("only %d membership tests ran during 16 replaces; the check proves nothing", checks)
	}
	got, err := r.List(s.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != len(a) {
		t.Errorf("after the replaces the set has %d members, want %d", len(got.Entries), len(a))
	}
	if names, err := r.ListNames(); err != nil || len(names) != 1 {
		t.Errorf("sets after the replaces: %v %v; want only %s", names, err, s.Name)
	}

	// Control: the non-atomic way, until the checker sees the gap (or a deadline).
	checks, misses = run(1, time.Now().Add(30*time.Second), func(i int) error {
		if err := r.Flush(s.Name); err != nil {
			return err
		}
		if i%2 == 0 {
			return r.Add(s.Name, b...)
		}
		return r.Add(s.Name, a...)
	}, func(m int64) bool { return m > 0 })
	t.Logf("flush+add: %d membership tests, %d misses", checks, misses)
	if misses == 0 {
		t.Errorf("the checker never saw the member missing while the set was rewritten in place (%d tests)", checks)
	}
}

// Sets that upstream kube-proxy created with ipset(8) (newest userspace revision, bucketsize
// and initval in the header) are adopted as they are: Create accepts them, List and Dump read
// them, Replace swaps new content into them. A set of a type the package does not handle is
// listed by header and count only, and its members are refused.
func TestKernelAdoptsIpsetToolSets(t *testing.T) {
	ns := netnstest.New(t)
	r := newReal(t, ns)
	ns.MustRun(t, "sh", "-c", `ipset restore <<'END'
create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
add KUBE-CLUSTER-IP 10.96.0.10,udp:53
create KUBE-NODE-PORT-inet.TCP bitmap:port range 0-65535
add KUBE-NODE-PORT-inet.TCP 30080
create KUBE-6-LOAD-BALANCER-SOURCE-CID hash:ip,port,net family inet6 hashsize 1024 maxelem 65536
add KUBE-6-LOAD-BALANCER-SOURCE-CID 2001:db8::10,tcp:80,2001:db8:1::/48
create KIPVS-FOREIGN hash:net,port family inet hashsize 1024 maxelem 65536
add KIPVS-FOREIGN 10.0.0.0/8,tcp:80
END`)
	for _, s := range []ipset.Set{
		{Name: clusterIP, Type: ipset.HashIPPort},
		{Name: nodePort, Type: ipset.BitmapPort},
		{Name: v6CIDR, Type: ipset.HashIPPortNet, Family: inet.IPv6},
	} {
		if err := r.Create(s); err != nil {
			t.Errorf("ensure %s over the tool's set: %v", s.Name, err)
		}
	}
	foreign, err := r.List("KIPVS-FOREIGN")
	if err != nil {
		t.Fatal(err)
	}
	if foreign.Type != "hash:net,port" || foreign.Elements != 1 || len(foreign.Entries) != 0 {
		t.Errorf("foreign set listed as %+v", foreign)
	}
	if err := r.Add("KIPVS-FOREIGN", ipset.Entry{Net: netip.MustParsePrefix("10.0.0.0/8")}); !kerr.IsInvalid(err) {
		t.Errorf("add to a set of an unsupported type: %v, want ErrInvalid", err)
	}
	if err := r.Destroy("KIPVS-FOREIGN"); err != nil {
		t.Fatal(err)
	}
	if err := r.Replace(ipset.Set{Name: clusterIP, Type: ipset.HashIPPort}, ents(ipset.HashIPPort, "10.96.0.1,tcp:443", "10.96.0.2,tcp:80")); err != nil {
		t.Fatal(err)
	}
	if err := r.Replace(ipset.Set{Name: nodePort, Type: ipset.BitmapPort}, ents(ipset.BitmapPort, "30081")); err != nil {
		t.Fatal(err)
	}
	checkSave(t, ns, r) // the tool's KUBE-6 set, ours under the two other names
}
