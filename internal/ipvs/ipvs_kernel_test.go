//go:build kernel

package ipvs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/testutil/golden"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

func newClient(t *testing.T, ns *netnstest.NS, opts ...ipvs.Option) *ipvs.Client {
	t.Helper()
	c, err := ipvs.New(ns.Handle, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// The shared op table against the kernel: same outcomes and golden dump as the fake, and
// the same table as ipvsadm reads it.
func TestKernelOpTable(t *testing.T) {
	ns := netnstest.New(t)
	c := newClient(t, ns)
	runOpTable(t, c)
	checkReads(t, c)
	dump := mustDump(t, c)
	golden.Check(t, "ops.golden", dump)
	checkIPVSADM(t, ns, c)

	// The client is bound to its namespace: nothing leaked into the test's own.
	if out, err := exec.Command("ipvsadm", "-Sn").Output(); err != nil || strings.Contains(string(out), "10.0.0.1:80") {
		t.Errorf("root namespace ipvsadm -Sn (%v):\n%s", err, out)
	}
}

// checkIPVSADM compares the client's view with ipvsadm's in ns: the -Sn rules (re-sorted),
// and the thresholds, weights and forwarding methods of -Ln --thresholds and -Ln.
func checkIPVSADM(t *testing.T, ns *netnstest.NS, c *ipvs.Client) {
	t.Helper()
	dump := mustDump(t, c)
	got := resortRules(t, run(t, ns, "ipvsadm", "-Sn"))
	if want := thresholdRE.ReplaceAllString(dump, ""); got != want {
		t.Errorf("ipvsadm -Sn (re-sorted) differs from Dump (thresholds removed):\n--- ipvsadm\n%s--- Dump\n%s", got, want)
	}
	table, err := c.Table()
	if err != nil {
		t.Fatal(err)
	}
	_, thr := parseListing(t, run(t, ns, "ipvsadm", "-Ln", "--thresholds"))
	_, lst := parseListing(t, run(t, ns, "ipvsadm", "-Ln"))
	n := 0
	for _, e := range table {
		id := e.Service.ServiceKey.String()
		for _, d := range e.Destinations {
			n++
			name := d.AddrPort().String()
			if want := []string{u(d.UpperThreshold), u(d.LowerThreshold), u(d.ActiveConns), u(d.InactiveConns)}; !slices.Equal(thr[id][name], want) {
				t.Errorf("ipvsadm --thresholds %s -> %s: %q, want %q", id, name, thr[id][name], want)
			}
			if want := []string{d.Forward.String(), strconv.Itoa(d.Weight), u(d.ActiveConns), u(d.InactiveConns)}; !slices.Equal(lst[id][name], want) {
				t.Errorf("ipvsadm -Ln %s -> %s: %q, want %q", id, name, lst[id][name], want)
			}
		}
	}
	if got := countRows(lst); got != n {
		t.Errorf("ipvsadm -Ln lists %d destinations, the client %d", got, n)
	}
}

// run runs a command inside ns and returns its stdout. It forks the command from a thread
// in the namespace (netnsutil.Run), which under TCG is several times cheaper than
// `ip netns exec`.
func run(t *testing.T, ns *netnstest.NS, args ...string) string {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := netnsutil.Run(ns.Handle, cmd); err != nil {
		t.Fatalf("in netns %s: %s: %v: %s", ns.Name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

var thresholdRE = regexp.MustCompile(` -x \d+ -y \d+`)

func u(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

func countRows(m map[string]map[string][]string) int {
	n := 0
	for _, d := range m {
		n += len(d)
	}
	return n
}

// resortRules sorts `ipvsadm -S` output into Dump's order, parsing each line's service
// and destination.
func resortRules(t *testing.T, out string) string {
	t.Helper()
	type dest struct {
		d    ipvs.Destination
		line string
	}
	type group struct {
		key   ipvs.ServiceKey
		line  string
		dests []dest
	}
	var groups []*group
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		key, rest, err := parseRuleService(f[1:])
		if err != nil {
			t.Fatalf("ipvsadm -S line %q: %v", line, err)
		}
		switch f[0] {
		case "-A":
			groups = append(groups, &group{key: key, line: line})
		case "-a":
			if len(groups) == 0 || groups[len(groups)-1].key != key || len(rest) < 2 || rest[0] != "-r" {
				t.Fatalf("ipvsadm -S destination line %q out of place", line)
			}
			a, err := netip.ParseAddrPort(rest[1])
			if err != nil {
				t.Fatalf("ipvsadm -S line %q: %v", line, err)
			}
			g := groups[len(groups)-1]
			g.dests = append(g.dests, dest{ipvs.Destination{Addr: a.Addr(), Port: a.Port()}, line})
		default:
			t.Fatalf("ipvsadm -S line %q", line)
		}
	}
	slices.SortFunc(groups, func(a, b *group) int { return ipvs.CompareServiceKeys(a.key, b.key) })
	var b strings.Builder
	for _, g := range groups {
		slices.SortFunc(g.dests, func(a, b dest) int { return ipvs.CompareDestinations(a.d, b.d) })
		b.WriteString(g.line + "\n")
		for _, d := range g.dests {
			b.WriteString(d.line + "\n")
		}
	}
	return b.String()
}

func parseRuleService(f []string) (ipvs.ServiceKey, []string, error) {
	if len(f) < 2 {
		return ipvs.ServiceKey{}, nil, errors.New("no service")
	}
	if f[0] == "-f" {
		mark, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil {
			return ipvs.ServiceKey{}, nil, err
		}
		k := ipvs.ServiceKey{FWMark: uint32(mark), Family: inet.IPv4}
		rest := f[2:]
		if len(rest) > 0 && rest[0] == "-6" {
			k.Family, rest = inet.IPv6, rest[1:]
		}
		return k, rest, nil
	}
	protos := map[string]inet.Protocol{"-t": inet.TCP, "-u": inet.UDP, "--sctp-service": inet.SCTP}
	p, ok := protos[f[0]]
	if !ok {
		return ipvs.ServiceKey{}, nil, fmt.Errorf("unknown service option %q", f[0])
	}
	a, err := netip.ParseAddrPort(f[1])
	if err != nil {
		return ipvs.ServiceKey{}, nil, err
	}
	k, err := ipvs.ServiceKey{Protocol: p, Addr: a.Addr(), Port: a.Port()}.Normalize()
	return k, f[2:], err
}

// parseListing parses an `ipvsadm -L` listing (any of its modes) into the fields after the
// name of every service row and every destination row, keyed by ServiceKey.String() and
// the destination's address:port.
func parseListing(t *testing.T, out string) (svcs map[string][]string, dests map[string]map[string][]string) {
	t.Helper()
	svcs, dests = map[string][]string{}, map[string]map[string][]string{}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(line, "IP Virtual Server") || strings.HasPrefix(line, "Prot ") ||
			strings.HasPrefix(line, "  -> RemoteAddress"):
		case f[0] == "->":
			if cur == "" {
				t.Fatalf("ipvsadm destination row before any service: %q", line)
			}
			dests[cur][f[1]] = f[2:]
		default:
			if len(f) < 2 {
				t.Fatalf("ipvsadm service row %q", line)
			}
			cur, f = f[0]+" "+f[1], f[2:]
			if strings.HasPrefix(cur, "FWM ") && len(f) > 0 && f[0] == "IPv6" {
				cur, f = cur+" IPv6", f[1:]
			}
			svcs[cur] = f
			dests[cur] = map[string][]string{}
		}
	}
	return svcs, dests
}

// 1,000 destinations on one service through one Apply, against one call per op; then a
// batch delete split into many sendmsg calls, with failures inside chunks.
func TestKernelBatch(t *testing.T) {
	ns := netnstest.New(t)
	c := newClient(t, ns)
	const n = 1000
	k := tcp("10.0.0.1:80")
	k2 := tcp("10.0.0.2:80")
	dest := func(i int) ipvs.Destination {
		return masq(fmt.Sprintf("10.1.%d.%d:8080", i/250, i%250+1), 1+i%7)
	}

	ops := []ipvs.Op{ipvs.AddServiceOp(ipvs.Service{ServiceKey: k, Scheduler: "rr"})}
	want := []ipvs.Entry{{Service: ipvs.Service{ServiceKey: k, Scheduler: "rr"}}}
	for i := range n {
		ops = append(ops, ipvs.AddDestinationOp(k, dest(i)))
		want[0].Destinations = append(want[0].Destinations, dest(i))
		switch i {
		case 499:
			ops = append(ops, ipvs.AddDestinationOp(k, dest(7))) // duplicate, index 501
		case 699:
			ops = append(ops, ipvs.AddDestinationOp(tcp("10.9.9.9:80"), dest(1))) // missing service, index 702
		}
	}
	sends := ipvs.Sends(c)
	start := time.Now()
	err := c.Apply(ops)
	batchTime := time.Since(start)
	batchSends := ipvs.Sends(c) - sends
	var be *ipvs.BatchError
	if !errors.As(err, &be) || len(be.Errors) != 2 || be.Errors[0].Index != 501 || be.Errors[1].Index != 702 ||
		!errors.Is(be.Errors[0], kerr.ErrExists) || !errors.Is(be.Errors[1], syscall.ESRCH) {
		t.Fatalf("Apply of %d ops: %v", len(ops), err)
	}
	if wantSends := (len(ops) + ipvs.MaxOps(c) - 1) / ipvs.MaxOps(c); batchSends != wantSends {
		t.Errorf("Apply of %d ops used %d sendmsg calls, want %d (max %d ops per call)", len(ops), batchSends, wantSends, ipvs.MaxOps(c))
	}

	// The same number of destinations, one AddDestination call each.
	if err := c.AddService(ipvs.Service{ServiceKey: k2, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, ipvs.Entry{Service: ipvs.Service{ServiceKey: k2, Scheduler: "rr"}})
	start = time.Now()
	for i := range n {
		if err := c.AddDestination(k2, dest(i)); err != nil {
			t.Fatal(err)
		}
		want[1].Destinations = append(want[1].Destinations, dest(i))
	}
	singleTime := time.Since(start)
	t.Logf("%d destinations: Apply %v in %d sendmsg calls (max %d ops each); one call per op %v; ratio %.1fx",
		n, batchTime.Round(time.Millisecond), batchSends, ipvs.MaxOps(c), singleTime.Round(time.Millisecond),
		float64(singleTime)/float64(batchTime))

	for i := range want {
		want[i].Service, _ = want[i].Service.Normalize()
	}
	if got, exp := mustDump(t, c), ipvs.FormatDump(want); got != exp {
		t.Errorf("Dump after the batch differs from the expected table (%d vs %d lines)", strings.Count(got, "\n"), strings.Count(exp, "\n"))
	}
	checkIPVSADM(t, ns, c)

	// Delete through a client limited to 100 ops per sendmsg; two ops fail, one of them
	// the last op of a chunk (whose ack ends the chunk).
	c100 := newClient(t, ns, ipvs.WithMaxBatch(100))
	var del []ipvs.Op
	for i := range n {
		del = append(del, ipvs.DeleteDestinationOp(k, dest(i).AddrPort()))
		if i == 98 || i == 400 {
			del = append(del, ipvs.DeleteDestinationOp(k, ap("10.99.0.1:1"))) // index 99 and 402
		}
	}
	sends = ipvs.Sends(c100)
	err = c100.Apply(del)
	if !errors.As(err, &be) || len(be.Errors) != 2 || be.Errors[0].Index != 99 || be.Errors[1].Index != 402 ||
		!errors.Is(err, kerr.ErrNotFound) || !errors.Is(be.Errors[1], syscall.ENOENT) {
		t.Fatalf("batched delete: %v", err)
	}
	if got := ipvs.Sends(c100) - sends; got != (len(del)+99)/100 {
		t.Errorf("batched delete of %d ops used %d sendmsg calls, want %d", len(del), got, (len(del)+99)/100)
	}
	dests, err := c.Destinations(k)
	if err != nil || len(dests) != 0 {
		t.Errorf("destinations left after the batched delete: %d (%v)", len(dests), err)
	}
	if out := run(t, ns, "ipvsadm", "-Sn"); strings.Count(out, "-a -t 10.0.0.1:80 ") != 0 || strings.Count(out, "-a -t 10.0.0.2:80 ") != n {
		t.Errorf("ipvsadm -Sn after the batched delete: %d lines", strings.Count(out, "\n"))
	}
}

// TableContext reads what Table reads, and gives up with ctx's error once ctx has ended.
func TestKernelTableContext(t *testing.T) {
	ns := netnstest.New(t)
	c := newClient(t, ns)
	for i := range 3 {
		s := ipvs.Service{ServiceKey: ipvs.ServiceKey{Addr: netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + i)}), Protocol: inet.TCP, Port: 80}, Scheduler: "rr"}
		if err := c.AddService(s); err != nil {
			t.Fatal(err)
		}
		if err := c.AddDestination(s.ServiceKey, ipvs.Destination{Addr: netip.MustParseAddr("10.244.0.5"), Port: 8080, Weight: 1}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := c.Table()
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.TableContext(t.Context())
	if err != nil || ipvs.FormatDump(got) != ipvs.FormatDump(want) || len(got) != 3 {
		t.Errorf("TableContext = %v, %v; Table = %v", got, err, want)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := c.TableContext(ctx); !errors.Is(err, context.Canceled) || got != nil {
		t.Errorf("TableContext(ended) = %v, %v; want context.Canceled", got, err)
	}
}

func TestKernelInfo(t *testing.T) {
	ns := netnstest.New(t)
	c := newClient(t, ns)
	info, err := c.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != 0x010201 {
		t.Errorf("version %#x", info.Version)
	}
	header, _, _ := strings.Cut(run(t, ns, "ipvsadm", "-Ln"), "\n")
	if want := fmt.Sprintf("IP Virtual Server version %s (size=%d)", info.VersionString(), info.ConnTableSize); header != want {
		t.Errorf("ipvsadm header %q, want %q", header, want)
	}
}

func TestKernelTimeouts(t *testing.T) {
	ns := netnstest.New(t)
	c := newClient(t, ns)
	check := func(want ipvs.Timeouts) {
		t.Helper()
		got, err := c.Timeouts()
		if err != nil || got != want {
			t.Errorf("Timeouts() = %+v, %v; want %+v", got, err, want)
		}
		line := strings.TrimSpace(run(t, ns, "ipvsadm", "-L", "--timeout"))
		if w := fmt.Sprintf("Timeout (tcp tcpfin udp): %d %d %d", want.TCP, want.TCPFin, want.UDP); line != w {
			t.Errorf("ipvsadm --timeout: %q, want %q", line, w)
		}
	}
	check(ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300})
	if err := c.SetTimeouts(ipvs.Timeouts{TCP: 1000, TCPFin: 100, UDP: 200}); err != nil {
		t.Fatal(err)
	}
	check(ipvs.Timeouts{TCP: 1000, TCPFin: 100, UDP: 200})
	if err := c.SetTimeouts(ipvs.Timeouts{TCPFin: 5}); err != nil {
		t.Fatal(err)
	}
	check(ipvs.Timeouts{TCP: 1000, TCPFin: 5, UDP: 200})
	run(t, ns, "ipvsadm", "--set", "0", "0", "50")
	check(ipvs.Timeouts{TCP: 1000, TCPFin: 5, UDP: 50})
}

// Real traffic through a persistent NAT service: a client in one namespace, the VIP on a
// dummy link there, the backend in a second namespace behind a veth pair. The client's
// counters, rates and connection counts must equal ipvsadm's.
func TestKernelStats(t *testing.T) {
	lb := netnstest.New(t)
	be := netnstest.New(t)
	run(t, lb, "sysctl", "-qw", "net.ipv4.vs.conntrack=1")
	run(t, lb, "ip", "link", "add", "kipvs0", "type", "dummy")
	run(t, lb, "ip", "addr", "add", "10.0.0.100/32", "dev", "kipvs0")
	run(t, lb, "ip", "link", "add", "veth-lb", "type", "veth", "peer", "name", "veth-be", "netns", be.Name)
	run(t, lb, "ip", "addr", "add", "10.1.0.254/24", "dev", "veth-lb")
	run(t, lb, "ip", "link", "set", "veth-lb", "up")
	run(t, be, "ip", "addr", "add", "10.1.0.1/24", "dev", "veth-be")
	run(t, be, "ip", "link", "set", "veth-be", "up")
	run(t, be, "ip", "route", "add", "default", "via", "10.1.0.254")

	c := newClient(t, lb)
	k, _ := tcp("10.0.0.100:80").Normalize()
	backend := masq("10.1.0.1:8080", 1)
	if err := c.Apply([]ipvs.Op{
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: k, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 60}),
		ipvs.AddDestinationOp(k, backend),
	}); err != nil {
		t.Fatal(err)
	}

	var ln net.Listener
	if err := netnsutil.Do(be.Handle, func() error {
		var err error
		ln, err = net.Listen("tcp", "10.1.0.1:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var served sync.WaitGroup
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer served.Done()
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	begin := time.Now()
	const conns, size = 3, 3000
	payload := []byte(strings.Repeat("x", size))
	for range conns {
		served.Add(1)
		var conn net.Conn
		if err := netnsutil.Do(lb.Handle, func() error {
			var err error
			conn, err = net.DialTimeout("tcp", "10.0.0.100:80", 20*time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := conn.Write(payload); err != nil {
			t.Fatal(err)
		}
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		echo, err := io.ReadAll(conn)
		if err != nil || len(echo) != size {
			t.Fatalf("echo through the virtual server: %d bytes, %v", len(echo), err)
		}
		conn.Close()
	}
	served.Wait()
	t.Logf("traffic done after %v", time.Since(begin).Round(time.Millisecond))

	// Counters: the kernel folds its per-CPU counters into the ones it reports in the
	// estimator, every 2 s, so wait for them. Then ours must equal ipvsadm's; packets may
	// still be in flight (the last ACKs), so compare only when two readings around
	// ipvsadm's agree.
	poll.Until(t, 30*time.Second, "the counters to show the connections", func() (bool, string) {
		s, err := c.GetService(k)
		if err != nil {
			t.Fatal(err)
		}
		return s.Stats.Conns == conns, fmt.Sprintf("%+v", s.Stats)
	})
	dk, bk := k.String(), backend.AddrPort().String()
	r := stable(t, c, k, func() string { return run(t, lb, "ipvsadm", "-Ln", "--stats", "--exact") },
		func(a, b reading) bool {
			return statsRow(a.svc.Stats) == statsRow(b.svc.Stats) && statsRow(a.dst.Stats) == statsRow(b.dst.Stats)
		},
		func(svcRows map[string][]string, destRows map[string]map[string][]string, a, _ reading) bool {
			sr, dr := statsRow(a.svc.Stats), statsRow(a.dst.Stats)
			return slices.Equal(svcRows[dk], sr[:]) && slices.Equal(destRows[dk][bk], dr[:])
		})
	if st := r.svc.Stats; st.Conns != conns || st.InBytes < conns*size || st.OutBytes < conns*size ||
		st.InPkts < 3*conns || st.OutPkts < 3*conns || r.dst.Stats.Conns != conns {
		t.Errorf("counters after %d connections of %d bytes: service %+v, destination %+v", conns, size, r.svc.Stats, r.dst.Stats)
	}

	// Connection counts, including the persistence template.
	connRow := func(d ipvs.Destination) []string {
		return []string{strconv.Itoa(d.Weight), u(d.PersistentConns), u(d.ActiveConns), u(d.InactiveConns)}
	}
	r = stable(t, c, k, func() string { return run(t, lb, "ipvsadm", "-Ln", "--persistent-conn") },
		func(a, b reading) bool { return slices.Equal(connRow(a.dst), connRow(b.dst)) },
		func(_ map[string][]string, destRows map[string]map[string][]string, a, _ reading) bool {
			return slices.Equal(destRows[dk][bk], connRow(a.dst))
		})
	if d := r.dst; d.PersistentConns != 1 || d.ActiveConns+d.InactiveConns == 0 {
		t.Errorf("connection counts: persistent %d, active %d, inactive %d", d.PersistentConns, d.ActiveConns, d.InactiveConns)
	}

	// Rates: wait until the estimator has seen the traffic. After the traffic the rates
	// only decay, and running ipvsadm can take longer than an estimator period under TCG,
	// so ipvsadm's rates must lie between two readings taken around it.
	poll.Until(t, 30*time.Second, "the rate estimator to report traffic", func() (bool, string) {
		s, err := c.GetService(k)
		if err != nil {
			t.Fatal(err)
		}
		return s.Stats.InPPS > 0 && s.Stats.InBPS > 0, fmt.Sprintf("%+v", s.Stats)
	})
	stable(t, c, k, func() string { return run(t, lb, "ipvsadm", "-Ln", "--rate", "--exact") },
		func(a, b reading) bool { return true },
		func(svcRows map[string][]string, destRows map[string]map[string][]string, a, b reading) bool {
			return between(svcRows[dk], rateRow(a.svc.Stats), rateRow(b.svc.Stats)) &&
				between(destRows[dk][bk], rateRow(a.dst.Stats), rateRow(b.dst.Stats))
		})
}

func statsRow(p *ipvs.Stats) [5]string {
	s := ipvs.StatsOf(p)
	return [5]string{n64(s.Conns), n64(s.InPkts), n64(s.OutPkts), n64(s.InBytes), n64(s.OutBytes)}
}

func rateRow(p *ipvs.Stats) [5]uint64 {
	s := ipvs.StatsOf(p)
	return [5]uint64{s.CPS, s.InPPS, s.OutPPS, s.InBPS, s.OutBPS}
}

// between reports whether every number in row lies between the matching values of a and b.
func between(row []string, a, b [5]uint64) bool {
	if len(row) != len(a) {
		return false
	}
	for i, f := range row {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil || v < min(a[i], b[i]) || v > max(a[i], b[i]) {
			return false
		}
	}
	return true
}

func n64(v uint64) string { return strconv.FormatUint(v, 10) }

// reading is the client's view of a service and its only destination.
type reading struct {
	svc ipvs.Service
	dst ipvs.Destination
}

// stable reads service k, runs ipvsadm, reads again and, once settled says the two
// readings agree, requires match to accept ipvsadm's listing. It polls (with a deadline)
// while the values move.
func stable(t *testing.T, c *ipvs.Client, k ipvs.ServiceKey, ipvsadm func() string, settled func(a, b reading) bool,
	match func(map[string][]string, map[string]map[string][]string, reading, reading) bool) reading {
	t.Helper()
	read := func() reading {
		table, err := c.Table()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range table {
			if e.Service.ServiceKey == k && len(e.Destinations) == 1 {
				return reading{e.Service, e.Destinations[0]}
			}
		}
		t.Fatalf("service %s with one destination not found", k)
		return reading{}
	}
	var got reading
	poll.Until(t, 30*time.Second, "ipvsadm to agree with two settled readings", func() (bool, string) {
		a := read()
		out := ipvsadm()
		b := read()
		if !settled(a, b) {
			return false, fmt.Sprintf("values never settled: %+v / %+v", a, b)
		}
		svcRows, destRows := parseListing(t, out)
		got = a
		return match(svcRows, destRows, a, b), fmt.Sprintf("ipvsadm disagrees with the client:\n%s\nbefore %+v\nafter %+v", out, a, b)
	})
	return got
}

// One client used from many goroutines; then Flush.
func TestKernelConcurrentAndFlush(t *testing.T) {
	ns := netnstest.New(t)
	c := newClient(t, ns)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := tcp(fmt.Sprintf("10.0.%d.1:80", g))
			if err := c.AddService(ipvs.Service{ServiceKey: k, Scheduler: "wlc"}); err != nil {
				t.Error(err)
				return
			}
			for i := range 10 {
				if err := c.AddDestination(k, masq(fmt.Sprintf("10.1.%d.%d:80", g, i+1), 1)); err != nil {
					t.Error(err)
				}
				if _, err := c.Services(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(mustDump(t, c), "\n"); n != 8*11 {
		t.Errorf("dump has %d lines, want %d", n, 8*11)
	}
	checkIPVSADM(t, ns, c)
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if out := run(t, ns, "ipvsadm", "-Sn"); out != "" {
		t.Errorf("ipvsadm -Sn after Flush:\n%s", out)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Table(); !errors.Is(err, ipvs.ErrClosed) {
		t.Errorf("Table after Close: %v", err)
	}
}

// A batch whose error acks overflow the receive buffer: the kernel drops acks (ENOBUFS);
// every op must still get a result, the lost ones as unknown, and the client must stay
// usable.
func TestKernelBatchLostAcks(t *testing.T) {
	ns := netnstest.New(t)
	c := newClient(t, ns)
	k := tcp("10.0.0.1:80")
	if err := c.AddService(ipvs.Service{ServiceKey: k, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := ipvs.RawConn(c).Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	ipvs.SetMaxOps(c, 1000)
	var ops []ipvs.Op
	for i := range 1000 {
		ops = append(ops, ipvs.DeleteDestinationOp(k, ap(fmt.Sprintf("10.1.%d.%d:80", i/250, i%250+1))))
	}
	err := c.Apply(ops)
	var be *ipvs.BatchError
	if !errors.As(err, &be) || len(be.Errors) != len(ops) {
		t.Fatalf("Apply: %v", err)
	}
	lost := 0
	for _, oe := range be.Errors {
		switch {
		case errors.Is(oe, syscall.ENOBUFS):
			lost++
		case !errors.Is(oe, syscall.ENOENT):
			t.Fatalf("op %d: %v", oe.Index, oe)
		}
	}
	if lost == 0 {
		t.Fatalf("no ack was lost with a %d-byte receive buffer; the test proves nothing", 4096)
	}
	t.Logf("%d of %d acks lost", lost, len(ops))
	if _, err := c.Info(); err != nil {
		t.Fatal(err)
	}
	if err := c.AddDestination(k, masq("10.1.0.1:80", 1)); err != nil {
		t.Fatal(err)
	}
	if got, want := mustDump(t, c), "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n"; got != want {
		t.Errorf("Dump after the overflow:\n%s", got)
	}
}
