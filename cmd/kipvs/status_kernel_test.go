//go:build kernel

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsadm"
	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// The kernel tests compare `kipvs status ARGS` with `ipvsadm ARGS` (always with -n: without
// it ipvsadm resolves names, which kipvs never does) byte for byte, in fresh namespaces
// programmed through internal/ipvs. The kipvs binary is $KIPVS_BIN when set (make build's
// bin/kipvs), else this test binary itself, which runs kipvs's main when
// KIPVS_TEST_RUN_MAIN=1 (same command tree, same code).

const runMainEnv = "KIPVS_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"kipvs"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type result struct {
	stdout, stderr string
	code           int
}

// runIn runs a command in ns and returns its output and exit code.
func runIn(t *testing.T, ns *netnstest.NS, env []string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := netnsutil.Run(ns.Handle, cmd)
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("in netns %s: %s %s: %v", ns.Name, name, strings.Join(args, " "), err)
	}
	return r
}

func kipvs(t *testing.T, ns *netnstest.NS, args ...string) result {
	t.Helper()
	if bin := os.Getenv("KIPVS_BIN"); bin != "" {
		return runIn(t, ns, nil, bin, args...)
	}
	return runIn(t, ns, []string{runMainEnv + "=1"}, os.Args[0], args...)
}

func mustRun(t *testing.T, ns *netnstest.NS, name string, args ...string) string {
	t.Helper()
	r := runIn(t, ns, nil, name, args...)
	if r.code != 0 {
		t.Fatalf("in netns %s: %s %s: exit %d: %s", ns.Name, name, strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// compare checks `kipvs status args` against `ipvsadm args`: the same stdout byte for
// byte and both succeeding. Volatile listings (counters and rates after traffic, the
// connection table's countdown) may change between the two runs, so they are retried
// until one pair agrees.
func compare(t *testing.T, ns *netnstest.NS, volatile bool, args string) {
	t.Helper()
	a := strings.Fields(args)
	attempts := 1
	if volatile {
		attempts = 12
	}
	var k, v result
	for range attempts {
		k = kipvs(t, ns, append([]string{"status"}, a...)...)
		v = runIn(t, ns, nil, "ipvsadm", a...)
		if k.code == 0 && v.code == 0 && k.stdout == v.stdout {
			return
		}
	}
	t.Errorf("kipvs status %s differs from ipvsadm (exit %d vs %d, stderr %q vs %q):\n%s",
		args, k.code, v.code, k.stderr, v.stderr, lineDiff(v.stdout, k.stdout))
}

// lineDiff shows the first differing lines (ipvsadm first), with visible line ends.
func lineDiff(want, got string) string {
	w, g := strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 12; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d\n  ipvsadm: %q\n  kipvs:   %q\n", i+1, wl, gl)
			shown++
		}
	}
	fmt.Fprintf(&b, "(%d lines from ipvsadm, %d from kipvs)", len(w)-1, len(g)-1)
	return b.String()
}

// listArgs are the listing modes compared for every state.
var listArgs = []string{
	"-Ln", "-ln", "-L -n", "-L --numeric", "-Ln --sort", "-Ln --nosort",
	"-Ln --stats", "-Ln --stats --exact", "-Ln --stats --nosort", "-Ln --exact",
	"-Ln --rate", "-Ln --rate --exact", "-Ln --stats --rate",
	"-Ln --thresholds", "-Ln --thresholds --nosort", "-Ln --persistent-conn",
	"-Ln --tun-info", "-Ln --tun-info --nosort", "-Ln --thresholds --persistent-conn",
	"-Sn", "-S -n", "-Ln --timeout", "-Lnc", "-Lnc --persistent-conn", "-Lnc --exact",
}

// perServiceArgs are compared for each service with its filter (-t/-u/--sctp-service/-f).
var perServiceArgs = []string{"-Ln", "-Ln --stats", "-Ln --rate --exact", "-Ln --thresholds", "-Ln --persistent-conn", "-Ln --tun-info"}

// filter returns ipvsadm's option naming service k.
func filter(k ipvs.ServiceKey) string {
	if k.FWMark != 0 {
		if k.Family == inet.IPv6 {
			return fmt.Sprintf("-f %d -6", k.FWMark)
		}
		return fmt.Sprintf("-f %d", k.FWMark)
	}
	opt := map[inet.Protocol]string{inet.TCP: "-t", inet.UDP: "-u", inet.SCTP: "--sctp-service"}[k.Protocol]
	return opt + " " + netip.AddrPortFrom(k.Addr, k.Port).String()
}

// compareAll runs every listing mode, the per-service filters of up to maxFilters
// services, the kipvs-only equivalences, and the JSON round trip.
func compareAll(t *testing.T, ns *netnstest.NS, c *ipvs.Client, volatile bool, maxFilters int) {
	t.Helper()
	var conns string // the live connection table, frozen for the -c comparisons
	for _, a := range listArgs {
		if volatile && strings.HasPrefix(a, "-Lnc") {
			// The table's countdown ticks every second, and a TCG VM takes about that long
			// to run both tools: compare them on one reading of the table instead.
			if conns == "" {
				conns = mustRun(t, ns, "cat", ipvsadm.ConnFile)
			}
			compareConnFile(t, ns, conns, a)
			continue
		}
		compare(t, ns, volatile, a)
	}
	svcs, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range svcs {
		if i >= maxFilters {
			break
		}
		// Every mode for a few services, the plain listing for the others.
		modes := perServiceArgs
		if i >= 3 {
			modes = modes[:1]
		}
		for _, a := range modes {
			compare(t, ns, volatile, a+" "+filter(s.ServiceKey))
		}
	}
	if volatile {
		return
	}
	// kipvs never resolves names: without -n, and with no arguments at all, it prints
	// ipvsadm -Ln's listing; the ipvsadm alias is the same command.
	want := mustRun(t, ns, "ipvsadm", "-Ln")
	for _, args := range [][]string{{"status", "-L"}, {"status"}, {"ipvsadm", "-Ln"}, {"status", "-nL"}} {
		if r := kipvs(t, ns, args...); r.code != 0 || r.stdout != want {
			t.Errorf("kipvs %s (exit %d, %s):\n%s", strings.Join(args, " "), r.code, r.stderr, lineDiff(want, r.stdout))
		}
	}
	// The JSON in the kernel's order holds everything the ipvsadm listings show.
	r := kipvs(t, ns, "status", "-o", "json", "--nosort")
	var doc ipvsadm.JSONTable
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 {
		t.Fatalf("kipvs status -o json --nosort: exit %d, %v\n%s", r.code, err, r.stderr)
	}
	snap, err := doc.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"-Ln", "-Ln --stats --exact", "-Ln --thresholds", "-Ln --persistent-conn", "-Sn", "-Ln --tun-info"} {
		o, err := ipvsadm.Parse(strings.Fields(a), nil)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := ipvsadm.WriteList(&b, o, snap, nil); err != nil {
			t.Fatal(err)
		}
		if want := mustRun(t, ns, "ipvsadm", strings.Fields(a)...); b.String() != want {
			t.Errorf("ipvsadm %s rendered from the JSON document:\n%s", a, lineDiff(want, b.String()))
		}
	}
}

func newClient(t *testing.T, ns *netnstest.NS) *ipvs.Client {
	t.Helper()
	c, err := ipvs.New(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func apply(t *testing.T, c *ipvs.Client, ops []ipvs.Op) {
	t.Helper()
	if err := c.Apply(ops); err != nil {
		t.Fatal(err)
	}
}

func key(p inet.Protocol, ap string) ipvs.ServiceKey {
	a := netip.MustParseAddrPort(ap)
	return ipvs.ServiceKey{Protocol: p, Addr: a.Addr(), Port: a.Port()}
}

func dest(ap string, fwd ipvs.ForwardMethod, weight int) ipvs.Destination {
	a := netip.MustParseAddrPort(ap)
	return ipvs.Destination{Addr: a.Addr(), Port: a.Port(), Forward: fwd, Weight: weight}
}

// Every kind of service and destination ipvsadm can show, with addresses more than 2^31
// apart (10.x, 100.x, 192.168.x, 200.x, 250.x form comparator cycles), fwmarks above
// 2^31, scheduler flags including the ones ipvsadm has no name for, persistence with
// netmasks, one-packet scheduling, every forwarding method and tunnel type, thresholds,
// weights 0 and 65535, and glibc's "::a.b.c.d" IPv6 formatting.
func TestKernelStatusMixed(t *testing.T) {
	ns := netnstest.New(t)
	c := newClient(t, ns)
	t1, u1 := key(inet.TCP, "10.0.0.1:80"), key(inet.UDP, "10.0.0.1:53")
	sh, mh := key(inet.TCP, "192.168.5.5:443"), key(inet.TCP, "200.1.1.1:53")
	v6 := key(inet.TCP, "[fd00::1]:80")
	fw5 := ipvs.ServiceKey{Family: inet.IPv4, FWMark: 5}
	fwBig := ipvs.ServiceKey{Family: inet.IPv6, FWMark: 3000000000}
	thr := dest("200.0.0.9:8080", ipvs.Masq, 1)
	thr.UpperThreshold, thr.LowerThreshold = 10, 5
	gue := dest("10.3.0.2:0", ipvs.Tunnel, 2)
	gue.TunnelType, gue.TunnelPort, gue.TunnelFlags = ipvs.TunnelGUE, 6080, ipvs.TunnelCsum
	gre := dest("10.3.0.3:0", ipvs.Tunnel, 1)
	gre.TunnelType, gre.TunnelFlags = ipvs.TunnelGRE, ipvs.TunnelRemCsum
	ops := []ipvs.Op{
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: t1, Scheduler: "rr"}),
		ipvs.AddDestinationOp(t1, dest("10.1.0.1:8080", ipvs.Masq, 3)),
		ipvs.AddDestinationOp(t1, dest("192.168.1.1:8080", ipvs.Masq, 1)),
		ipvs.AddDestinationOp(t1, thr),
		ipvs.AddDestinationOp(t1, dest("100.0.0.1:8080", ipvs.Masq, 0)),
		ipvs.AddDestinationOp(t1, dest("250.0.0.1:8080", ipvs.Masq, 65535)),
		ipvs.AddDestinationOp(t1, dest("10.1.0.1:79", ipvs.Masq, 1)),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: sh, Scheduler: "sh", Flags: ipvs.FlagPersistent | ipvs.FlagSHFallback | ipvs.FlagSHPort,
			Timeout: 600, Netmask: 0xffffff00}),
		ipvs.AddDestinationOp(sh, dest("10.2.0.1:443", ipvs.Masq, 1)),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: mh, Scheduler: "mh", Flags: ipvs.FlagMHPort}),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: key(inet.TCP, "100.0.0.1:80"), Scheduler: "rr", Flags: ipvs.FlagSched1}),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: key(inet.TCP, "250.0.0.1:80"), Scheduler: "sh", Flags: ipvs.FlagSched3}),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: key(inet.TCP, "1.2.3.4:0"), Scheduler: "wlc", Flags: ipvs.FlagPersistent, Timeout: 1,
			Netmask: 0x80000000}),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: u1, Scheduler: "wrr", Flags: ipvs.FlagOnePacket}),
		ipvs.AddDestinationOp(u1, dest("10.1.0.2:53", ipvs.Masq, 1)),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: key(inet.SCTP, "10.0.0.9:99"), Scheduler: "lc"}),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: v6, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 100, Netmask: 64}),
		ipvs.AddDestinationOp(v6, dest("[fd00::1:2]:80", ipvs.Masq, 1)),
		ipvs.AddDestinationOp(v6, dest("[::1.2.3.4]:80", ipvs.Masq, 1)),
		ipvs.AddDestinationOp(v6, dest("[2001:db8::5]:8080", ipvs.Masq, 1)),
		ipvs.AddDestinationOp(v6, dest("[2001:db8:0:0:1:0:0:1]:80", ipvs.Masq, 1)),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: key(inet.UDP, "[2001:db8::53]:53"), Scheduler: "rr"}),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: key(inet.TCP, "[fd00::2]:80"), Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 5}),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: fw5, Scheduler: "rr"}),
		ipvs.AddDestinationOp(fw5, dest("10.3.0.1:0", ipvs.Route, 1)),
		ipvs.AddDestinationOp(fw5, gue),
		ipvs.AddDestinationOp(fw5, gre),
		ipvs.AddDestinationOp(fw5, dest("10.3.0.4:0", ipvs.Tunnel, 1)),
		ipvs.AddDestinationOp(fw5, dest("127.0.0.1:0", ipvs.Local, 1)),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: fwBig, Scheduler: "rr"}),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: ipvs.ServiceKey{Family: inet.IPv4, FWMark: 1}, Scheduler: "dh"}),
	}
	apply(t, c, ops)
	// The sip persistence engine, if the kernel has it.
	pe := key(inet.UDP, "10.0.0.1:5060")
	if err := c.AddService(ipvs.Service{ServiceKey: pe, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 30, PEName: "sip"}); err != nil {
		t.Logf("no sip persistence engine: %v", err)
	}
	if err := c.SetTimeouts(ipvs.Timeouts{TCP: 1000, TCPFin: 7, UDP: 33}); err != nil {
		t.Fatal(err)
	}
	t.Log(mustRun(t, ns, "ipvsadm", "-Ln"))
	compareAll(t, ns, c, false, 1000)
	capture(t, ns, "mixed")

	// Errors: a missing service, an empty table.
	for _, a := range []string{"-Ln -t 10.9.9.9:1", "-Ln -f 77"} {
		k := kipvs(t, ns, append([]string{"status"}, strings.Fields(a)...)...)
		v := runIn(t, ns, nil, "ipvsadm", strings.Fields(a)...)
		if k.code == 0 || k.code != v.code || k.stdout != v.stdout || !strings.Contains(k.stderr, strings.TrimSpace(v.stderr)) {
			t.Errorf("%s: kipvs exit %d %q %q, ipvsadm exit %d %q %q", a, k.code, k.stdout, k.stderr, v.code, v.stdout, v.stderr)
		}
	}
	// Malformed command lines: the same exit code as ipvsadm (255 for an option its parser
	// rejects, 2 for options that conflict), so scripts written for ipvsadm tell them from a
	// missing service. The messages differ.
	for _, a := range []string{"-L -S", "-Ln --bogus", "-Ln -t", "-Ln -t 10.0.0.1", "-L -c -t 10.0.0.1:80"} {
		k := kipvs(t, ns, append([]string{"status"}, strings.Fields(a)...)...)
		v := runIn(t, ns, nil, "ipvsadm", strings.Fields(a)...)
		if k.code == 0 || k.code != v.code || k.stdout != "" || k.stderr == "" {
			t.Errorf("%s: kipvs exit %d %q %q, ipvsadm exit %d %q", a, k.code, k.stdout, k.stderr, v.code, v.stderr)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"-Ln", "-Sn", "-Ln --stats", "-Lnc"} {
		compare(t, ns, false, a)
	}
}

// randomV4 returns a random unicast IPv4 address the kernel accepts as a destination.
func randomV4(r *rand.Rand) netip.Addr {
	for {
		var b [4]byte
		v := r.Uint32()
		b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		if b[0] != 0 && b[0] != 127 && b[0] < 224 && b[3] != 0 && b[3] != 255 {
			return netip.AddrFrom4(b)
		}
	}
}

// Thousands of destinations and hundreds of services at random addresses all over the
// address space, where ipvsadm's comparator is far from a total order: the output
// depends on the kernel's dump order and on glibc's exact merge sequence.
func TestKernelStatusMany(t *testing.T) {
	ns := netnstest.New(t)
	c := newClient(t, ns)
	r := rand.New(rand.NewPCG(7, 11))
	big := key(inet.TCP, "10.0.0.1:80")
	ops := []ipvs.Op{ipvs.AddServiceOp(ipvs.Service{ServiceKey: big, Scheduler: "rr"})}
	seen := map[netip.AddrPort]bool{}
	for len(seen) < 3000 {
		ap := netip.AddrPortFrom(randomV4(r), uint16(r.IntN(4)+8080))
		if !seen[ap] {
			seen[ap] = true
			ops = append(ops, ipvs.AddDestinationOp(big, ipvs.Destination{Addr: ap.Addr(), Port: ap.Port(), Weight: r.IntN(3)}))
		}
	}
	svcSeen := map[ipvs.ServiceKey]bool{big: true}
	protos := []inet.Protocol{inet.TCP, inet.UDP, inet.SCTP}
	for len(svcSeen) < 400 {
		var k ipvs.ServiceKey
		if r.IntN(4) == 0 {
			var b [16]byte
			b[0], b[1] = 0xfd, byte(r.IntN(2))*0x80 // fd00:: and fd80:: ... differ in the first word
			for i := 2; i < 16; i++ {
				b[i] = byte(r.Uint32())
			}
			k = ipvs.ServiceKey{Protocol: protos[r.IntN(3)], Addr: netip.AddrFrom16(b), Port: uint16(r.IntN(3) + 80)}
			if r.IntN(2) == 0 {
				b[0] = 0x20 // 2001-ish: more than 2^31 below fdxx in the first word
				k.Addr = netip.AddrFrom16(b)
			}
		} else {
			k = ipvs.ServiceKey{Protocol: protos[r.IntN(3)], Addr: randomV4(r), Port: uint16(r.IntN(3) + 80)}
		}
		if svcSeen[k] {
			continue
		}
		svcSeen[k] = true
		ops = append(ops, ipvs.AddServiceOp(ipvs.Service{ServiceKey: k, Scheduler: "rr"}))
		for range r.IntN(4) {
			var d ipvs.Destination
			if k.Addr.Is4() {
				d = ipvs.Destination{Addr: randomV4(r), Port: uint16(r.IntN(2) + 8080), Weight: 1}
			} else {
				b := k.Addr.As16()
				b[15] ^= byte(r.Uint32())
				b[0] = byte(r.Uint32())&0x7f | 0x20
				d = ipvs.Destination{Addr: netip.AddrFrom16(b), Port: 8080, Weight: 1}
			}
			ops = append(ops, ipvs.AddDestinationOp(k, d))
		}
	}
	for _, m := range []uint32{1, 2, 1 << 31, 1<<31 + 1, 4294967295, 100, 2147483647} {
		ops = append(ops, ipvs.AddServiceOp(ipvs.Service{ServiceKey: ipvs.ServiceKey{Family: inet.IPv4, FWMark: m}, Scheduler: "rr"}))
	}
	begin := time.Now()
	if err := c.Apply(ops); err != nil {
		var be *ipvs.BatchError
		if !errors.As(err, &be) || len(be.Errors) > len(ops)/100 {
			t.Fatal(err)
		}
		t.Logf("%d of %d ops refused (addresses the kernel will not take): %v", len(be.Errors), len(ops), err)
	}
	t.Logf("programmed %d ops in %v", len(ops), time.Since(begin).Round(time.Millisecond))
	for _, a := range []string{"-Ln", "-Ln --nosort", "-Sn", "-Ln --stats", "-Ln --thresholds", "-Ln --tun-info"} {
		compare(t, ns, false, a)
	}
	svcs, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs[:5] {
		compare(t, ns, false, "-Ln "+filter(s.ServiceKey))
	}
	compare(t, ns, false, "-Ln "+filter(big))
}

// trafficBed is a load balancer namespace (clients and VIPs on a dummy link) and a
// backend namespace behind a veth pair with a 65000-byte MTU, so large UDP datagrams cross
// IPVS unfragmented.
type trafficBed struct {
	lb, be *netnstest.NS
}

func newTrafficBed(t *testing.T) *trafficBed {
	tb := &trafficBed{lb: netnstest.New(t), be: netnstest.New(t)}
	lb, be := tb.lb, tb.be
	mustRun(t, lb, "sysctl", "-qw", "net.ipv4.vs.conntrack=1")
	for _, cmd := range [][]string{
		{"ip", "link", "add", "kipvs0", "type", "dummy"},
		{"ip", "addr", "add", "10.0.0.100/32", "dev", "kipvs0"},
		{"ip", "addr", "add", "200.0.0.100/32", "dev", "kipvs0"},
		{"ip", "-6", "addr", "add", "fd00::100/128", "dev", "kipvs0", "nodad"},
		{"ip", "link", "set", "kipvs0", "up"},
		{"ip", "link", "add", "veth-lb", "mtu", "65000", "type", "veth", "peer", "name", "veth-be", "mtu", "65000", "netns", be.Name},
		{"ip", "addr", "add", "10.1.0.254/24", "dev", "veth-lb"},
		{"ip", "-6", "addr", "add", "fd01::fe/64", "dev", "veth-lb", "nodad"},
		{"ip", "link", "set", "veth-lb", "up"},
	} {
		mustRun(t, lb, cmd[0], cmd[1:]...)
	}
	for _, cmd := range [][]string{
		{"ip", "addr", "add", "10.1.0.1/24", "dev", "veth-be"},
		{"ip", "addr", "add", "10.1.0.2/24", "dev", "veth-be"},
		{"ip", "-6", "addr", "add", "fd01::1/64", "dev", "veth-be", "nodad"},
		{"ip", "link", "set", "veth-be", "up"},
		{"ip", "route", "add", "default", "via", "10.1.0.254"},
		{"ip", "-6", "route", "add", "default", "via", "fd01::fe"},
	} {
		mustRun(t, be, cmd[0], cmd[1:]...)
	}
	return tb
}

// echoServer accepts TCP connections in the backend namespace and echoes them.
func echoServer(t *testing.T, ns *netnstest.NS, network, addr string) {
	t.Helper()
	var ln net.Listener
	if err := netnsutil.Do(ns.Handle, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
}

// dialIn opens a connection from inside ns.
func dialIn(t *testing.T, ns *netnstest.NS, network, addr string) net.Conn {
	t.Helper()
	var conn net.Conn
	if err := netnsutil.Do(ns.Handle, func() error {
		var err error
		conn, err = net.DialTimeout(network, addr, 20*time.Second)
		return err
	}); err != nil {
		t.Fatalf("dial %s %s: %v", network, addr, err)
	}
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	return conn
}

// echo sends n bytes over conn and reads them back.
func echo(t *testing.T, conn net.Conn, n int) {
	t.Helper()
	if _, err := conn.Write(bytes.Repeat([]byte("x"), n)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatalf("echo of %d bytes: %v", n, err)
	}
}

// Counters in every range real traffic can reach under TCG (plain numbers, K, M for
// bytes and byte rates; --exact widths above 8 digits), rates, active, inactive and
// persistent connection counts, and the connection table (-c) over IPv4 and IPv6, TCP
// and UDP, with persistence templates.
func TestKernelStatusTraffic(t *testing.T) {
	tb := newTrafficBed(t)
	c := newClient(t, tb.lb)
	tcp4, tcp6 := key(inet.TCP, "10.0.0.100:80"), key(inet.TCP, "[fd00::100]:80")
	bulk := key(inet.UDP, "200.0.0.100:9000")
	apply(t, c, []ipvs.Op{
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: tcp4, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 600}),
		ipvs.AddDestinationOp(tcp4, dest("10.1.0.1:8080", ipvs.Masq, 1)),
		ipvs.AddDestinationOp(tcp4, dest("10.1.0.2:8080", ipvs.Masq, 2)),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: tcp6, Scheduler: "rr"}),
		ipvs.AddDestinationOp(tcp6, dest("[fd01::1]:8080", ipvs.Masq, 1)),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: bulk, Scheduler: "rr"}),
		ipvs.AddDestinationOp(bulk, dest("10.1.0.1:9000", ipvs.Masq, 1)),
		ipvs.AddDestinationOp(bulk, dest("10.1.0.2:9000", ipvs.Masq, 1)),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: key(inet.UDP, "200.0.0.100:9001"), Scheduler: "rr"}),
		ipvs.AddDestinationOp(key(inet.UDP, "200.0.0.100:9001"), dest("10.1.0.1:9001", ipvs.Masq, 1)),
	})
	echoServer(t, tb.be, "tcp", ":8080")
	begin := time.Now()

	// TCP: some connections closed (inactive), some left open (active).
	for range 6 {
		conn := dialIn(t, tb.lb, "tcp", "10.0.0.100:80")
		echo(t, conn, 2000)
		conn.Close()
	}
	var open []net.Conn
	for range 3 {
		conn := dialIn(t, tb.lb, "tcp", "10.0.0.100:80")
		echo(t, conn, 100)
		open = append(open, conn)
	}
	conn6 := dialIn(t, tb.lb, "tcp", "[fd00::100]:80")
	echo(t, conn6, 5000)
	open = append(open, conn6)
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()

	// UDP bulk: over 10^9 bytes in 60000-byte datagrams (the backend does not listen;
	// IPVS counts what it forwards).
	var udp net.PacketConn
	if err := netnsutil.Do(tb.lb.Handle, func() error {
		var err error
		udp, err = net.ListenPacket("udp4", "10.0.0.100:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	payload := make([]byte, 60000)
	refused := 0
	send := func(port, n int) {
		to := &net.UDPAddr{IP: net.IPv4(200, 0, 0, 100), Port: port}
		for sent := 0; sent < n; {
			if _, err := udp.WriteTo(payload, to); err != nil {
				// A full queue (ENOBUFS, EAGAIN) or a late ICMP error: try again, boundedly.
				if refused++; refused > 100000 {
					t.Fatalf("after %d datagrams to %s: %v", sent, to, err)
				}
				continue
			}
			sent++
		}
	}
	send(9000, 17500) // 1.05e9 bytes: the M range
	send(9001, 2000)  // 1.2e8 bytes: the K range
	t.Logf("traffic done after %v (%d sends refused)", time.Since(begin).Round(time.Millisecond), refused)

	// The kernel folds per-CPU counters into the reported ones every 2 s: poll for them.
	poll.Until(t, 60*time.Second, "bulk service counters at 10^9 bytes", func() (bool, string) {
		s, err := c.GetService(bulk)
		if err != nil {
			t.Fatal(err)
		}
		return s.Stats.InBytes >= 1e9, fmt.Sprintf("bulk service: %+v", s.Stats)
	})
	if s, err := c.GetService(bulk); err == nil {
		t.Logf("bulk service: %+v", s.Stats)
	}
	t.Log(mustRun(t, tb.lb, "ipvsadm", "-Ln", "--stats"))
	t.Log(mustRun(t, tb.lb, "ipvsadm", "-Ln", "--rate"))
	compareAll(t, tb.lb, c, true, 10)
	capture(t, tb.lb, "traffic")
}

// captureModes are the ipvsadm outputs capture records for the formatter's unit tests.
var captureModes = []string{
	"-Ln", "-Ln --nosort", "-Ln --stats", "-Ln --stats --exact", "-Ln --rate", "-Ln --rate --exact",
	"-Ln --thresholds", "-Ln --persistent-conn", "-Ln --tun-info", "-Sn",
}

// capture prints, when KIPVS_STATUS_CAPTURE=1, the state of ns as testdata for
// internal/ipvsadm: `kipvs status -o json --nosort` (the kernel state in the kernel's order),
// /proc/net/ip_vs_conn, and ipvsadm's output for every capture mode and for -Lnc, each
// taken between two identical readings of its input. The blocks are base64 between
// markers on stdout; see internal/ipvsadm/testdata/README.md.
func capture(t *testing.T, ns *netnstest.NS, state string) {
	t.Helper()
	if os.Getenv("KIPVS_STATUS_CAPTURE") != "1" {
		return
	}
	emit := func(name, content string) {
		fmt.Printf("@@CAPTURE %s/%s %s\n", state, name, base64.StdEncoding.EncodeToString([]byte(content)))
	}
	stableAround := func(read func() string, between func() string) (string, string) {
		for range 20 {
			a := read()
			out := between()
			if b := read(); a == b {
				return a, out
			}
		}
		t.Fatalf("capture %s: the state kept changing", state)
		return "", ""
	}
	readJSON := func() string { return kipvs(t, ns, "status", "-o", "json", "--nosort").stdout }
	var cases strings.Builder
	var snapshot string
	extra := 0
	for _, m := range captureModes {
		js, out := stableAround(readJSON, func() string { return mustRun(t, ns, "ipvsadm", strings.Fields(m)...) })
		switch {
		case snapshot == "":
			snapshot = js
		case js != snapshot:
			// Rates moved between modes: this mode is checked against its own snapshot.
			extra++
			name := fmt.Sprintf("snapshot-%d.json", extra)
			emit(name, js)
			fmt.Fprintf(&cases, "=== ipvsadm %s @%s\n%s", m, name, out)
			continue
		}
		fmt.Fprintf(&cases, "=== ipvsadm %s\n%s", m, out)
	}
	emit("snapshot.json", snapshot)
	emit("ipvsadm.txt", cases.String())
	conns := mustRun(t, ns, "cat", ipvsadm.ConnFile)
	out := runFrozen(t, ns, conns, "ipvsadm", "-Lnc").stdout + "=== ipvsadm -Lnc --persistent-conn\n" +
		runFrozen(t, ns, conns, "ipvsadm", "-Lnc", "--persistent-conn").stdout
	emit("ip_vs_conn", conns)
	emit("ipvsadm-conn.txt", "=== ipvsadm -Lnc\n"+out)
}

// runFrozen runs a command in ns with /proc replaced, in a private mount namespace, by a
// directory whose net/ip_vs_conn holds conns: ipvsadm -c and kipvs status -c both read
// /proc/net/ip_vs_conn, so they then list the same fixed table.
func runFrozen(t *testing.T, ns *netnstest.NS, conns string, name string, args ...string) result {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/net", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/net/ip_vs_conn", []byte(conns), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	if name == "kipvs" {
		name, env = os.Args[0], []string{runMainEnv + "=1"}
		if bin := os.Getenv("KIPVS_BIN"); bin != "" {
			name, env = bin, nil
		}
		args = append([]string{"status"}, args...)
	}
	return runIn(t, ns, env, "unshare", append([]string{"-m", "sh", "-c", `mount --bind "$0" /proc && exec "$@"`, dir, name}, args...)...)
}

// compareConnFile compares `kipvs status args` with `ipvsadm args` on a fixed table.
func compareConnFile(t *testing.T, ns *netnstest.NS, conns, args string) {
	t.Helper()
	a := strings.Fields(args)
	k, v := runFrozen(t, ns, conns, "kipvs", a...), runFrozen(t, ns, conns, "ipvsadm", a...)
	if k.code != 0 || v.code != 0 || k.stdout != v.stdout {
		t.Errorf("kipvs status %s on a fixed table differs from ipvsadm (exit %d vs %d, stderr %q vs %q):\n%s",
			args, k.code, v.code, k.stderr, v.stderr, lineDiff(v.stdout, k.stdout))
	}
}

// craftedConns is a connection table in the kernel's format (ip_vs_conn_seq_show) with
// what real traffic in a test rarely produces: persistence templates (protocol IP, state
// NONE), SCTP, IPv6 with an IPv4-mapped and a "::a.b.c.d" address, an IPv4 connection to
// an IPv6 real server (tunnelling), expiry times of zero and above 99 minutes, and
// persistence-engine data.
const craftedConns = `Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
TCP 0A000064 8300 0A000064 0050 0A010002 1F90 ESTABLISHED     890
TCP C0A80101 D431 C8000001 01BB 0A010002 01BB FIN_WAIT          0
UDP 0A000064 A001 C8000064 2328 0A010001 2328 UDP             299
IP  0A000064 0000 0A000064 0050 0A010002 1F90 NONE          86399
SCTP 0A000001 0FA0 0A000009 0063 0A010003 0063 ESTABLISHED    3600
TCP fd00:0000:0000:0000:0000:0000:0000:0100 B766 fd00:0000:0000:0000:0000:0000:0000:0100 0050 fd01:0000:0000:0000:0000:0000:0000:0001 1F90 ESTABLISHED     899
TCP 0000:0000:0000:0000:0000:ffff:0a00:0001 0400 0000:0000:0000:0000:0000:0000:0102:0304 0050 2001:0db8:0000:0000:0001:0000:0000:0001 0050 SYN_RECV         59
TCP 0A000064 8301 0A000064 0050 fd01:0000:0000:0000:0000:0000:0000:0001 0050 ESTABLISHED      61
UDP 0A000064 13C4 0A000064 13C4 0A010002 13C4 UDP             179 sip 3c26700857bd@10.0.0.100
`

// The -c listing on crafted tables, against ipvsadm on the same table.
func TestKernelStatusConnFile(t *testing.T) {
	ns := netnstest.New(t)
	header := craftedConns[:strings.IndexByte(craftedConns, '\n')+1]
	for name, conns := range map[string]string{"crafted": craftedConns, "empty": header} {
		for _, a := range []string{"-Lnc", "-Lnc --persistent-conn", "-L -c -n --exact"} {
			t.Run(name+" "+a, func(t *testing.T) { compareConnFile(t, ns, conns, a) })
		}
	}
	if os.Getenv("KIPVS_STATUS_CAPTURE") == "1" {
		out := "=== ipvsadm -Lnc\n" + runFrozen(t, ns, craftedConns, "ipvsadm", "-Lnc").stdout +
			"=== ipvsadm -Lnc --persistent-conn\n" + runFrozen(t, ns, craftedConns, "ipvsadm", "-Lnc", "--persistent-conn").stdout
		fmt.Printf("@@CAPTURE crafted/ip_vs_conn %s\n", base64.StdEncoding.EncodeToString([]byte(craftedConns)))
		fmt.Printf("@@CAPTURE crafted/ipvsadm-conn.txt %s\n", base64.StdEncoding.EncodeToString([]byte(out)))
	}
}
