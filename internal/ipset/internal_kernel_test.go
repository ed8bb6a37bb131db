//go:build kernel

package ipset

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

func mustNorm(t *testing.T, s Set) Set {
	t.Helper()
	n, err := s.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The kernel's own answers, without the up-front checks (checkEntry), map to the same typed
// errors the fake gives. (A net of length 0 is not among them: vishvananda/netlink cannot send
// a prefix length of 0 and would add the host address instead, so only the check stops it.)
func TestKernelErrors(t *testing.T) {
	ns := netnstest.New(t)
	var r *Real
	// netns.None() means the namespace the caller is in when calling New.
	if err := netnsutil.Do(ns.Handle, func() (err error) { r, err = New(netns.None()); return err }); err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	hip := mustNorm(t, Set{Name: "K-IP", Type: HashIP})
	hip6 := mustNorm(t, Set{Name: "K-IP6", Type: HashIP, Family: inet.IPv6})
	hport := mustNorm(t, Set{Name: "K-IPPORT", Type: HashIPPort})
	ports := mustNorm(t, Set{Name: "K-PORTS", Type: BitmapPort, PortFrom: 30000, PortTo: 30010})
	small := mustNorm(t, Set{Name: "K-SMALL", Type: HashIP, MaxElem: 1})
	for _, s := range []Set{hip, hip6, hport, ports, small} {
		if err := r.create(s); err != nil {
			t.Fatal(err)
		}
	}
	if out := ns.MustRun(t, "ipset", "list", "-n"); !strings.Contains(out, "K-IP6") {
		t.Fatalf("sets not in the test namespace:\n%s", out)
	}
	if out, _ := exec.Command("ipset", "list", "-n").Output(); strings.Contains(string(out), "K-IP6") {
		t.Fatalf("sets leaked into the test's own namespace:\n%s", out)
	}

	v4 := netip.MustParseAddr("10.0.0.1")
	v6 := netip.MustParseAddr("fd00::1")
	long := hip
	long.Name = strings.Repeat("K", 32)
	cases := []struct {
		desc string
		run  func() error
		want error
	}{
		{"create a 32-byte name", func() error { return r.create(long) }, kerr.ErrInvalid},
		{"create an existing name", func() error { return r.create(hip) }, kerr.ErrExists},
		{"IPv6 member in an inet set", func() error { return r.add(hip, []Entry{{IP: v6}}) }, kerr.ErrInvalid},
		{"IPv4 member in an inet6 set", func() error { return r.add(hip6, []Entry{{IP: v4}}) }, kerr.ErrInvalid},
		{"a port for a hash:ip set", func() error {
			return r.add(Set{Name: hip.Name, Type: HashIPPort, Family: inet.IPv4}, []Entry{{IP: v4, Protocol: inet.TCP, Port: 80}})
		}, kerr.ErrInvalid},
		{"no port for a hash:ip,port set", func() error { return r.add(Set{Name: hport.Name, Type: HashIP, Family: inet.IPv4}, []Entry{{IP: v4}}) }, kerr.ErrInvalid},
		{"a port of 0 for a bitmap:port set of 30000-30010", func() error { return r.add(ports, []Entry{{}}) }, kerr.ErrInvalid},
		{"port outside the bitmap range", func() error { return r.add(ports, []Entry{{Port: 80}}) }, kerr.ErrInvalid},
		{"comment without the extension", func() error { return r.add(hip, []Entry{{IP: v4, Comment: "x"}}) }, kerr.ErrInvalid},
		{"first add to a set of maxelem 1", func() error { return r.add(small, []Entry{{IP: v4}}) }, nil},
		{"second add to a set of maxelem 1", func() error { return r.add(small, []Entry{{IP: v4.Next()}}) }, ErrFull},
		{"swap sets of different types", func() error { return r.swap(hip.Name, hport.Name) }, kerr.ErrInvalid},
		{"swap sets of different families", func() error { return r.swap(hip.Name, hip6.Name) }, kerr.ErrInvalid},
		{"swap with a missing set", func() error { return r.swap(hip.Name, "K-MISSING") }, kerr.ErrNotFound},
		{"swap a missing set", func() error { return r.swap("K-MISSING", hip.Name) }, kerr.ErrNotFound},
		{"destroy a missing set", func() error { return r.destroy("K-MISSING") }, kerr.ErrNotFound},
		{"add to a missing set", func() error {
			return r.add(Set{Name: "K-MISSING", Type: HashIP, Family: inet.IPv4}, []Entry{{IP: v4}})
		}, kerr.ErrNotFound},
		{"list a missing set", func() error { _, err := r.list("K-MISSING"); return err }, kerr.ErrNotFound},
	}
	for _, c := range cases {
		err := c.run()
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v", c.desc, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: got %v, want %v", c.desc, err, c.want)
		default:
			t.Logf("%s: %v", c.desc, err)
		}
	}
}

// A batched request (IPSET_ATTR_ADT) is taken by the kernel whole, for every type and with
// comments, and lists exactly the members sent: members falls back to one request per member
// when a batch fails, so only this test sees a batch the kernel refuses or misreads.
func TestKernelBatchRequests(t *testing.T) {
	ns := netnstest.New(t)
	var r *Real
	if err := netnsutil.Do(ns.Handle, func() (err error) { r, err = New(netns.None()); return err }); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cases := []struct {
		set    Set
		member func(i int) string
	}{
		{Set{Name: "B-IP", Type: HashIP}, func(i int) string { return fmt.Sprintf("10.1.%d.%d", i/256, i%256) }},
		{Set{Name: "B-IP6", Type: HashIP, Family: inet.IPv6}, func(i int) string { return fmt.Sprintf("fd00::1:%x", i) }},
		{Set{Name: "B-NET", Type: HashNet}, func(i int) string { return fmt.Sprintf("10.%d.%d.0/%d", i/256, i%256, 24-i%3) }},
		{Set{Name: "B-IPPORT", Type: HashIPPort}, func(i int) string {
			return fmt.Sprintf("10.1.%d.%d,%s:%d", i/256, i%256, []string{"tcp", "udp", "sctp"}[i%3], 80+i)
		}},
		{Set{Name: "B-COMMENT", Type: HashIPPort, Comment: true}, func(i int) string { return fmt.Sprintf("10.1.%d.%d,tcp:80", i/256, i%256) }},
		{Set{Name: "B-IPPORTIP", Type: HashIPPortIP}, func(i int) string { return fmt.Sprintf("10.1.0.%d,udp:53,10.2.%d.%d", i%256, i/256, i%256) }},
		{Set{Name: "B-IPPORTNET6", Type: HashIPPortNet, Family: inet.IPv6}, func(i int) string {
			return fmt.Sprintf("2001:db8::%x,tcp:443,2001:db8:%x::/%d", i, i, 48+i%16)
		}},
		{Set{Name: "B-PORTS", Type: BitmapPort, PortFrom: 30000, PortTo: 31000}, func(i int) string { return fmt.Sprint(30000 + 3*i) }},
	}
	const n = 200
	for _, c := range cases {
		s := mustNorm(t, c.set)
		if err := r.create(s); err != nil {
			t.Fatal(err)
		}
		es := make([]Entry, n)
		want := map[string]string{}
		for i := range es {
			e, err := ParseEntry(s.Type, c.member(i))
			if err != nil {
				t.Fatal(err)
			}
			if s.Comment {
				e.Comment = fmt.Sprintf("default/svc-%d", i)
			}
			es[i] = e
			want[e.String()] = e.Comment
		}
		es, err := Prepare(s, es)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.batch(nl.IPSET_CMD_ADD, s, es); err != nil {
			t.Errorf("%s: batched add: %v", s.Name, err)
			continue
		}
		info, err := r.list(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range info.Entries {
			got[e.String()] = e.Comment
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s lists %d members after a batched add of %d, not the same: %v", s.Name, len(got), len(want), info.Entries[:min(5, len(info.Entries))])
		}
		if err := r.batch(nl.IPSET_CMD_DEL, s, es); err != nil {
			t.Errorf("%s: batched delete: %v", s.Name, err)
		}
		if info, err := r.list(s.Name); err != nil || len(info.Entries) != 0 {
			t.Errorf("%s after a batched delete of all: %v, %v", s.Name, info, err)
		}
	}
}
