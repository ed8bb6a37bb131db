//go:build kernel

package dummyif_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/testutil/golden"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// ipLink is the part of `ip -j -d addr show` the tests read.
type ipLink struct {
	Name     string   `json:"ifname"`
	Flags    []string `json:"flags"`
	LinkInfo struct {
		Kind string `json:"info_kind"`
	} `json:"linkinfo"`
	Addrs []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
		Scope     string `json:"scope"`
		NoDAD     bool   `json:"nodad"`
		Tentative bool   `json:"tentative"`
	} `json:"addr_info"`
}

// ipShow reads the link called name with `ip -j -d addr show` in ns (nil: no such link).
func ipShow(t *testing.T, ns *netnstest.NS, name string) *ipLink {
	t.Helper()
	var links []ipLink
	out := ns.MustRun(t, "ip", "-j", "-d", "addr", "show")
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		t.Fatalf("parse ip -j -d addr show: %v\n%s", err, out)
	}
	for i := range links {
		if links[i].Name == name {
			return &links[i]
		}
	}
	return nil
}

// ipDump renders what `ip` shows of the link in the Dump format, and checks that every
// global IPv6 address is nodad and none is tentative.
func ipDump(t *testing.T, ns *netnstest.NS, name string) string {
	t.Helper()
	l := ipShow(t, ns, name)
	if l == nil {
		return dummyif.FormatDump(name, "", false, nil)
	}
	var ps []netip.Prefix
	for _, a := range l.Addrs {
		p, err := netip.ParsePrefix(a.Local + "/" + strconv.Itoa(a.PrefixLen))
		if err != nil {
			t.Fatalf("ip shows address %q/%d: %v", a.Local, a.PrefixLen, err)
		}
		if a.Family == "inet6" && a.Scope == "global" && !a.NoDAD {
			t.Errorf("ip: %s on %s is not nodad", p, name)
		}
		if a.Tentative {
			t.Errorf("ip: %s on %s is tentative", p, name)
		}
		ps = append(ps, p)
	}
	return dummyif.FormatDump(name, l.LinkInfo.Kind, slices.Contains(l.Flags, "UP"), ps)
}

// ipBatch runs ip commands (without the leading "ip") in ns with one `ip -batch` and
// returns their output.
func ipBatch(t *testing.T, ns *netnstest.NS, cmds ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ip-batch")
	if err := os.WriteFile(f, []byte(strings.Join(cmds, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ns.MustRun(t, "ip", "-batch", f)
}

// The shared table against the kernel: same transcript as the fake, and every dump equal
// to what `ip` shows in the namespace.
func TestOpsKernel(t *testing.T) {
	ns := netnstest.New(t)
	d, err := dummyif.New(testLink, ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := &harness{
		impl: d,
		foreign: func(t *testing.T) {
			ipBatch(t, ns, "link del "+testLink, "link add "+testLink+" type veth peer name kipvs-peer0")
		},
		observe: func(t *testing.T) string { return ipDump(t, ns, testLink) },
	}
	golden.Check(t, "ops.golden", runOps(t, h))
	// The veth the adapter refused to touch is still there.
	if l := ipShow(t, ns, testLink); l == nil || l.LinkInfo.Kind != "veth" {
		t.Fatalf("the foreign veth %s is gone or changed: %+v", testLink, l)
	}
}

// An existing dummy link is taken as it is: EnsureLink changes neither its state nor its
// addresses, Addresses reports what others added with their real prefix length (and the
// link-local address the kernel adds when the link is up), and DeleteAddress only removes
// host prefixes.
func TestExistingLinkKernel(t *testing.T) {
	ns := netnstest.New(t)
	ipBatch(t, ns, "link add "+ipvsmode.DummyName+" type dummy", "addr add 10.1.0.1/24 dev "+ipvsmode.DummyName,
		"link set "+ipvsmode.DummyName+" up")
	d, err := dummyif.New("", ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if created, err := d.EnsureLink(); err != nil || created {
		t.Fatalf("EnsureLink on an existing dummy = %t, %v", created, err)
	}
	if err := d.DeleteAddress(netip.MustParseAddr("10.1.0.1")); !kerr.IsNotFound(err) {
		t.Fatalf("DeleteAddress of 10.1.0.1 (present as /24 only) = %v, want ErrNotFound", err)
	}
	if err := d.AddAddress(netip.MustParseAddr("10.1.0.1")); err != nil {
		t.Fatalf("AddAddress of 10.1.0.1/32 next to 10.1.0.1/24: %v", err)
	}
	// The link-local address appears once the kernel has processed the link going up.
	var got []netip.Prefix
	_, _ = poll.Wait(10*time.Second, "three addresses", func() (bool, string) {
		if got, err = d.Addresses(); err != nil {
			t.Fatal(err)
		}
		return len(got) == 3, ""
	})
	if len(got) != 3 || got[0] != netip.MustParsePrefix("10.1.0.1/24") || got[1] != netip.MustParsePrefix("10.1.0.1/32") ||
		!got[2].Addr().IsLinkLocalUnicast() || got[2].Bits() != 64 {
		t.Fatalf("Addresses() = %v, want [10.1.0.1/24 10.1.0.1/32 fe80::.../64]", got)
	}
	dump, err := d.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dump, "link kube-ipvs0 type dummy state UP\n") {
		t.Fatalf("Dump() = %q, want the link UP as it was", dump)
	}
	if obs := ipDump(t, ns, ipvsmode.DummyName); obs != dump {
		t.Fatalf("Dump() = %q, ip shows %q", dump, obs)
	}
}

// A VIP bound on a DOWN dummy link gets a local route and IPVS (NAT) serves it, for IPv4
// and IPv6 (nodad), both to a client in another namespace routed through the node and to
// a client on the node itself. The real server sees the remote client's own address, and
// the VIP itself as the source of node-local clients.
//
//	cli (192.168.1.2, fd01::2) -- node (kube-ipvs0 DOWN, IPVS) -- srv (192.168.2.2, fd02::2)
func TestVIPOnDownLinkServesIPVSKernel(t *testing.T) {
	node, cli, srv := netnstest.New(t), netnstest.New(t), netnstest.New(t)
	ipBatch(t, node,
		"link add vc netns "+cli.Name+" type veth peer name vcn",
		"link add vs netns "+srv.Name+" type veth peer name vsn",
		"addr add 192.168.1.1/24 dev vcn", "addr add fd01::1/64 dev vcn nodad", "link set vcn up",
		"addr add 192.168.2.1/24 dev vsn", "addr add fd02::1/64 dev vsn nodad", "link set vsn up")
	ipBatch(t, cli, "addr add 192.168.1.2/24 dev vc", "addr add fd01::2/64 dev vc nodad", "link set vc up",
		"route add default via 192.168.1.1", "route add default via fd01::1")
	ipBatch(t, srv, "addr add 192.168.2.2/24 dev vs", "addr add fd02::2/64 dev vs nodad", "link set vs up",
		"route add default via 192.168.2.1", "route add default via fd02::1")
	node.MustRun(t, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")

	d, err := dummyif.New("", node.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.EnsureLink(); err != nil {
		t.Fatal(err)
	}
	vip4, vip6 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::10")
	for _, a := range []netip.Addr{vip4, vip6} {
		if err := d.AddAddress(a); err != nil {
			t.Fatal(err)
		}
	}
	if dump, _ := d.Dump(); !strings.HasPrefix(dump, "link kube-ipvs0 type dummy state DOWN\n") {
		t.Fatalf("link not down: %q", dump)
	}
	local := node.MustRun(t, "sh", "-ec", "for f in 4 6; do ip -$f route show table local dev "+ipvsmode.DummyName+"; done")
	for _, want := range []string{"local 10.96.0.10 ", "local fd00::10 "} {
		if !strings.Contains(local, want) {
			t.Errorf("no local route %q for a VIP on the down link:\n%s", want, local)
		}
	}
	rules := filepath.Join(t.TempDir(), "ipvs")
	if err := os.WriteFile(rules, []byte(
		"-A -t 10.96.0.10:80 -s rr\n-a -t 10.96.0.10:80 -r 192.168.2.2:8080 -m\n"+
			"-A -t [fd00::10]:80 -s rr\n-a -t [fd00::10]:80 -r [fd02::2]:8080 -m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	node.MustRun(t, "sh", "-c", "ipvsadm -R < "+rules)

	// The real server answers every connection with the address it sees the client at.
	var ln net.Listener
	if err := netnsutil.Do(srv.Handle, func() (err error) {
		ln, err = net.Listen("tcp", "[::]:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			_, _ = io.WriteString(c, ap.Addr().Unmap().String())
			c.Close()
		}
	}()

	for _, c := range []struct {
		from     *netnstest.NS
		vip      string
		wantPeer string
	}{
		{cli, "10.96.0.10:80", "192.168.1.2"},
		{cli, "[fd00::10]:80", "fd01::2"},
		{node, "10.96.0.10:80", "10.96.0.10"},
		{node, "[fd00::10]:80", "fd00::10"},
	} {
		var conn net.Conn
		err := netnsutil.Do(c.from.Handle, func() (err error) {
			conn, err = (&net.Dialer{Timeout: 30 * time.Second}).Dial("tcp", c.vip)
			return err
		})
		if err != nil {
			t.Errorf("from %s to %s: %v", c.from.Name, c.vip, err)
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		b, err := io.ReadAll(conn)
		conn.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			t.Errorf("from %s to %s: read: %v", c.from.Name, c.vip, err)
		}
		if string(b) != c.wantPeer {
			t.Errorf("from %s to %s: the real server saw the client as %q, want %q", c.from.Name, c.vip, b, c.wantPeer)
		}
	}
	// IPVS holds a connection entry (in TIME_WAIT) for each of them. (Its --stats
	// counters are only refreshed by the estimator every 2 s.)
	conns := node.MustRun(t, "ipvsadm", "-Lnc")
	perVIP := map[string]int{}
	for _, line := range strings.Split(conns, "\n") {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "TCP" {
			perVIP[f[4]]++
		}
	}
	if want := map[string]int{"10.96.0.10:80": 2, "[fd00::10]:80": 2}; !maps.Equal(perVIP, want) {
		t.Errorf("IPVS connections per virtual address %v, want %v:\n%s", perVIP, want, conns)
	}
}

// Link-local VIPs are host prefixes like any other, and the kernel gives the link its own
// fe80::/64 when it goes up and takes it away when it goes down: what the fake models
// (TestLinkLocalFake).
func TestLinkLocalKernel(t *testing.T) {
	ns := netnstest.New(t)
	d, err := dummyif.New(testLink, ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	setUp := func(up bool) {
		state := "down"
		if up {
			state = "up"
		}
		ipBatch(t, ns, "link set "+testLink+" "+state)
		// The kernel adds the link-local address while it processes the link going up.
		// The transcript shows it if it never does.
		_, _ = poll.Wait(10*time.Second, "the link-local address", func() (bool, string) {
			ps, err := d.Addresses()
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Addr().IsLinkLocalUnicast() && p.Bits() == 64 }) == up, ""
		})
	}
	if got := linkLocalTranscript(t, d, setUp); got != linkLocalWant {
		t.Errorf("transcript:\n%s\nwant:\n%s", got, linkLocalWant)
	}
}

// HostAddrs lists every other link's addresses (the local one of a point-to-point address,
// not its peer) and nothing of the dummy link's, loopback or IPv6 link-local, read link by
// link with the kernel filtering (strict checking).
func TestHostAddrsKernel(t *testing.T) {
	ns := netnstest.New(t)
	ns.MustRun(t, "ip", "link", "add", ipvsmode.DummyName, "type", "dummy")
	for i := 1; i <= 20; i++ {
		ns.MustRun(t, "ip", "addr", "add", "10.96.0."+strconv.Itoa(i)+"/32", "dev", ipvsmode.DummyName)
	}
	ns.MustRun(t, "ip", "addr", "add", "fd00:96::1/128", "dev", ipvsmode.DummyName, "nodad")
	ns.MustRun(t, "ip", "link", "add", "eth9", "type", "dummy")
	ns.MustRun(t, "ip", "link", "set", "eth9", "up")
	ns.MustRun(t, "ip", "addr", "add", "192.168.5.5/24", "dev", "eth9")
	ns.MustRun(t, "ip", "addr", "add", "2001:db8::5/64", "dev", "eth9", "nodad")
	ns.MustRun(t, "ip", "link", "add", "eth8", "type", "dummy")
	ns.MustRun(t, "ip", "addr", "add", "10.9.9.1/32", "peer", "10.9.9.2/32", "dev", "eth8")
	var got []netip.Addr
	if err := netnsutil.Do(ns.Handle, func() (err error) {
		got, err = dummyif.HostAddrs(ipvsmode.DummyName)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("10.9.9.1"), netip.MustParseAddr("192.168.5.5"), netip.MustParseAddr("2001:db8::5")}
	if !slices.Equal(got, want) {
		t.Errorf("HostAddrs = %v, want %v\n%s", got, want, ns.MustRun(t, "ip", "addr", "show"))
	}
}

// An address change uses the link as last looked up; when someone else deletes the dummy
// link and creates a new one of the same name (a new index), the change finds the new
// link, and when the link is gone, it fails as not found.
func TestLinkRecreatedKernel(t *testing.T) {
	ns := netnstest.New(t)
	d, err := dummyif.New(testLink, ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.EnsureLink(); err != nil {
		t.Fatal(err)
	}
	if err := d.AddAddress(netip.MustParseAddr("10.96.0.1")); err != nil {
		t.Fatal(err)
	}
	ipBatch(t, ns, "link del "+testLink, "link add kipvs-other0 type dummy", "link add "+testLink+" type dummy")
	if err := d.AddAddress(netip.MustParseAddr("10.96.0.2")); err != nil {
		t.Fatalf("AddAddress after the link was re-created: %v", err)
	}
	if err := d.DeleteAddress(netip.MustParseAddr("10.96.0.2")); err != nil {
		t.Fatalf("DeleteAddress on the re-created link: %v", err)
	}
	if err := d.AddAddress(netip.MustParseAddr("10.96.0.3")); err != nil {
		t.Fatal(err)
	}
	if got, want := ipDump(t, ns, testLink), dummyif.FormatDump(testLink, "dummy", false, []netip.Prefix{netip.MustParsePrefix("10.96.0.3/32")}); got != want {
		t.Fatalf("ip shows %q, want %q", got, want)
	}
	if l := ipShow(t, ns, "kipvs-other0"); l == nil || len(l.Addrs) != 0 {
		t.Fatalf("the other dummy link got addresses: %+v", l)
	}
	ipBatch(t, ns, "link del "+testLink)
	if err := d.AddAddress(netip.MustParseAddr("10.96.0.4")); !kerr.IsNotFound(err) {
		t.Fatalf("AddAddress after the link was deleted = %v, want ErrNotFound", err)
	}
}

// EnsureAddresses binds more addresses than one message holds, IPv4 and IPv6, those
// already there included, and gives each address the outcome EnsureAddress gives it alone:
// an invalid address and one the kernel refuses (IPv6 disabled on the link) fail alone,
// the others of their message are bound.
func TestEnsureAddressesKernel(t *testing.T) {
	ns := netnstest.New(t)
	d, err := dummyif.New(testLink, ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.EnsureLink(); err != nil {
		t.Fatal(err)
	}
	ipBatch(t, ns, "address add 10.97.0.5/32 dev "+testLink)
	var addrs []netip.Addr
	want := map[string]bool{}
	for i := range 2*dummyif.AddrBatch + 44 {
		a := netip.AddrFrom4([4]byte{10, 97, byte(i / 250), byte(1 + i%250)})
		addrs = append(addrs, a)
		want[a.String()+"/32"] = true
	}
	for i := range 10 {
		a := netip.MustParseAddr(fmt.Sprintf("fd00:97::%x", i+1))
		addrs = append(addrs, a)
		want[a.String()+"/128"] = true
	}
	delete(want, addrs[dummyif.AddrBatch+7].String()+"/32")
	addrs[dummyif.AddrBatch+7] = netip.MustParseAddr("224.0.0.9") // invalid, in the second message
	want["10.97.0.5/32"] = true
	check := func(when string, errs []error) {
		t.Helper()
		for i, err := range errs {
			if i == dummyif.AddrBatch+7 {
				if !kerr.IsInvalid(err) {
					t.Errorf("%s: %s: %v, want invalid", when, addrs[i], err)
				}
			} else if err != nil {
				t.Errorf("%s: %s: %v", when, addrs[i], err)
			}
		}
		got := map[string]bool{}
		for _, a := range ipShow(t, ns, testLink).Addrs {
			if a.Scope != "link" {
				got[fmt.Sprintf("%s/%d", a.Local, a.PrefixLen)] = true
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: %d addresses on the link, want %d", when, len(got), len(want))
		}
	}
	// The batch itself, without the one-by-one fallback that would hide its failure: every
	// add of a message is acked, those already there included.
	first := []int{0, 1, 2, 3, 4}
	if left := dummyif.AddBatch(d, addrs, first); len(left) > 0 {
		t.Fatalf("one message of %d adds: %v not acked as bound", len(first), left)
	}
	check("first", d.EnsureAddresses(addrs))
	check("again", d.EnsureAddresses(addrs))
	all := make([]int, 0, dummyif.AddrBatch)
	for i := range dummyif.AddrBatch {
		all = append(all, i)
	}
	if left := dummyif.AddBatch(d, addrs, all); len(left) > 0 {
		t.Errorf("one message of %d adds already there: %v not acked as bound", dummyif.AddrBatch, left)
	}

	ns.MustRun(t, "sysctl", "-qw", "net.ipv6.conf."+testLink+".disable_ipv6=1")
	some := []netip.Addr{netip.MustParseAddr("10.98.0.1"), netip.MustParseAddr("fd00:98::1"), netip.MustParseAddr("10.98.0.2")}
	if left := dummyif.AddBatch(d, some, []int{0, 1, 2}); !slices.Equal(left, []int{1}) {
		t.Errorf("with IPv6 disabled on the link, the batch left %v; want [1] (the IPv6 address) only", left)
	}
	errs := d.EnsureAddresses(some)
	_, alone := d.EnsureAddress(some[1])
	if errs[0] != nil || errs[2] != nil || errs[1] == nil || errs[1].Error() != alone.Error() {
		t.Errorf("with IPv6 disabled on the link: %v; want only fd00:98::1's error, as alone: %v", errs, alone)
	}
	for _, a := range []string{"10.98.0.1", "10.98.0.2"} {
		if out := ns.MustRun(t, "ip", "-o", "address", "show", "dev", testLink, "to", a+"/32"); !strings.Contains(out, a) {
			t.Errorf("%s not bound beside the refused IPv6 address", a)
		}
	}
}
