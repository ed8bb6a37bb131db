//go:build kernel

package svcstats

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Two Services share the VIP 10.0.0.100 on ports 80 and 443, their real servers in a
// backend namespace behind a veth pair. After real TCP requests through each (some
// connections left open), the collector's per-Service and per-endpoint series equal what
// `ipvsadm -Ln --stats --exact` (counters) and `ipvsadm -Ln` (active and inactive
// connections) show for the same virtual and real servers; without endpoint metrics, with
// the connection gauges from a read of the whole table, the per-Service series do too.
func TestKernelTrafficMatchesIpvsadm(t *testing.T) {
	lb, be := netnstest.New(t), netnstest.New(t)
	for _, cmd := range [][]string{
		{"sysctl", "-qw", "net.ipv4.vs.conntrack=1"},
		{"ip", "link", "add", "kipvs0", "type", "dummy"},
		{"ip", "addr", "add", "10.0.0.100/32", "dev", "kipvs0"},
		{"ip", "link", "set", "kipvs0", "up"},
		{"ip", "link", "add", "veth-lb", "type", "veth", "peer", "name", "veth-be", "netns", be.Name},
		{"ip", "addr", "add", "10.1.0.254/24", "dev", "veth-lb"},
		{"ip", "link", "set", "veth-lb", "up"},
	} {
		lb.MustRun(t, cmd...)
	}
	for _, cmd := range [][]string{
		{"ip", "addr", "add", "10.1.0.1/24", "dev", "veth-be"},
		{"ip", "addr", "add", "10.1.0.2/24", "dev", "veth-be"},
		{"ip", "link", "set", "veth-be", "up"},
		{"ip", "route", "add", "default", "via", "10.1.0.254"},
	} {
		be.MustRun(t, cmd...)
	}
	c, err := ipvs.New(lb.Handle, ipvs.WithTimeout(DefaultTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	web := ipvs.ServiceKey{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.0.0.100"), Port: 80}
	api := ipvs.ServiceKey{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.0.0.100"), Port: 443}
	dest := func(a string, port uint16) ipvs.Destination {
		return ipvs.Destination{Addr: netip.MustParseAddr(a), Port: port, Forward: ipvs.Masq, Weight: 1}
	}
	if err := c.Apply([]ipvs.Op{
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: web, Scheduler: "rr"}),
		ipvs.AddDestinationOp(web, dest("10.1.0.1", 8080)),
		ipvs.AddDestinationOp(web, dest("10.1.0.2", 8080)),
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: api, Scheduler: "rr"}),
		ipvs.AddDestinationOp(api, dest("10.1.0.1", 8443)),
	}); err != nil {
		t.Fatal(err)
	}
	echoServer(t, be, ":8080")
	echoServer(t, be, ":8443")

	// N requests through each virtual server, all but the last connection closed.
	const nWeb, nAPI = 5, 3
	var open []net.Conn
	defer func() {
		for _, conn := range open {
			conn.Close()
		}
	}()
	for _, r := range []struct {
		addr string
		n    int
		size int
	}{{"10.0.0.100:80", nWeb, 1000}, {"10.0.0.100:443", nAPI, 3000}} {
		for i := range r.n {
			conn := dial(t, lb, r.addr)
			echo(t, conn, r.size)
			if i == r.n-1 {
				open = append(open, conn)
			} else {
				conn.Close()
			}
		}
	}

	vss := func() []debugapi.VirtualServer {
		return []debugapi.VirtualServer{
			{Protocol: "TCP", Address: "10.0.0.100", Port: 80, Kind: "ClusterIP", Namespace: "default", Name: "web", PortName: "http"},
			{Protocol: "TCP", Address: "10.0.0.100", Port: 443, Kind: "ClusterIP", Namespace: "default", Name: "api", PortName: "https"},
		}
	}
	reg := gatherer(New(Options{IPVS: c, Endpoints: true, VirtualServers: vss}))
	// Without endpoint metrics (the default), the scrape reads the service dump only and
	// the connection gauges come from the last full read of the table (here, just before).
	conns := &Connections{}
	svcOnly := gatherer(New(Options{IPVS: c, Connections: conns, VirtualServers: vss}))

	// The kernel folds its per-CPU counters into the reported ones every 2 s, and closing
	// connections still exchange packets: compare once the collector reads the same
	// twice in a row (and ipvsadm agrees), the counted connections complete.
	var got, got2, want, prev map[string][]uint64
	poll.Until(t, 60*time.Second, fmt.Sprintf("the collectors and ipvsadm to agree on %d and %d connections", nWeb, nAPI), func() (bool, string) {
		prev = got
		got = fromCollector(t, reg)
		table, err := c.Table()
		if err != nil {
			t.Fatal(err)
		}
		conns.Observe(time.Now(), table)
		got2 = fromCollector(t, svcOnly)
		want = fromIpvsadm(t, lb)
		return slices.Equal(got["web"], prev["web"]) && slices.Equal(got["api"], prev["api"]) &&
				len(got["web"]) > 0 && got["web"][0] == nWeb && len(got["api"]) > 0 && got["api"][0] == nAPI && equalMaps(got, want) &&
				len(got2) == 2 && slices.Equal(got2["web"], want["web"]) && slices.Equal(got2["api"], want["api"]),
			fmt.Sprintf("\ncollector %v\nwithout endpoints %v\nipvsadm   %v", got, got2, want)
	})
	t.Logf("collector (conns, inpkts, outpkts, inbytes, outbytes, active, inactive): %v", got)
	t.Log(lb.MustRun(t, "ipvsadm", "-Ln", "--stats", "--exact"))
	if got["api"][5] != 1 || got["web"][5] != 1 {
		t.Errorf("one connection left open per Service, active connections: web %d, api %d", got["web"][5], got["api"][5])
	}
}

// fromCollector gathers reg into name -> [conns, inpkts, outpkts, inbytes, outbytes,
// active, inactive], where name is the Service ("web", "api") or the Service and
// endpoint ("web 10.1.0.1:8080").
func fromCollector(t *testing.T, reg prometheus.Gatherer) map[string][]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]uint64{}
	for _, mf := range mfs {
		scope, metric, ok := strings.Cut(strings.TrimPrefix(mf.GetName(), "kipvs_"), "_")
		if !ok || (scope != "service" && scope != "endpoint") || strings.HasPrefix(metric, "stats_") {
			continue
		}
		for _, m := range mf.Metric {
			var name, dir string
			var ep string
			for _, l := range m.Label {
				switch l.GetName() {
				case "service":
					name = l.GetValue()
				case "direction":
					dir = l.GetValue()
				case "endpoint":
					ep = l.GetValue()
				}
			}
			if scope == "endpoint" {
				name += " " + ep
			}
			idx := map[string]int{"connections_total": 0, "packets_total in": 1, "packets_total out": 2, "bytes_total in": 3,
				"bytes_total out": 4, "active_connections": 5, "inactive_connections": 6}[strings.TrimSpace(metric+" "+dir)]
			if out[name] == nil {
				out[name] = make([]uint64, 7)
			}
			out[name][idx] = uint64(value(mf.GetType(), m))
		}
	}
	return out
}

// fromIpvsadm reads the same table from ipvsadm -Ln --stats --exact and ipvsadm -Ln.
func fromIpvsadm(t *testing.T, ns *netnstest.NS) map[string][]uint64 {
	t.Helper()
	names := map[string]string{"10.0.0.100:80": "web", "10.0.0.100:443": "api"}
	out := map[string][]uint64{}
	parse := func(args []string, first int) {
		var svc string
		for _, line := range strings.Split(ns.MustRun(t, append([]string{"ipvsadm"}, args...)...), "\n") {
			f := strings.Fields(line)
			var name string
			switch {
			case len(f) >= 3 && f[0] == "TCP":
				svc = names[f[1]]
				if first != 0 {
					continue // -Ln: scheduler and flags
				}
				name, f = svc, f[2:]
			case len(f) >= 3 && f[0] == "->" && f[1] != "RemoteAddress:Port":
				name, f = svc+" "+f[1], f[2:]
			default:
				continue
			}
			if first != 0 {
				f = f[len(f)-2:] // Forward Weight ActiveConn InActConn: the last two
			}
			if out[name] == nil {
				out[name] = make([]uint64, 7)
			}
			for i, s := range f {
				v, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					t.Fatalf("ipvsadm %s: %q: %v", strings.Join(args, " "), line, err)
				}
				out[name][first+i] = v
			}
		}
	}
	parse([]string{"-Ln", "--stats", "--exact"}, 0)
	parse([]string{"-Ln"}, 5)
	// ipvsadm has no per-Service active counts: they are the real servers' sums.
	for name, v := range out {
		if svc, _, ok := strings.Cut(name, " "); ok {
			out[svc][5] += v[5]
			out[svc][6] += v[6]
		}
	}
	return out
}

func equalMaps(a, b map[string][]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// echoServer echoes TCP connections accepted in ns on addr.
func echoServer(t *testing.T, ns *netnstest.NS, addr string) {
	t.Helper()
	var ln net.Listener
	if err := netnsutil.Do(ns.Handle, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
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

// dial opens a TCP connection from inside ns.
func dial(t *testing.T, ns *netnstest.NS, addr string) net.Conn {
	t.Helper()
	var conn net.Conn
	if err := netnsutil.Do(ns.Handle, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, 20*time.Second)
		return err
	}); err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	return conn
}

// echo sends n bytes over conn and reads them back.
func echo(t *testing.T, conn net.Conn, n int) {
	t.Helper()
	if _, err := conn.Write([]byte(strings.Repeat("x", n))); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(conn, make([]byte, n)); err != nil {
		t.Fatal(fmt.Errorf("echo of %d bytes: %w", n, err))
	}
}
