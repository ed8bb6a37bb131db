//go:build kernel

package conntrack_test

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/testutil/golden"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// insertArgs is the `conntrack -I` command that creates fl.
func insertArgs(fl conntrack.Flow) string {
	args := []string{"conntrack", "-I", "-p", fl.Protocol.String(),
		"-s", fl.Orig.Src.Addr().String(), "-d", fl.Orig.Dst.Addr().String(),
		"--sport", strconv.Itoa(int(fl.Orig.Src.Port())), "--dport", strconv.Itoa(int(fl.Orig.Dst.Port())),
		"-r", fl.Reply.Src.Addr().String(), "-q", fl.Reply.Dst.Addr().String(),
		"--reply-port-src", strconv.Itoa(int(fl.Reply.Src.Port())), "--reply-port-dst", strconv.Itoa(int(fl.Reply.Dst.Port())),
		"-t", "3600"}
	switch fl.Protocol {
	case inet.TCP:
		args = append(args, "--state", "ESTABLISHED")
	case inet.SCTP:
		args = append(args, "--state", "ESTABLISHED", "--orig-vtag", "1", "--reply-vtag", "2")
	}
	if fl.Zone != 0 {
		args = append(args, "-w", strconv.Itoa(int(fl.Zone)))
	}
	if fl.Mark != 0 {
		args = append(args, "-m", strconv.Itoa(int(fl.Mark)))
	}
	return strings.Join(args, " ")
}

// listed reads the namespace's table with `conntrack -L` and renders it in the Dump format.
func listed(t *testing.T, ns *netnstest.NS) string {
	t.Helper()
	out := ns.MustRun(t, "conntrack", "-L")
	var fs []conntrack.Flow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		fs = append(fs, parseListed(t, line))
	}
	return conntrack.FormatDump(fs)
}

// parseListed parses one line of `conntrack -L`, e.g. "udp 17 29 src=10.0.0.1
// dst=10.96.0.10 sport=1 dport=53 [UNREPLIED] src=... dst=... sport=53 dport=1 mark=0 use=1":
// the first src/dst/sport/dport are the original direction, the second the reply.
func parseListed(t *testing.T, line string) conntrack.Flow {
	t.Helper()
	fields := strings.Fields(line)
	if len(fields) < 2 {
		t.Fatalf("conntrack -L line %q", line)
	}
	proto, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatalf("conntrack -L line %q: protocol number: %v", line, err)
	}
	seen := map[string]int{}
	vals := [2]map[string]string{{}, {}}
	fl := conntrack.Flow{Protocol: inet.Protocol(proto)}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		switch k {
		case "src", "dst", "sport", "dport":
			if seen[k] < 2 {
				vals[seen[k]][k] = v
			}
			seen[k]++
		case "zone":
			z, _ := strconv.Atoi(v)
			fl.Zone = uint16(z)
		case "mark":
			m, _ := strconv.ParseUint(v, 10, 32)
			fl.Mark = uint32(m)
		}
	}
	tuple := func(m map[string]string) conntrack.Tuple {
		port := func(s string) uint16 {
			if s == "" {
				return 0
			}
			p, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("conntrack -L line %q: port %q", line, s)
			}
			return uint16(p)
		}
		return conntrack.Tuple{
			Src: netip.AddrPortFrom(netip.MustParseAddr(m["src"]), port(m["sport"])),
			Dst: netip.AddrPortFrom(netip.MustParseAddr(m["dst"]), port(m["dport"])),
		}
	}
	fl.Orig, fl.Reply = tuple(vals[0]), tuple(vals[1])
	return fl
}

// The shared table against the kernel: the seed flows are created with `conntrack -I`,
// and every dump must equal what `conntrack -L` shows in the namespace.
func TestOpsKernel(t *testing.T) {
	ns := netnstest.New(t)
	var script []string
	for _, fl := range seedFlows() {
		script = append(script, insertArgs(fl)+" 2>/dev/null")
	}
	ns.MustRun(t, "sh", "-ec", strings.Join(script, "\n"))
	// A socket bound to another namespace (here the VM's root) sees none of them.
	root, err := conntrack.New(netns.None())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if d, err := root.Dump(); err != nil || strings.Contains(d, "10.96.0.10") {
		t.Fatalf("the root namespace's table (%v) shows the test namespace's flows:\n%s", err, d)
	}
	if out, err := exec.Command("conntrack", "-L").Output(); err != nil || strings.Contains(string(out), "10.96.0.10") {
		t.Fatalf("conntrack -L in the root namespace (%v):\n%s", err, out)
	}
	c, err := conntrack.New(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	golden.Check(t, "ops.golden", runOps(t, c, func(t *testing.T) string { return listed(t, ns) }))
}

// Connection tracking in a fresh namespace is off until something asks for it (here an
// iptables rule with a conntrack match): UDP sent before creates no flow, UDP sent after
// does, for IPv4 and IPv6. The stale flows are then deleted by original destination, and
// `conntrack -L` shows exactly the other family's flow left, then none.
func TestStaleUDPFlowsKernel(t *testing.T) {
	ns := netnstest.New(t)
	c, err := conntrack.New(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(dst string) netip.AddrPort {
		t.Helper()
		var src netip.AddrPort
		err := netnsutil.Do(ns.Handle, func() error {
			conn, err := net.Dial("udp", dst)
			if err != nil {
				return err
			}
			defer conn.Close()
			src = netip.MustParseAddrPort(conn.LocalAddr().String())
			_, err = conn.Write([]byte("x"))
			return err
		})
		if err != nil {
			t.Fatalf("send to %s: %v", dst, err)
		}
		return src
	}
	early := send("127.0.0.1:5353")
	ns.MustRun(t, "sh", "-ec", "for c in iptables ip6tables; do $c -A INPUT -m conntrack --ctstate NEW -j ACCEPT; done")
	src4 := send("127.0.0.1:5353")
	src6 := send("[::1]:5353")
	want := conntrack.FormatDump([]conntrack.Flow{
		{Protocol: inet.UDP, Orig: conntrack.Tuple{src4, ap("127.0.0.1:5353")}, Reply: conntrack.Tuple{ap("127.0.0.1:5353"), src4}},
		{Protocol: inet.UDP, Orig: conntrack.Tuple{src6, ap("[::1]:5353")}, Reply: conntrack.Tuple{ap("[::1]:5353"), src6}},
	})
	var got string
	_, _ = poll.Wait(10*time.Second, "the flows", func() (bool, string) {
		if got, err = c.Dump(); err != nil {
			t.Fatal(err)
		}
		return got == want, ""
	})
	if got != want {
		t.Fatalf("flows after UDP from %s (untracked), %s and %s:\n%s\nwant:\n%s", early, src4, src6, got, want)
	}
	if obs := listed(t, ns); obs != want {
		t.Fatalf("conntrack -L shows:\n%s\nwant:\n%s", obs, want)
	}
	if n, err := deleteByOrigDst(c, inet.UDP, ap("127.0.0.1:5353")); err != nil || n != 1 {
		t.Fatalf("DeleteByOrigDst(udp, 127.0.0.1:5353) = %d, %v; want 1", n, err)
	}
	if obs, want := listed(t, ns), fmt.Sprintf("udp orig %s -> [::1]:5353 reply [::1]:5353 -> %s\n", src6, src6); obs != want {
		t.Fatalf("conntrack -L after deleting the IPv4 flow:\n%s\nwant:\n%s", obs, want)
	}
	if n, err := deleteByReplySrc(c, inet.UDP, netip.MustParseAddr("::1")); err != nil || n != 1 {
		t.Fatalf("DeleteByReplySrc(udp, ::1) = %d, %v; want 1", n, err)
	}
	if obs := listed(t, ns); obs != "" {
		t.Fatalf("conntrack -L after deleting both flows:\n%s", obs)
	}
}
