package ipvs_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

func TestFakeOpTable(t *testing.T) {
	f := ipvstest.NewFake()
	runOpTable(t, f)
	checkReads(t, f)
	dump, err := f.Dump()
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "ops.golden", dump)
}

func TestFakeFaultInjection(t *testing.T) {
	f := ipvstest.NewFake()
	boom := kerr.Errno("injected", syscall.EBUSY)
	f.SetFault(ipvstest.FailNth(2, boom))
	k := tcp("10.0.0.1:80")
	err := f.Apply([]ipvs.Op{
		ipvs.AddServiceOp(ipvs.Service{ServiceKey: k, Scheduler: "rr"}),
		ipvs.AddDestinationOp(k, masq("10.1.0.1:80", 1)), // 2nd mutation: injected
		ipvs.AddDestinationOp(k, masq("10.1.0.2:80", 1)),
	})
	var be *ipvs.BatchError
	if !errors.As(err, &be) || len(be.Errors) != 1 || be.Errors[0].Index != 1 || !errors.Is(err, kerr.ErrBusy) || !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("Apply with fault on 2nd mutation: %v", err)
	}
	if got, want := mustDump(t, f), "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 1\n"; got != want {
		t.Errorf("state after the injected fault:\n%s\nwant\n%s", got, want)
	}
	if n := f.Mutations(); n != 3 {
		t.Errorf("Mutations() = %d, want 3", n)
	}

	// A targeted fault: fail every op touching one destination.
	f.SetFault(func(_ int, op ipvs.Op) error {
		if op.Destination.AddrPort() == ap("10.1.0.2:80") {
			return syscall.EIO
		}
		return nil
	})
	if err := f.DeleteDestination(k, ap("10.1.0.2:80")); !errors.Is(err, syscall.EIO) {
		t.Errorf("targeted fault: %v", err)
	}
	f.SetFault(nil)
	if err := f.DeleteDestination(k, ap("10.1.0.2:80")); err != nil {
		t.Errorf("after removing the fault: %v", err)
	}

	f.SetReadFault(func() error { return syscall.EIO })
	if _, err := f.Table(); !errors.Is(err, syscall.EIO) {
		t.Errorf("read fault: %v", err)
	}
	if _, err := f.Dump(); !errors.Is(err, syscall.EIO) {
		t.Errorf("read fault on Dump: %v", err)
	}
	f.SetReadFault(nil)
	if _, err := f.Table(); err != nil {
		t.Errorf("after removing the read fault: %v", err)
	}
}

func TestFakeCounters(t *testing.T) {
	f := ipvstest.NewFake()
	k := tcp("10.0.0.1:80")
	d := ap("10.1.0.1:80")
	if err := f.SetServiceStats(k, ipvs.Stats{Conns: 1}); !errors.Is(err, kerr.ErrNotFound) {
		t.Errorf("stats of a missing service: %v", err)
	}
	must(t, f.AddService(ipvs.Service{ServiceKey: k, Scheduler: "rr"}))
	must(t, f.AddDestination(k, masq(d.String(), 1)))
	svcStats := ipvs.Stats{Conns: 1 << 40, InPkts: 2, OutPkts: 3, InBytes: 4, OutBytes: 5, CPS: 6, InPPS: 7, OutPPS: 8, InBPS: 9, OutBPS: 10}
	must(t, f.SetServiceStats(k, svcStats))
	must(t, f.SetDestinationStats(k, d, ipvs.Stats{Conns: 11}))
	must(t, f.SetDestinationConns(k, d, 1, 2, 3))
	if err := f.SetDestinationConns(k, ap("10.1.0.9:80"), 1, 2, 3); !errors.Is(err, kerr.ErrNotFound) || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("conns of a missing destination: %v", err)
	}
	// Updates keep the counters, like the kernel.
	must(t, f.UpdateService(ipvs.Service{ServiceKey: k, Scheduler: "wrr"}))
	must(t, f.UpdateDestination(k, masq(d.String(), 3)))
	s, err := f.GetService(k)
	must(t, err)
	if ipvs.StatsOf(s.Stats) != svcStats || s.Scheduler != "wrr" {
		t.Errorf("service after update: %+v", s)
	}
	dests, err := f.Destinations(k)
	must(t, err)
	if len(dests) != 1 || dests[0].Stats.Conns != 11 || dests[0].ActiveConns != 1 || dests[0].InactiveConns != 2 ||
		dests[0].PersistentConns != 3 || dests[0].Weight != 3 {
		t.Errorf("destination after update: %+v", dests)
	}
	// Counters never reach Dump.
	if got, want := mustDump(t, f), "-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 3\n"; got != want {
		t.Errorf("Dump shows counters (or not the table):\n%s\nwant:\n%s", got, want)
	}
}

func TestFakeTimeoutsAndInfo(t *testing.T) {
	f := ipvstest.NewFake()
	to, err := f.Timeouts()
	must(t, err)
	if to != (ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300}) {
		t.Errorf("default timeouts %+v", to)
	}
	must(t, f.SetTimeouts(ipvs.Timeouts{TCP: 1000, TCPFin: 100, UDP: 200}))
	must(t, f.SetTimeouts(ipvs.Timeouts{TCPFin: 5}))
	if to, _ = f.Timeouts(); to != (ipvs.Timeouts{TCP: 1000, TCPFin: 5, UDP: 200}) {
		t.Errorf("timeouts after two sets: %+v", to)
	}
	if err := f.SetTimeouts(ipvs.Timeouts{UDP: 1 << 31}); !errors.Is(err, kerr.ErrInvalid) {
		t.Errorf("huge timeout: %v", err)
	}
	info, err := f.Info()
	must(t, err)
	if info.VersionString() != "1.2.1" || info.ConnTableSize != 4096 {
		t.Errorf("info %+v (%s)", info, info.VersionString())
	}
}

func TestFakeFlushAndClose(t *testing.T) {
	f := ipvstest.NewFake()
	must(t, f.AddService(ipvs.Service{ServiceKey: tcp("10.0.0.1:80"), Scheduler: "rr"}))
	must(t, f.Flush())
	if got := mustDump(t, f); got != "" {
		t.Errorf("after flush:\n%s", got)
	}
	must(t, f.Close())
	if err := f.AddService(ipvs.Service{ServiceKey: tcp("10.0.0.1:80"), Scheduler: "rr"}); !errors.Is(err, ipvs.ErrClosed) {
		t.Errorf("after close: %v", err)
	}
}

// Run with -race: concurrent writers and readers on one fake.
func TestFakeConcurrent(t *testing.T) {
	f := ipvstest.NewFake()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := tcp(fmt.Sprintf("10.0.%d.1:80", g))
			if err := f.AddService(ipvs.Service{ServiceKey: k, Scheduler: "rr"}); err != nil {
				t.Error(err)
				return
			}
			for i := range 20 {
				if err := f.AddDestination(k, masq(fmt.Sprintf("10.1.%d.%d:80", g, i+1), 1)); err != nil {
					t.Error(err)
				}
				if _, err := f.Table(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(mustDump(t, f), "\n"); n != 8*21 {
		t.Errorf("dump has %d lines, want %d", n, 8*21)
	}
}

func TestNormalize(t *testing.T) {
	s, err := ipvs.Service{ServiceKey: ipvs.ServiceKey{Protocol: inet.TCP, Addr: netip.MustParseAddr("::ffff:10.0.0.1"), Port: 80}, Scheduler: "rr",
		Flags: ipvs.FlagHashed | ipvs.FlagPersistent, Stats: &ipvs.Stats{Conns: 1}}.Normalize()
	must(t, err)
	if s.Family != inet.IPv4 || !s.Addr.Is4() || s.Flags != ipvs.FlagPersistent || s.Netmask != 0xffffffff || s.Stats != nil {
		t.Errorf("normalized IPv4 service: %+v", s)
	}
	s6, err := ipvs.Service{ServiceKey: tcp("[fd00::1]:80"), Scheduler: "rr"}.Normalize()
	must(t, err)
	if s6.Family != inet.IPv6 || s6.Netmask != 128 {
		t.Errorf("normalized IPv6 service: %+v", s6)
	}
	for _, bad := range []ipvs.ServiceKey{
		{},
		{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.0.0.1"), Family: inet.IPv6},
		{FWMark: 1, Family: inet.IPv4, Port: 80},
		{Protocol: inet.TCP, Addr: netip.MustParseAddr("fe80::1%eth0"), Port: 80},
	} {
		if _, err := bad.Normalize(); !errors.Is(err, kerr.ErrInvalid) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Normalize(%+v) = %v, want ErrInvalid/EINVAL", bad, err)
		}
	}
	if _, err := (ipvs.Service{ServiceKey: tcp("10.0.0.1:80"), Scheduler: "a-very-long-scheduler"}).Normalize(); !errors.Is(err, kerr.ErrInvalid) {
		t.Errorf("long scheduler name: %v", err)
	}
	d, err := ipvs.Destination{Addr: netip.MustParseAddr("10.1.0.1"), Port: 80, TunnelType: ipvs.TunnelGUE, TunnelPort: 1, ActiveConns: 3}.Normalize()
	must(t, err)
	if d.TunnelType != 0 || d.TunnelPort != 0 || d.ActiveConns != 0 {
		t.Errorf("normalized masq destination kept tunnel/counter fields: %+v", d)
	}
	if _, err := (ipvs.Destination{Addr: netip.MustParseAddr("10.1.0.1"), Forward: 4}).Normalize(); !errors.Is(err, kerr.ErrInvalid) {
		t.Errorf("bypass forwarding accepted: %v", err)
	}
}

// FormatDump sorts numerically (CompareServiceKeys, CompareDestinations) and otherwise
// writes what ipvsadm -Sn writes, thresholds aside: " -b " for scheduler flags without a
// name, a mark above 2^31 as a negative C int.
func TestFormatDumpOrderAndFlags(t *testing.T) {
	entries := []ipvs.Entry{
		{Service: ipvs.Service{ServiceKey: fwm(2, inet.IPv6), Scheduler: "rr"}},
		{Service: ipvs.Service{ServiceKey: fwm(1, inet.IPv4), Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 5, Netmask: 0xffffffff}},
		{Service: ipvs.Service{ServiceKey: udp("[fd00::1]:53"), Scheduler: "sh", Flags: ipvs.FlagSched1 | ipvs.FlagSched2 | ipvs.FlagSched3 | ipvs.FlagOnePacket}},
		{Service: ipvs.Service{ServiceKey: tcp("200.0.0.1:80"), Scheduler: "rr"}},
		{Service: ipvs.Service{ServiceKey: tcp("10.0.0.1:80"), Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 9, Netmask: 0xff00ff00, PEName: "sip"},
			Destinations: []ipvs.Destination{
				{Addr: netip.MustParseAddr("fd01::1"), Port: 80, Forward: ipvs.Tunnel, Weight: 1, TunnelType: ipvs.TunnelGUE, TunnelPort: 9, TunnelFlags: ipvs.TunnelRemCsum},
				masq("10.1.0.10:80", 2), masq("10.1.0.9:80", 1),
				{Addr: netip.MustParseAddr("10.1.0.9"), Port: 79, Forward: ipvs.Local, Weight: 1, UpperThreshold: 3},
			}},
		{Service: ipvs.Service{ServiceKey: sctp("10.0.0.1:80"), Scheduler: "rr", Flags: ipvs.FlagSched3}},
		{Service: ipvs.Service{ServiceKey: udp("10.0.0.1:80"), Scheduler: "mh", Flags: ipvs.FlagSched3}},
		{Service: ipvs.Service{ServiceKey: fwm(3000000000, inet.IPv4), Scheduler: "rr"}},
	}
	want := `-A -t 10.0.0.1:80 -s rr -p 9 -M 255.0.255.0 --pe sip
-a -t 10.0.0.1:80 -r 10.1.0.9:79 -g -w 1 -x 3 -y 0
-a -t 10.0.0.1:80 -r 10.1.0.9:80 -m -w 1
-a -t 10.0.0.1:80 -r 10.1.0.10:80 -m -w 2
-a -t 10.0.0.1:80 -r [fd01::1]:80 -i -w 1 --tun-type gue --tun-port 9 --tun-remcsum
-A -t 200.0.0.1:80 -s rr
-A -u 10.0.0.1:80 -s mh -b 
-A --sctp-service 10.0.0.1:80 -s rr -b flag-3
-A -u [fd00::1]:53 -s sh -o -b sh-fallback,sh-port
-A -f 1 -s rr -p 5
-A -f 2 -6 -s rr
-A -f -1294967296 -s rr
`
	if got := ipvs.FormatDump(entries); got != want {
		t.Errorf("FormatDump:\n%s\nwant:\n%s", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustDump(t *testing.T, i ipvs.Interface) string {
	t.Helper()
	s, err := i.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
